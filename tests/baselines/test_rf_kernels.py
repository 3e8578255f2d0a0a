"""The compiled random Fourier features kernels, against numpy and against their own other build."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from planted.baselines import _rf_kernels as kernels

EPS = np.finfo(float).eps
SOURCE = Path(kernels.__file__).resolve().parent
if not (SOURCE / "rf_kernels.h").is_file():  # an installed (non-editable) package: the repository copy
    SOURCE = Path(__file__).resolve().parents[2] / "baselines"


def numpy_features(inputs: np.ndarray, weights_t: np.ndarray) -> np.ndarray:
    """[cos(a); sin(a)], a = inputs @ weights_t summed over k in the kernel's order (BLAS may round differently)."""
    angles = inputs[:, :1] * weights_t[0]
    for k in range(1, inputs.shape[1]):
        angles = angles + inputs[:, k : k + 1] * weights_t[k]
    return np.hstack([np.cos(angles), np.sin(angles)])


def reference_grams(features: np.ndarray, starts, served, window: int, max_served: int):
    """Gram matrices and kernel rows from the definition (weights 1 / s.d.^2, 0 for a constant feature)."""
    grams = np.empty((len(starts), window, window))
    kerns = np.zeros((len(starts), max_served, window))
    for j, (start, m) in enumerate(zip(starts, served)):
        rows = features[start : start + window]
        var = rows.var(axis=0, ddof=1)
        w = np.divide(1.0, var, out=np.zeros_like(var), where=var > 0)
        grams[j] = (rows * w) @ rows.T
        kerns[j, :m] = (features[start + window : start + window + m] * w) @ rows.T
    return grams, kerns


def compiled_grams(inputs, weights_t, starts, served, window, max_served):
    grams = np.full((len(starts), window, window), np.nan)
    kerns = np.full((len(starts), max_served, window), np.nan)
    kernels.grams(inputs, weights_t, np.asarray(starts, dtype=np.intp), np.asarray(served, dtype=np.intp), grams, kerns)
    return grams, kerns


def test_sincos_within_an_ulp_or_two_of_numpy_including_the_library_fallback():
    rng = np.random.default_rng(0)
    angles = np.concatenate([
        rng.normal(0, 8, 20_001), rng.uniform(-8.2e5, 8.2e5, 20_000),  # the polynomial path
        rng.uniform(-1e9, 1e9, 1_000), [0.0, -0.0, np.pi / 4, -np.pi / 2, 823_549.0, 823_550.0, 1e300],
    ])
    cos, sin = np.empty_like(angles), np.empty_like(angles)
    kernels.sincos(angles, cos, sin)
    assert np.abs(cos - np.cos(angles)).max() <= 2 * EPS  # within two units of the last place of 1
    assert np.abs(sin - np.sin(angles)).max() <= 2 * EPS
    assert np.signbit(sin[40_002])  # sin(-0) = -0
    special = np.array([np.inf, -np.inf, np.nan])
    c, s = np.empty(3), np.empty(3)
    with np.errstate(invalid="ignore"):
        kernels.sincos(special, c, s)
    assert np.isnan(c).all() and np.isnan(s).all()


def test_sincos_value_does_not_depend_on_its_position_in_the_array():
    angles = np.random.default_rng(1).normal(0, 30, 11)
    cos, sin = np.empty(11), np.empty(11)
    kernels.sincos(angles, cos, sin)  # lanes of four and a padded tail of three
    for i in range(11):
        c, s = np.empty(1), np.empty(1)
        kernels.sincos(angles[i : i + 1], c, s)
        assert c[0] == cos[i] and s[0] == sin[i]


@pytest.mark.parametrize(
    ("window", "step", "max_served", "half"),
    [(12, 1, 1, 300), (12, 12, 12, 300), (5, 1, 1, 300), (7, 3, 4, 130), (6, 1, 3, 6), (12, 1, 0, 300),
     (12, 1, 1, 6_000), (4, 9, 2, 300)],
)
def test_grams_and_kernel_rows_match_the_definition(window, step, max_served, half):
    # half = 300 and 130 leave a last block of 44 and 2 frequencies; step 9 > window skips rows
    rng = np.random.default_rng(3)
    n_rows = 60
    weights_t = 2.0 * rng.standard_normal((9, half))
    weights_t[:, 7 % half] = 0.0  # a zero frequency: constant features cos = 1 and sin = 0 get weight 0
    inputs = rng.standard_normal((n_rows, 9))
    starts = np.arange(0, n_rows - window - max_served + 1, step)
    served = np.full(starts.size, max_served)
    served[-1] = max(0, max_served - 1)  # a last refit that serves fewer rows
    grams, kerns = compiled_grams(inputs, weights_t, starts, served, window, max_served)
    want_grams, want_kerns = reference_grams(numpy_features(inputs, weights_t), starts, served, window, max_served)
    # The window sums slide (deviations from an anchor row up to a window back), so a feature nearly
    # constant within the window but not since the anchor loses some relative precision in its
    # variance; sin and cos differ from numpy's by an ulp or two: agreement to 1e-11 of the largest
    # entry here, with weights up to ~1e4.
    scale = np.abs(want_grams).max()
    np.testing.assert_allclose(grams, want_grams, rtol=0, atol=1e-11 * scale)
    np.testing.assert_allclose(kerns, want_kerns, rtol=0, atol=1e-11 * scale)
    assert np.array_equal(grams, grams.transpose(0, 2, 1))
    assert (kerns[-1, served[-1] :] == 0).all()


def test_angles_beyond_the_reduction_limit_use_the_library():
    rng = np.random.default_rng(5)
    inputs = rng.standard_normal((20, 2))
    inputs[:, 1] = 1e14 * (1 + 0.01 * rng.standard_normal(20))  # angles near 1e14 for input 1
    weights_t = rng.standard_normal((2, 8))
    weights_t[1, :4] = 0.0  # four frequencies with small angles, four beyond the limit
    starts, served = np.arange(0, 7), np.ones(7, dtype=np.intp)
    grams, kerns = compiled_grams(inputs, weights_t, starts, served, 12, 1)
    want_grams, want_kerns = reference_grams(numpy_features(inputs, weights_t), starts, served, 12, 1)
    scale = np.abs(want_grams).max()
    np.testing.assert_allclose(grams, want_grams, rtol=0, atol=1e-11 * scale)
    np.testing.assert_allclose(kerns, want_kerns, rtol=0, atol=1e-11 * scale)


def test_grams_reject_bad_refits_and_shapes():
    inputs, weights_t = np.zeros((20, 2)), np.ones((2, 4))
    grams, kerns = np.empty((2, 5, 5)), np.empty((2, 1, 5))
    one = np.ones(2, dtype=np.intp)
    with pytest.raises(ValueError, match="increasing"):
        kernels.grams(inputs, weights_t, np.array([3, 3], dtype=np.intp), one, grams, kerns)
    with pytest.raises(ValueError, match="outside"):
        kernels.grams(inputs, weights_t, np.array([3, 15], dtype=np.intp), one, grams, kerns)
    with pytest.raises(ValueError, match="even"):
        kernels.grams(inputs, np.ones((2, 5)), np.array([3, 4], dtype=np.intp), one, grams, kerns)
    with pytest.raises(ValueError, match="shape"):
        kernels.grams(inputs, np.ones((3, 4)), np.array([3, 4], dtype=np.intp), one, grams, kerns)


def _build(tmp_path: Path, name: str, flags: list[str]) -> ctypes.CDLL:
    library = tmp_path / f"{name}.so"
    subprocess.run(
        ["cc", "-O3", "-ffp-contract=off", "-Wno-psabi", "-DPLANTED_NO_CLONES", "-shared", "-fPIC", *flags,
         str(SOURCE / "rf_kernels.c"), "-o", str(library), "-lm"],
        check=True, capture_output=True,
    )
    lib = ctypes.CDLL(str(library))
    double_p, index_p, long = ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_ssize_t), ctypes.c_long
    lib.rf_grams.argtypes = [double_p, long, double_p, long, index_p, index_p, long, long, long, double_p, double_p]
    return lib


def _run(lib: ctypes.CDLL, inputs, weights_t, starts, served, window, max_served):
    grams = np.zeros((starts.size, window, window))
    kerns = np.zeros((starts.size, max_served, window))
    ptr = lambda a: a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))  # noqa: E731
    index = lambda a: a.ctypes.data_as(ctypes.POINTER(ctypes.c_ssize_t))  # noqa: E731
    assert lib.rf_grams(ptr(inputs), inputs.shape[1], ptr(weights_t), weights_t.shape[1], index(starts), index(served),
                        starts.size, window, max_served, ptr(grams), ptr(kerns)) == 0
    return grams, kerns


@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64", reason="x86-64 builds only")
def test_avx2_and_baseline_builds_return_the_same_bits(tmp_path):
    if shutil.which("cc") is None:
        if os.environ.get("CI"):
            pytest.fail("no C compiler (cc) in CI, which builds the extension with one")
        pytest.skip("no C compiler (cc)")
    rng = np.random.default_rng(4)
    half, window = 1_030, 12  # a last block of 6 frequencies
    inputs, weights_t = rng.standard_normal((80, 9)) * 3, np.ascontiguousarray(2.0 * rng.standard_normal((9, half)))
    for step, max_served in [(1, 1), (12, 12)]:
        starts = np.arange(0, 80 - window - max_served + 1, step, dtype=np.intp)
        served = np.full(starts.size, max_served, dtype=np.intp)
        baseline = _run(_build(tmp_path, "baseline", ["-march=x86-64"]), inputs, weights_t, starts, served, window,
                        max_served)
        installed = compiled_grams(inputs, weights_t, starts, served, window, max_served)  # the build this CPU selects
        for got, want in zip(installed, baseline):
            assert np.array_equal(got, want)
        if "avx2" in Path("/proc/cpuinfo").read_text():
            avx2 = _run(_build(tmp_path, "avx2", ["-march=x86-64-v3"]), inputs, weights_t, starts, served, window,
                        max_served)
            for got, want in zip(avx2, baseline):
                assert np.array_equal(got, want)

"""Tests of the IVX Wald test against the published outputs of the R package ``ivx``.

References: the README of ``ivx`` (kvasilopoulos/ivx; ``summary(ivx(Ret ~ DP, data = kms))`` and
``Ret ~ DP + TBL``) and its ``tests/testthat/test-ivx.R`` (``Ret ~ DE``), as copied into
``shared/data/README.md``; plus an independent plain-Python implementation written below.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from planted.baselines.ivx import ivx_bandwidth, ivx_wald, ivx_wald_multi

RTOL_IMPLEMENTATIONS = 1e-10
"""Agreement of the vectorised, matrix and loop implementations (observed ~1e-13)."""
RTOL_INVARIANCE = 1e-9
"""Invariance to x -> a x and y -> c y + d holds exactly in theory; rounding only (observed ~1e-13)."""


def _printed(value: float, printed: str) -> bool:
    """Whether ``value`` rounds to ``printed`` at the number of decimals printed."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return round(float(value), decimals) == float(printed)


@pytest.fixture(scope="module")
def kms(kms_file: Path) -> pd.DataFrame:
    return pd.read_csv(kms_file)


# ---------------------------------------------------------------- published outputs


def test_kms_dp_matches_published(kms: pd.DataFrame) -> None:
    y, x = kms["LOG_EXCESS_VW"].to_numpy(), kms["D/P"].to_numpy()
    assert len(y) - 1 == 1032
    res = ivx_wald(y, x)
    assert _printed(res.coef, "0.006489")
    assert _printed(res.wald, "2.031")
    assert _printed(res.pvalue, "0.1541")
    multi = ivx_wald_multi(y, x)
    assert _printed(multi.coef[0], "0.006489")
    assert _printed(multi.wald, "2.031")
    assert _printed(multi.wald_ind[0], "2.031")
    assert _printed(multi.pvalue, "0.1541")
    assert _printed(multi.pvalue_ind[0], "0.154")


def test_kms_de_matches_published(kms: pd.DataFrame) -> None:
    res = ivx_wald(kms["LOG_EXCESS_VW"].to_numpy(), kms["D/E"].to_numpy())
    assert _printed(res.coef, "-0.0033")
    assert _printed(res.wald, "0.393")


def test_kms_dp_tbl_matches_published(kms: pd.DataFrame) -> None:
    res = ivx_wald_multi(kms["LOG_EXCESS_VW"].to_numpy(), kms[["D/P", "TBL"]].to_numpy(), names=["DP", "TBL"])
    assert res.df == 2
    assert _printed(res.coef[0], "0.006145")
    assert _printed(res.coef[1], "-0.080717")
    assert _printed(res.wald_ind[0], "1.819")
    assert _printed(res.wald_ind[1], "1.957")
    assert _printed(res.pvalue_ind[0], "0.177")
    assert _printed(res.pvalue_ind[1], "0.162")
    assert _printed(res.wald, "3.644")
    assert _printed(res.pvalue, "0.1617")
    assert list(res.to_frame().index) == ["DP", "TBL"]
    assert "Joint Wald statistic: 3.644 on 2 DF, p-value 0.1617" in str(res)


def test_bandwidth_follows_the_package_exponent() -> None:
    # ivx_fit_cpp: floor(pow(nn, 0.3333333)), one lag short of floor(n^(1/3)) at perfect cubes
    assert ivx_bandwidth(1032) == 10
    assert ivx_bandwidth(687) == 8
    assert ivx_bandwidth(343) == 6
    assert ivx_bandwidth(344) == 7
    assert ivx_bandwidth(1000) == 9


# ---------------------------------------------------------------- independent implementation


def _ivx_loop(y: list[float], x: list[float]) -> tuple[float, float]:
    """(A_ivx, Wald) of one predictor with explicit loops, written from the KMS (2015) formulas."""
    n = len(x) - 1
    yt = [y[t] for t in range(1, n + 1)]
    xl = [x[t - 1] for t in range(1, n + 1)]
    xt = [x[t] for t in range(1, n + 1)]
    y_mean, x_mean = sum(yt) / n, sum(xl) / n
    y_dm = [v - y_mean for v in yt]
    x_dm = [v - x_mean for v in xl]
    b_ols = sum(a * b for a, b in zip(x_dm, y_dm)) / sum(a * a for a in x_dm)
    eps = [y_dm[t] - b_ols * x_dm[t] for t in range(n)]
    rho = sum(xl[t] * xt[t] for t in range(n)) / sum(xl[t] ** 2 for t in range(n))
    u = [xt[t] - rho * xl[t] for t in range(n)]

    lags = math.floor(n**0.3333333)
    s_ee = sum(e * e for e in eps) / n
    omega_uu = sum(v * v for v in u) / n
    omega_ue = sum(u[t] * eps[t] for t in range(n)) / n
    for h in range(1, lags + 1):
        w = 1.0 - h / (1.0 + lags)
        acc_uu = 0.0
        acc_ue = 0.0
        for t in range(h, n):
            acc_uu += u[t] * u[t - h]
            acc_ue += u[t] * eps[t - h]
        omega_uu += 2.0 * w * acc_uu / n
        omega_ue += w * acc_ue / n
    s_fm = s_ee - omega_ue**2 / omega_uu

    r_z = 1.0 - 1.0 / n**0.95
    z = [0.0] * n
    z[0] = xt[0] - xl[0]
    for t in range(1, n):
        z[t] = r_z * z[t - 1] + (xt[t] - xl[t])
    inst = [0.0] + z[:-1]
    zx = sum(inst[t] * x_dm[t] for t in range(n))
    zy = sum(inst[t] * y_dm[t] for t in range(n))
    zz = sum(v * v for v in inst)
    z_bar = sum(inst) / n
    coef = zy / zx
    m_stat = zz * s_ee - n * z_bar**2 * s_fm
    q = m_stat / zx**2
    return coef, coef**2 / q


def _simulate(
    rng: np.random.Generator, shape: tuple[int, ...], n_obs: int, phi: float
) -> tuple[np.ndarray, np.ndarray]:
    """Predictive system with a persistent predictor (level offset) and correlated shocks."""
    shocks = rng.multivariate_normal([0.0, 0.0], [[1.0, -0.8], [-0.8, 1.0]], size=(*shape, n_obs))
    x = np.empty((*shape, n_obs))
    x[..., 0] = shocks[..., 0, 1]
    for t in range(1, n_obs):
        x[..., t] = phi * x[..., t - 1] + shocks[..., t, 1]
    x = 3.0 + 0.5 * x
    y = np.empty((*shape, n_obs))
    y[..., 0] = 0.0
    y[..., 1:] = 0.01 + 0.02 * x[..., :-1] + 0.5 * shocks[..., 1:, 0]
    return y, x


@pytest.mark.parametrize(("n_obs", "phi"), [(60, 0.9), (344, 1.0), (688, 0.98), (688, 0.5)])
def test_vectorised_matches_loop_and_multi(n_obs: int, phi: float) -> None:
    rng = np.random.default_rng(20150601 + n_obs)
    y, x = _simulate(rng, (2, 3), n_obs, phi)
    res = ivx_wald(y, x)
    assert res.coef.shape == res.wald.shape == res.pvalue.shape == (2, 3)
    for idx in np.ndindex(2, 3):
        coef, wald = _ivx_loop(y[idx].tolist(), x[idx].tolist())
        np.testing.assert_allclose(res.coef[idx], coef, rtol=RTOL_IMPLEMENTATIONS)
        np.testing.assert_allclose(res.wald[idx], wald, rtol=RTOL_IMPLEMENTATIONS)
        np.testing.assert_allclose(res.pvalue[idx], stats.chi2.sf(wald, 1), rtol=RTOL_IMPLEMENTATIONS)
        multi = ivx_wald_multi(y[idx], x[idx])
        np.testing.assert_allclose(multi.coef[0], res.coef[idx], rtol=RTOL_IMPLEMENTATIONS)
        np.testing.assert_allclose(multi.wald, res.wald[idx], rtol=RTOL_IMPLEMENTATIONS)
        np.testing.assert_allclose(multi.wald_ind[0], res.wald[idx], rtol=RTOL_IMPLEMENTATIONS)
        np.testing.assert_allclose(multi.pvalue, res.pvalue[idx], rtol=RTOL_IMPLEMENTATIONS)


def test_multi_individual_wald_is_diagonal_of_joint() -> None:
    rng = np.random.default_rng(7)
    y, x1 = _simulate(rng, (), 400, 0.97)
    x2 = np.cumsum(rng.standard_normal(400))
    res = ivx_wald_multi(y, np.column_stack([x1, x2]))
    np.testing.assert_allclose(res.wald_ind, res.coef**2 / np.diag(res.vcov), rtol=RTOL_IMPLEMENTATIONS)
    np.testing.assert_allclose(res.vcov, res.vcov.T, rtol=1e-8)
    assert res.names == ("x1", "x2")


def test_broadcast_one_return_series_over_candidates() -> None:
    rng = np.random.default_rng(11)
    y, _ = _simulate(rng, (4, 1), 300, 0.95)
    x = np.cumsum(rng.standard_normal((4, 9, 300)), axis=-1)
    res = ivx_wald(y, x)
    assert res.wald.shape == (4, 9)
    for world, cand in np.ndindex(4, 9):
        single = ivx_wald(y[world, 0], x[world, cand])
        np.testing.assert_allclose(res.wald[world, cand], single.wald, rtol=RTOL_IMPLEMENTATIONS)
        np.testing.assert_allclose(res.coef[world, cand], single.coef, rtol=RTOL_IMPLEMENTATIONS)


# ---------------------------------------------------------------- invariance properties


@pytest.mark.parametrize("a", [-3.0, -0.01, 0.37, 250.0])
@pytest.mark.parametrize(("c", "d"), [(1.0, 0.0), (1e-3, 0.2), (7.0, -5.0)])
def test_invariant_to_scaling_x_and_affine_y(a: float, c: float, d: float) -> None:
    rng = np.random.default_rng(3)
    y, x = _simulate(rng, (5,), 500, 0.99)
    base = ivx_wald(y, x)
    moved = ivx_wald(c * y + d, a * x)
    np.testing.assert_allclose(moved.wald, base.wald, rtol=RTOL_INVARIANCE)
    np.testing.assert_allclose(moved.pvalue, base.pvalue, rtol=RTOL_INVARIANCE)
    np.testing.assert_allclose(moved.coef, base.coef * c / a, rtol=RTOL_INVARIANCE)


def test_shift_of_x_moves_wald_but_not_coef(kms: pd.DataFrame) -> None:
    """The package's AR(1) has no intercept, so u (hence Omega and M) depend on the level of x.

    A_ivx is shift-invariant (demeaned X, differenced instrument); the Wald statistic is not. On
    the KMS data, D/P + 5 gives 2.025 instead of 2.031. Pinned so nobody "fixes" the convention.
    """
    y, x = kms["LOG_EXCESS_VW"].to_numpy(), kms["D/P"].to_numpy()
    base, shifted = ivx_wald(y, x), ivx_wald(y, x + 5.0)
    np.testing.assert_allclose(shifted.coef, base.coef, rtol=RTOL_INVARIANCE)
    assert abs(float(shifted.wald) / float(base.wald) - 1.0) > 1e-3
    assert _printed(shifted.wald, "2.025")


# ---------------------------------------------------------------- input checks


def test_rejects_mismatched_or_short_input() -> None:
    with pytest.raises(ValueError, match="same time length"):
        ivx_wald(np.zeros(10), np.zeros(11))
    with pytest.raises(ValueError, match="at least"):
        ivx_wald(np.arange(3.0), np.arange(3.0))
    with pytest.raises(ValueError, match="same T"):
        ivx_wald_multi(np.zeros(10), np.zeros((11, 2)))
    with pytest.raises(ValueError, match="names"):
        ivx_wald_multi(np.arange(20.0), np.ones((20, 2)), names=["a"])

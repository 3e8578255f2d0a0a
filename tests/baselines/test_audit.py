"""The world audit: detectors against independent implementations, flags on planted artifacts, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from planted.baselines.audit import SANITY, AuditConfig, detect, run_audit, summarise
from planted.baselines.detectors import (LGBM_PARAMS, N_NEIGHBOURS, Window, boosted_trees, knn_predict, lookup_exact,
                                         lookup_nearest)
from planted.baselines.panel import Panel
from planted.cli import main
from planted.worlds import WorldSpec


def _loop_lookup(r: np.ndarray, k: int, window: Window, nearest: bool) -> np.ndarray:
    """The lookup forecasters written as the definition: scan every earlier k-tuple."""
    out = np.full(r.size, np.nan)
    for m in range(window.first, window.last):
        key = r[m - k : m]
        past = [(j, float(((r[j : j + k] - key) ** 2).sum())) for j in range(0, m - k)]
        if nearest and past:
            best = min(d for _, d in past)
            matches = [j for j, d in past if d == best]
        else:
            matches = [j for j, _ in past if np.array_equal(r[j : j + k], key)]
        out[m] = np.mean([r[j + k] for j in matches]) if matches else r[:m].mean()
    return out


@pytest.mark.parametrize("k", [1, 2, 3])
def test_lookups_equal_the_definition(k):
    rng = np.random.default_rng(k)
    r = rng.choice(rng.normal(size=12), size=160)  # a small pool: many exact repeats
    window = Window(80, 160)
    np.testing.assert_allclose(lookup_exact(r, k, window)[80:], _loop_lookup(r, k, window, False)[80:], rtol=0, atol=1e-15)
    smooth = rng.normal(size=160)
    np.testing.assert_allclose(lookup_nearest(smooth, k, window)[80:], _loop_lookup(smooth, k, window, True)[80:],
                               rtol=0, atol=1e-15)


def test_knn_equals_scikit_learn():
    from sklearn.neighbors import KNeighborsRegressor

    rng = np.random.default_rng(3)
    x, y, q = rng.normal(size=(200, 12)), rng.normal(size=200), rng.normal(size=(30, 12))
    reference = KNeighborsRegressor(n_neighbors=N_NEIGHBOURS, algorithm="brute").fit(x, y).predict(q)
    np.testing.assert_allclose(knn_predict(x, y, q, N_NEIGHBOURS), reference, rtol=1e-12, atol=1e-14)


def _panel(returns: np.ndarray, candidates: np.ndarray | None = None, n_train: int | None = None) -> Panel:
    n, T = returns.shape
    if candidates is None:
        candidates = np.random.default_rng(T).normal(size=(n, 9, T))
    return Panel(returns=returns, candidates=candidates, n_train=n_train or T // 2, oracle=candidates[:, 0, :],
                 signal=np.zeros(n, bool), seeds=tuple(np.random.SeedSequence([7, i]) for i in range(n)))


def test_boosted_trees_equal_lightgbm_called_directly():
    import lightgbm

    rng = np.random.default_rng(5)
    panel = _panel(rng.normal(size=(1, 300)), n_train=240)
    window = Window(240, 300)
    forecasts = boosted_trees(panel, window)[0]
    r, x = panel.returns[0], panel.candidates[0].T
    lags = np.column_stack([np.r_[np.full(lag, np.nan), r[: r.size - lag]] for lag in range(12)])
    features = np.hstack([lags, x])
    rows = np.arange(11, 239)  # pairs (features[t], r[t+1]) with t + 1 < 240 and every lag known
    from planted.baselines.panel import PROCEDURE_STREAM
    from planted.seeding import generator

    seed = int(generator(panel.seeds[0], PROCEDURE_STREAM, 1).integers(2**31 - 1))
    model = lightgbm.LGBMRegressor(random_state=seed, **LGBM_PARAMS).fit(features[rows], r[rows + 1])
    np.testing.assert_allclose(forecasts[240:300], model.predict(features[239:299]), rtol=1e-12)


def test_a_planted_artifact_is_flagged_and_a_clean_family_is_not():
    """A tiny repeating pool is flagged by the exact lookup; i.i.d. Gaussian returns flag nothing (at a
    level of 5%, Holm across the detectors, on 40 worlds); a candidate that leaks a nonlinear function
    of the next return is flagged by a detector that sees candidates."""
    rng = np.random.default_rng(11)
    n, T = 40, 480
    pooled = np.stack([np.tile(rng.normal(size=16), T // 16) for _ in range(n)])  # a repeating 16-month cycle
    clean = rng.normal(size=(n, T))
    leak = clean.copy()
    candidates = rng.normal(size=(n, 9, T))
    candidates[:, 2, :-1] = np.tanh(3 * leak[:, 1:]) + 0.3 * rng.normal(size=(n, T - 1))  # x3[t] ~ tanh(r[t+1])
    detectors = ("lookup_exact_1", "lookup_nearest_2", "knn_lags", "knn_candidates", "lightgbm")

    def flags(panel: Panel) -> set[str]:
        table = summarise(detect(panel, detectors).assign(family="f"), 0.05)
        return set(table.loc[table["flagged"], "detector"])

    assert "lookup_exact_1" in flags(_panel(pooled))
    assert flags(_panel(clean)) == set()
    assert flags(_panel(leak, candidates)) & {"knn_candidates", "lightgbm"}


def test_the_audit_command_writes_its_outputs(tmp_path, capsys):
    out = tmp_path / "audit"
    assert main(["audit", "--family", "linear", "--r2", "0.01", "--phi", "0.95", "--rho", "-0.8", "--shocks", "gaussian",
                 "--worlds", "6", "--quiet", "--out", str(out)]) in (0, 1)
    assert "audit:" in capsys.readouterr().out
    verdict = json.loads((out / "audit.json").read_text())
    assert verdict["families"] == ["linear_r2=0_phi=0.95_rho=-0.8_gaussian"]  # the audit's worlds are null
    assert SANITY in verdict["detectors"] and len(verdict["pool"]["sha256"]) == 64
    worlds = pd.read_parquet(out / "audit_worlds.parquet")
    assert set(worlds["window"]) == {"pseudo", "test"} and worlds["world"].nunique() == 6
    assert {"repeated_share", "bds_p", "ljung_box_sq_p"} <= set(worlds.columns)
    assert (out / "audit.png").stat().st_size > 0 and "World audit" in (out / "audit.md").read_text()
    assert main(["audit", "--worlds", "6", "--out", str(tmp_path / "x")]) == 2
    assert "either --study NAME" in capsys.readouterr().err


@pytest.mark.slow
def test_bootstrap_null_worlds_are_flagged_and_gaussian_ones_are_not():
    """200 null worlds each: the embedded pool's repeats are found by a lookup detector; in the Gaussian
    linear, persistent-null and momentum-looking null worlds and the injected HML null worlds (the real
    series itself) no detector is flagged and every claim
    rate is within its Wilson interval of 5% or below."""
    boot = run_audit(AuditConfig(specs=(WorldSpec(family="linear", r2=0.0, phi=0.95, rho=-0.8, shocks="bootstrap"),),
                                 worlds=200, n_jobs=2), progress=False)
    assert any(d.startswith("lookup_exact") for pairs in boot.flagged.values() for d in pairs)
    gaussian = (WorldSpec(family="linear", r2=0.0, phi=0.95, rho=-0.8, shocks="gaussian"),
                WorldSpec(family="persistent_null", shocks="gaussian"), WorldSpec(family="momentum_null", shocks="gaussian"),
                WorldSpec(family="injected", factor="HML", r2=0.0))
    gauss = run_audit(AuditConfig(specs=gaussian, worlds=200, n_jobs=2), progress=False)
    assert gauss.flagged == {}
    tested = gauss.table[gauss.table["tested"]]  # the momentum-looking null's selection window is not tested
    assert (tested["rate_low"] <= 0.05).all(), tested

"""Calibration measures against scikit-learn, statsmodels and direct re-implementations."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import brier_score_loss, roc_auc_score
from sklearn.model_selection import GroupKFold

from planted.analysis import calibration as cal

from .simulate import Agent, study


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    return study("v1", [Agent(size=0.2, power=0.6, framing_shift=0.1)], seed=21)


def _sample(n: int, seed: int, a: float = 0.0, b: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = np.round(rng.beta(1.5, 2.5, n), 2)
    z = np.log(np.clip(p, 0.005, 0.995) / (1 - np.clip(p, 0.005, 0.995)))
    y = rng.random(n) < 1 / (1 + np.exp(-(a + b * z)))
    return p, y


# ---------------------------------------------------------------- logistic fits


def test_fit_logit_matches_statsmodels_logit_and_glm():
    rng = np.random.default_rng(0)
    n = 500
    X = np.column_stack([np.ones(n), rng.normal(size=n), rng.integers(0, 2, n)])
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ [0.3, -0.8, 1.1])))).astype(float)
    ours = cal.fit_logit(y, X)
    ref = sm.Logit(y, X).fit(disp=0)
    glm = sm.GLM(y, X, family=sm.families.Binomial()).fit()
    assert ours.status == "ok"
    np.testing.assert_allclose(ours.params, ref.params, rtol=1e-9)
    np.testing.assert_allclose(ours.params, glm.params, rtol=1e-8)
    np.testing.assert_allclose(ours.cov, ref.cov_params(), rtol=1e-7)
    assert ours.loglike == pytest.approx(ref.llf, rel=1e-12)
    groups = rng.integers(0, 120, n)
    clustered = cal.fit_logit(y, X, groups=groups)
    ref_c = sm.Logit(y, X).fit(disp=0, cov_type="cluster", cov_kwds={"groups": groups})
    np.testing.assert_allclose(clustered.cov, ref_c.cov_params(), rtol=1e-7)
    assert clustered.n_clusters == len(np.unique(groups))


def test_separation_is_flagged_not_warned():
    x = np.array([0.1, 0.2, 0.3, 0.6, 0.7, 0.9])
    X = np.column_stack([np.ones(6), x])
    complete = np.array([0, 0, 0, 1, 1, 1.0])
    assert cal.is_separated(complete, X)
    fit = cal.fit_logit(complete, X)
    assert fit.status == "separation" and np.isnan(fit.params).all()
    quasi = np.column_stack([np.ones(8), [0, 0, 0, 0.5, 0.5, 1, 1, 1.0]])
    assert cal.is_separated(np.array([0, 0, 0, 0, 1, 1, 1, 1.0]), quasi)
    assert cal.fit_logit(np.ones(6), X).status == "separation"  # constant outcome
    assert not cal.is_separated(np.array([0, 1, 0, 1, 0, 1.0]), X)
    assert cal.fit_logit(complete, np.column_stack([np.ones(6), x, 2 * x])).status == "singular"
    assert np.isnan(cal.calibration_wald(complete.astype(bool), x).pvalue)


def test_calibration_intercept_and_slope_recover_the_truth():
    p, y = _sample(20000, 1, a=1.05, b=0.36)
    fit = cal.calibration_fit(y, p)
    assert fit.coef("intercept") == pytest.approx(1.05, abs=4 * fit.se("intercept"))
    assert fit.coef("slope") == pytest.approx(0.36, abs=4 * fit.se("slope"))


# ---------------------------------------------------------------- scores


def test_brier_and_skill():
    p, y = _sample(700, 2)
    assert cal.brier_score(p, y) == pytest.approx(brier_score_loss(y, p), rel=1e-12)
    unc = y.mean() * (1 - y.mean())
    assert cal.brier_skill(p, y) == pytest.approx(1 - brier_score_loss(y, p) / unc, rel=1e-12)
    base = np.full(y.size, y.mean())
    assert cal.brier_skill(base, y) == pytest.approx(0.0, abs=1e-12)


def _murphy_reference(p: np.ndarray, y: np.ndarray, key: np.ndarray) -> dict[str, float]:
    d = pd.DataFrame({"p": p, "y": y.astype(float), "k": key})
    g = d.groupby("k").agg(n=("p", "size"), pbar=("p", "mean"), obar=("y", "mean"))
    d = d.join(g, on="k")
    obar, n = d["y"].mean(), len(d)
    return {
        "reliability": float((g["n"] * (g["pbar"] - g["obar"]) ** 2).sum() / n),
        "resolution": float((g["n"] * (g["obar"] - obar) ** 2).sum() / n),
        "within_variance": float(((d["p"] - d["pbar"]) ** 2).sum() / n),
        "within_covariance": float(((d["p"] - d["pbar"]) * (d["y"] - d["obar"])).sum() / n),
    }


def test_murphy_decomposition_identities_and_reference():
    p, y = _sample(900, 3)
    exact = cal.murphy_decomposition(p, y, n_bins=None)
    assert exact.within_variance == pytest.approx(0.0, abs=1e-15) and exact.within_covariance == pytest.approx(0.0, abs=1e-15)
    assert exact.brier == pytest.approx(exact.reliability - exact.resolution + exact.uncertainty, abs=1e-14)
    binned = cal.murphy_decomposition(p, y, n_bins=10)
    assert binned.identity_residual == pytest.approx(0.0, abs=1e-14)
    ref = _murphy_reference(p, y, np.minimum((p * 10 + 1e-9).astype(int), 9))
    for name, value in ref.items():
        assert getattr(binned, name) == pytest.approx(value, rel=1e-10, abs=1e-15)
    assert binned.uncertainty == pytest.approx(y.mean() * (1 - y.mean()))
    assert "REL" in str(binned) and binned.to_frame().shape == (1, 8)


def test_bins_put_decimal_edges_in_the_upper_bin():
    np.testing.assert_array_equal(cal.bin_index(np.array([0.0, 0.1, 0.3, 0.7, 0.57, 0.999, 1.0])), [0, 1, 3, 7, 5, 9, 9])


def test_ece_matches_a_loop():
    p, y = _sample(600, 4)
    ref = 0.0
    for k in range(10):
        inside = (p >= k / 10 - 1e-12) & ((p < (k + 1) / 10 - 1e-12) if k < 9 else (p <= 1))
        if inside.any():
            ref += inside.mean() * abs(p[inside].mean() - y[inside].mean())
    assert cal.expected_calibration_error(p, y) == pytest.approx(ref, rel=1e-12)


def test_ece_bootstrap_resamples_worlds():
    """The vectorised cluster bootstrap against an explicit loop that draws worlds (same law)."""
    rng = np.random.default_rng(5)
    n_worlds = 150
    world_p = rng.uniform(0.05, 0.95, n_worlds)
    world_y = rng.random(n_worlds) < 0.6  # one label per world, three runs each
    worlds = np.repeat(np.arange(n_worlds), 3)
    p = np.clip(world_p[worlds] + rng.normal(0, 0.05, worlds.size), 0, 1)
    y = world_y[worlds]
    est = cal.ece_bootstrap(p, y, worlds, rng=np.random.default_rng(6), n_boot=3000)
    assert est.value == pytest.approx(cal.expected_calibration_error(p, y))
    assert est.n == 450 and est.n_clusters == n_worlds and est.low < est.value < est.high
    loop_rng = np.random.default_rng(7)
    draws = []
    for _ in range(3000):
        pick = loop_rng.integers(n_worlds, size=n_worlds)
        idx = (pick[:, None] * 3 + np.arange(3)).ravel()
        draws.append(cal.expected_calibration_error(p[idx], y[idx]))
    low, high = np.quantile(draws, [0.025, 0.975])
    assert est.low == pytest.approx(low, abs=0.012) and est.high == pytest.approx(high, abs=0.012)
    naive = cal.ece_bootstrap(p, y, np.arange(p.size), rng=np.random.default_rng(6), n_boot=3000)
    assert naive.high - naive.low < est.high - est.low  # ignoring clusters understates uncertainty
    again = cal.ece_bootstrap(p, y, worlds, rng=np.random.default_rng(6), n_boot=3000)
    assert (again.low, again.high) == (est.low, est.high)


def test_auc_matches_sklearn_with_ties():
    p, y = _sample(500, 8)
    assert cal.auc(p, y) == pytest.approx(roc_auc_score(y, p), rel=1e-12)
    assert cal.auc(np.round(p, 1), y) == pytest.approx(roc_auc_score(y, np.round(p, 1)), rel=1e-12)
    assert np.isnan(cal.auc(p, np.ones_like(y)))


# ---------------------------------------------------------------- run tables


def test_labels():
    runs = pd.DataFrame({"economic": [True, False, True], "signal": [1, 0, 0], "test_oos_r2": [0.01, np.nan, -0.02]})
    np.testing.assert_array_equal(cal.outcome_labels(runs, "own"), [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(cal.outcome_labels(runs, "economic"), [1.0, 0.0, 1.0])
    with pytest.raises(ValueError):
        cal.outcome_labels(runs, "oracle")  # type: ignore[arg-type]


def test_calibration_summary_on_a_run_table(runs):
    summary = cal.calibration_summary(runs, rng=np.random.default_rng(0), n_boot=500)
    p, y = runs["probability"].to_numpy(), runs["economic"].to_numpy()
    assert summary.n == len(runs) and summary.n_worlds == runs["world_id"].nunique()
    assert summary.brier == pytest.approx(brier_score_loss(y, p))
    assert summary.auc == pytest.approx(roc_auc_score(y, p))
    claims = runs["claim"].to_numpy()
    assert summary.auc_claims == pytest.approx(roc_auc_score(y[claims], p[claims]))
    assert summary.auc_nonclaims == pytest.approx(roc_auc_score(y[~claims], p[~claims]))
    assert summary.slope == summary.wald.detail("slope")
    assert summary.ece.low <= summary.ece.value <= summary.ece.high
    own = cal.calibration_summary(runs, label="own", rng=np.random.default_rng(0), n_boot=200)
    assert own.base_rate == pytest.approx((runs["test_oos_r2"] > 0).mean())
    assert summary.to_frame().shape[0] == 1 and "Brier" in str(summary)


def test_perfectly_calibrated_forecasts_score_as_calibrated():
    p, y = _sample(5000, 9)
    worlds = np.arange(p.size)
    assert cal.expected_calibration_error(p, y) < 0.03
    m = cal.murphy_decomposition(p, y, n_bins=None)
    assert m.reliability < 0.005 and m.resolution > 0.01
    assert cal.calibration_wald(y, p).pvalue > 0.01
    assert cal.ece_bootstrap(p, y, worlds, rng=np.random.default_rng(1), n_boot=200).low < 0.03


def test_recalibration_against_independent_fits(runs):
    y = runs["economic"].to_numpy().astype(float)
    p = runs["probability"].to_numpy()
    c = runs["claim"].to_numpy().astype(float)
    w = runs["world_id"].to_numpy()
    res = cal.recalibration(y, p, c, w, label="economic")
    assert res.maps == cal.MAPS and res.failed_folds == (0,) * 6
    z = np.log(np.clip(p, 0.005, 0.995) / (1 - np.clip(p, 0.005, 0.995)))
    oof = {k: np.empty_like(y) for k in ("base_rate", "verdict", "logodds", "isotonic", "both")}
    for train, test in GroupKFold(n_splits=5).split(p, y, groups=w):
        assert not set(w[train]) & set(w[test])  # every run of a world in one fold
        oof["base_rate"][test] = y[train].mean()
        for name, X in (("verdict", np.column_stack([np.ones_like(c), c])), ("logodds", sm.add_constant(z)),
                        ("both", np.column_stack([np.ones_like(c), c, z]))):
            fit = sm.Logit(y[train], X[train]).fit(disp=0)
            oof[name][test] = fit.predict(X[test])
        iso = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(p[train], y[train])
        oof["isotonic"][test] = iso.predict(p[test])
    for name, pred in oof.items():
        brier, auc = res.get(name)
        assert brier == pytest.approx(brier_score_loss(y, pred), rel=1e-7), name
        if name != "base_rate":
            assert auc == pytest.approx(roc_auc_score(y, pred), rel=1e-7), name
    assert res.get("stated")[0] == pytest.approx(brier_score_loss(y, p))
    assert np.isnan(res.get("base_rate")[1])
    table = cal.recalibrate_runs(runs)
    assert table.brier == res.brier and "isotonic" in str(table) and table.to_frame().shape == (6, 3)

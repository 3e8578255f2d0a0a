"""Each procedure's decision p-value against a naive per-world computation with statsmodels.

Tolerance: 1e-9 relative on p-values (differences come only from summation order).
"""

from dataclasses import replace

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.multitest import multipletests

from planted.baselines.forecasts import compare_forecasts, expanding_mean_forecasts, expanding_ols_forecasts
from planted.baselines.ivx import ivx_wald_multi
from planted.baselines.panel import panel_from_batch, panel_from_worlds
from planted.baselines.procedures import PROCEDURES, economic_label, run_procedures
from planted.worlds import WorldSpec, build, build_batch

SPEC = WorldSpec(family="linear", r2=0.01, phi=0.95, rho=-0.8, shocks="bootstrap")


@pytest.fixture(scope="module")
def batch():
    return build_batch(SPEC, range(6))


@pytest.fixture(scope="module")
def results(batch):
    return run_procedures(panel_from_batch(batch), list(PROCEDURES))


def _pairs(batch, i):
    """Naive in-sample pairs of world i: r[t+1] and the 9 candidates x[t], t = 12..698."""
    r = batch.returns[i]
    m12 = np.array([np.nan] * 11 + [r[t - 11 : t + 1].mean() for t in range(11, r.size)])
    cands = np.vstack([batch.candidates[i], m12])
    return r, cands


def test_hac_holm_and_best9_match_statsmodels(batch, results):
    for i in range(len(batch)):
        r, cands = _pairs(batch, i)
        hac, ols = [], []
        for k in range(9):
            design = sm.add_constant(cands[k, 12:699])
            hac.append(sm.OLS(r[13:700], design).fit(cov_type="HAC", cov_kwds={"maxlags": 12}).pvalues[1])
            ols.append(sm.OLS(r[13:700], design).fit().pvalues[1])
        adjusted = multipletests(hac, method="holm")[1]
        assert results["hac_holm"].decision_p[i] == pytest.approx(adjusted.min(), rel=1e-9)
        assert results["hac_holm"].chosen[i] == np.argmin(adjusted)
        assert results["best9"].decision_p[i] == pytest.approx(min(ols), rel=1e-9)


def test_ivx_holm_matches_the_single_series_ivx(batch, results):
    for i in range(3):
        r, cands = _pairs(batch, i)
        p = [ivx_wald_multi(r[12:700], cands[k, 12:700]).pvalue for k in range(9)]
        assert results["ivx_holm"].decision_p[i] == pytest.approx(multipletests(p, method="holm")[1].min(), rel=1e-9)


def test_prespecified_procedures_follow_the_clark_west_rule(batch, results):
    r_all = batch.returns
    bench = expanding_mean_forecasts(r_all, 1, r_all.shape[1])
    planted = batch.candidates[np.arange(len(batch)), batch.planted_index]
    oracle_fc = expanding_ols_forecasts(r_all, planted, 350, 700)
    cw = compare_forecasts(r_all, bench, oracle_fc, 350, 700)
    np.testing.assert_allclose(results["oracle"].decision_p, cw.cw_pvalue, rtol=1e-12)
    i = 0
    r, cands = _pairs(batch, i)
    forecasts = np.stack([expanding_ols_forecasts(r, cands[k], 350, 700) for k in range(9)])
    combo = compare_forecasts(r, bench[i], forecasts.mean(axis=0), 350, 700)
    assert results["combination"].decision_p[i] == pytest.approx(combo.cw_pvalue, rel=1e-10)
    ct = compare_forecasts(r, bench[i], np.maximum(forecasts, 0).mean(axis=0), 350, 700)
    assert results["combination_ct"].decision_p[i] == pytest.approx(ct.cw_pvalue, rel=1e-10)


def test_holm_best_claims_only_when_the_screen_and_clark_west_both_reject(batch, results):
    for i in range(len(batch)):
        r, cands = _pairs(batch, i)
        p = [
            sm.OLS(r[13:350], sm.add_constant(cands[k, 12:349])).fit(cov_type="HAC", cov_kwds={"maxlags": 12}).pvalues[1]
            for k in range(9)
        ]
        adjusted = multipletests(p, method="holm")[1]
        best = int(np.argmin(adjusted))
        fc = expanding_ols_forecasts(r, cands[best], 350, 700)
        cw_p = compare_forecasts(r, expanding_mean_forecasts(r, 1, 1060), fc, 350, 700).cw_pvalue
        expected = adjusted.min() <= 0.05 and cw_p <= 0.05
        assert results["holm_best"].claims(0.05)[i] == expected
        assert results["holm_best"].decision_p[i] == pytest.approx(max(adjusted.min(), cw_p), rel=1e-9)


def test_deployed_forecasts_are_refit_every_12_months_on_the_test_window(batch, results):
    res = results["hac_holm"]
    i = 1
    r, cands = _pairs(batch, i)
    k = res.chosen[i]
    fit = sm.OLS(r[1:712], sm.add_constant(cands[k, :711])).fit()  # data through month 711
    assert res.test_forecast[i, 715] == pytest.approx(fit.params[0] + fit.params[1] * cands[k, 714], rel=1e-9)
    assert np.isnan(res.test_forecast[i, :700]).all()
    np.testing.assert_array_equal(res.deployed_oos_r2(0.05), np.where(res.claims(0.05), res.test.oos_r2, 0.0))


def test_decisions_do_not_depend_on_anonymisation(batch):
    """OLS, HAC and Clark-West decisions are invariant to the affine maps; compare with raw data."""
    anonymised = run_procedures(panel_from_batch(batch), ["hac_holm", "best9", "oracle", "combination"])
    raw = batch.raw
    from dataclasses import replace

    from planted.worlds.anonymise import Anonymisation

    identity = Anonymisation(
        perm=batch.maps.perm, return_scale=np.ones(len(batch)), slope=np.ones_like(batch.maps.slope),
        intercept=np.zeros_like(batch.maps.intercept),
    )
    from planted.worlds.anonymise import anonymise

    returns, candidates = anonymise(raw.returns, raw.candidates, identity)
    plain = run_procedures(panel_from_batch(replace(batch, returns=returns, candidates=candidates)),
                           ["hac_holm", "best9", "oracle", "combination"])
    for name in ("hac_holm", "best9", "oracle"):
        np.testing.assert_allclose(anonymised[name].decision_p, plain[name].decision_p, rtol=1e-7)


def test_oracle_regressor_and_economic_label_by_family():
    regime = build_batch(WorldSpec(family="regime", shocks="gaussian"), range(3))
    panel = panel_from_batch(regime)
    np.testing.assert_array_equal(panel.oracle, regime.raw.signal)  # x[t] s[t], the return-generating regressor
    reversal = panel_from_batch(build_batch(WorldSpec(family="reversal", shocks="gaussian"), range(2)))
    np.testing.assert_array_equal(reversal.oracle, reversal.candidates[:, 8])
    assert reversal.signal.all() and not panel_from_batch(build_batch(WorldSpec(family="persistent_null"), [1])).signal.any()
    res = run_procedures(panel, ["oracle"])["oracle"]
    np.testing.assert_array_equal(economic_label(res), res.test.oos_r2 > 0)


def test_regime_oracle_is_invariant_to_affine_maps_and_the_anonymised_product_is_not():
    """The oracle's decision depends on its regressor only up to an affine map (OLS with an intercept).

    ``x s`` and ``3 x s + 2`` give the same decision p-values (to 1e-9); the anonymised column
    times the state, ``(a x + b) s``, which the oracle used before, gives others (its intercept b
    leaks in as ``b s``).
    """
    regime = build_batch(WorldSpec(family="regime", shocks="gaussian"), range(6))
    panel = panel_from_batch(regime)
    true = run_procedures(panel, ["oracle"])["oracle"].decision_p
    affine = run_procedures(replace(panel, oracle=3.0 * panel.oracle + 2.0), ["oracle"])["oracle"].decision_p
    np.testing.assert_allclose(affine, true, rtol=1e-9, atol=1e-12)
    visible_planted = regime.candidates[np.arange(6), regime.planted_index]
    old = run_procedures(replace(panel, oracle=visible_planted * regime.raw.regime), ["oracle"])["oracle"].decision_p
    assert np.max(np.abs(old - true)) > 1e-3


def test_panel_from_worlds_equals_panel_from_batch(batch):
    worlds = [build(SPEC, seed=s) for s in range(3)]
    a = panel_from_worlds(worlds)
    b = panel_from_batch(build_batch(SPEC, range(3)))
    np.testing.assert_array_equal(a.candidates, b.candidates)
    np.testing.assert_array_equal(a.oracle, b.oracle)


def test_best9_uses_student_t_with_n_minus_2(batch, results):
    r, cands = _pairs(batch, 0)
    t = sm.OLS(r[13:700], sm.add_constant(cands[results["best9"].chosen[0], 12:699])).fit().tvalues[1]
    assert results["best9"].decision_p[0] == pytest.approx(2 * stats.t.sf(abs(t), 687 - 2), rel=1e-9)


def test_randomised_procedures_depend_only_on_each_worlds_seed():
    """RF weights come from each world's procedure sub-stream: a world alone equals the world in a batch."""
    together = run_procedures(panel_from_batch(build_batch(SPEC, [4, 5, 6])), ["rf_ridge", "lasso"])
    alone = run_procedures(panel_from_batch(build_batch(SPEC, [5])), ["rf_ridge", "lasso"])
    for name in ("rf_ridge", "lasso"):
        assert together[name].decision_p[1] == alone[name].decision_p[0]
        assert together[name].test.oos_r2[1] == alone[name].test.oos_r2[0]
    assert together["lasso"].kind == "exploratory" and together["rf_ridge"].kind == "prespecified"

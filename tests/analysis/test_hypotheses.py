"""H1-H6, C1-C3, G1-G3 against statsmodels/scipy and on simulated agents with a known truth."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.contingency_tables import cochrans_q as sm_cochrans_q
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.multitest import multipletests

from planted.analysis import hypotheses as hy
from planted.analysis.results import TestFamily, TestResult
from planted.baselines.rates import wilson_interval

from .simulate import Agent, make_worlds, simulate_runs, study


@pytest.fixture(scope="module")
def v1_runs() -> pd.DataFrame:
    return study("v1", [Agent(size=0.2, power=0.6, framing_shift=0.15)], seed=11)


# ---------------------------------------------------------------- exact McNemar


def test_mcnemar_matches_statsmodels_and_binomtest():
    rng = np.random.default_rng(0)
    for _ in range(60):
        n = int(rng.integers(5, 120))
        a = rng.random(n) < rng.uniform(0.1, 0.9)
        b = rng.random(n) < rng.uniform(0.1, 0.9)
        two = hy.mcnemar_exact(a, b, alternative="two-sided")
        table = [[np.sum(a & b), np.sum(a & ~b)], [np.sum(~a & b), np.sum(~a & ~b)]]
        ref = sm_mcnemar(table, exact=True)
        assert two.pvalue == pytest.approx(ref.pvalue, rel=1e-12, abs=1e-15)
        b_only, c_only = int(np.sum(a & ~b)), int(np.sum(~a & b))
        if b_only + c_only == 0:
            continue
        for alt in ("greater", "less"):
            ours = hy.mcnemar_exact(a, b, alternative=alt).pvalue
            assert ours == pytest.approx(stats.binomtest(b_only, b_only + c_only, 0.5, alternative=alt).pvalue, rel=1e-12)
        one = min(hy.mcnemar_exact(a, b, alternative="greater").pvalue, hy.mcnemar_exact(a, b, alternative="less").pvalue)
        assert two.pvalue == pytest.approx(min(1.0, 2 * one), rel=1e-12)


def test_mcnemar_counts_and_no_discordant_pairs():
    a = np.array([1, 1, 1, 0, 0, 1], bool)
    b = np.array([1, 0, 0, 0, 1, 1], bool)
    res = hy.mcnemar_exact(a, b, alternative="greater")
    assert (res.statistic, res.detail("second_only"), res.detail("both"), res.detail("neither")) == (2, 1, 2, 1)
    assert res.estimate == pytest.approx(4 / 6 - 3 / 6)
    same = hy.mcnemar_exact(a, a, alternative="less")
    assert same.pvalue == 1.0 and same.flag == "no discordant pairs"
    # the paper's H1: all 72 discordant pairs favour the agent -> p(less) = 1, p(greater) = 2^-72
    agent = np.r_[np.ones(72, bool), np.zeros(168, bool)]
    assert hy.mcnemar_exact(agent, np.zeros(240, bool), alternative="less").pvalue == 1.0
    assert hy.mcnemar_exact(agent, np.zeros(240, bool), alternative="greater").pvalue == pytest.approx(2.0**-72)


# ---------------------------------------------------------------- binomial, Cochran's Q, OLS


@pytest.mark.parametrize("k,n", [(15, 70), (0, 40), (3, 200), (40, 200), (110, 110)])
def test_binomial_matches_scipy(k, n):
    claims = np.r_[np.ones(k, bool), np.zeros(n - k, bool)]
    res = hy.binomial_exceedance(claims)
    assert res.pvalue == pytest.approx(stats.binomtest(k, n, 0.05, alternative="greater").pvalue, rel=1e-12)
    assert (res.detail("wilson_low"), res.detail("wilson_high")) == wilson_interval(k, n)


def test_cochran_q_matches_statsmodels():
    rng = np.random.default_rng(1)
    for k in (2, 3, 4):
        for _ in range(20):
            x = rng.random((int(rng.integers(10, 200)), k)) < rng.uniform(0.1, 0.9, k)
            if (x.all(axis=1) | ~x.any(axis=1)).all():
                continue
            ours = hy.cochran_q(x)
            ref = sm_cochrans_q(x.astype(int))
            assert ours.statistic == pytest.approx(ref.statistic, rel=1e-12)
            assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-10)
            assert ours.df == ref.df


def test_cochran_q_without_discordant_rows():
    x = np.array([[1, 1, 1], [0, 0, 0], [1, 1, 1]], bool)
    res = hy.cochran_q(x)
    assert (res.statistic, res.pvalue, res.flag) == (0.0, 1.0, "no discordant subjects")


def test_ols_and_slope_test_match_statsmodels():
    rng = np.random.default_rng(2)
    n = 300
    x = rng.exponential(2.0, n)
    groups = rng.integers(0, 90, n)
    y = 0.01 + 0.002 * x + rng.normal(0, 0.02, n) + rng.normal(0, 0.01, 90)[groups]
    X = sm.add_constant(x)
    ref = sm.OLS(y, X).fit()
    ours = hy.slope_test(y, x, alternative="two-sided")
    assert ours.statistic == pytest.approx(ref.tvalues[1], rel=1e-10)
    assert ours.pvalue == pytest.approx(ref.pvalues[1], rel=1e-8)
    assert ours.df == ref.df_resid
    ref_c = sm.OLS(y, X).fit(cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)
    fit = hy.ols_fit(y, X, groups=groups)
    np.testing.assert_allclose(fit.cov, ref_c.cov_params(), rtol=1e-10)
    greater = hy.slope_test(y, x, alternative="greater", groups=groups)
    assert greater.df == len(np.unique(groups)) - 1
    assert greater.pvalue == pytest.approx(ref_c.pvalues[1] / 2, rel=1e-8)  # t > 0 here
    assert hy.slope_test(y, x, alternative="less", groups=groups).pvalue == pytest.approx(1 - ref_c.pvalues[1] / 2)


def test_complexity_slope_is_the_ols_slope():
    counts = [2, 2, 5, None, 9, 30]
    order = np.array([0, 1, 2, 4, 5], float)
    expected = np.polyfit(order, [2, 2, 5, 9, 30], 1)[0]
    assert hy.complexity_slope(counts) == pytest.approx(expected, rel=1e-12)
    assert np.isnan(hy.complexity_slope([3]))


# ---------------------------------------------------------------- samples and H1-H6


def test_samples_of_the_first_study(v1_runs):
    assert len(hy.weak_signal_runs(v1_runs)) == 240  # paper 3.1: 240 paired weak-signal worlds
    assert len(hy.no_signal_runs(v1_runs)) == 70  # paper 3.2: 70 no-signal worlds
    assert len(hy.framing_table(v1_runs)) == 160  # SPEC 5: 160 framing worlds


def test_samples_of_the_third_study_use_first_replicates():
    runs = study("v3", [Agent()], seed=3)
    assert len(runs) == 430  # SPEC 5: 430 neutral runs per model
    assert len(hy.no_signal_runs(runs)) == 110  # paper 5.2: 110 no-signal worlds
    assert (hy.no_signal_runs(runs)["replicate"] == 0).all()


def test_h1_is_mcnemar_on_the_weak_signal_pairs(v1_runs):
    weak = hy.weak_signal_runs(v1_runs)
    for reverse, alt in ((False, "less"), (True, "greater")):
        res = hy.h1_power(v1_runs, reverse=reverse)
        ref = hy.mcnemar_exact(weak["claim"].to_numpy(), weak["baseline_combination"].to_numpy(), alternative=alt)
        assert (res.statistic, res.pvalue, res.n) == (ref.statistic, ref.pvalue, 240)
    assert hy.h1_power(v1_runs).pvalue > 0.99 and hy.h1_power(v1_runs, reverse=True).pvalue < 1e-6


def test_synthetic_size_and_power_within_wilson_intervals():
    """An agent simulated as a test of size 5% and power 60%: estimates cover the truth."""
    runs = study("v1", [Agent(size=0.05, power=0.6)], seed=20260)
    null = hy.no_signal_runs(runs)["claim"].to_numpy()
    weak = hy.weak_signal_runs(runs)["claim"].to_numpy()
    lo, hi = wilson_interval(int(null.sum()), null.size)
    assert lo <= 0.05 <= hi
    lo, hi = wilson_interval(int(weak.sum()), weak.size)
    assert lo <= 0.6 <= hi


@pytest.mark.parametrize("size,rejects", [(0.2, True), (0.05, False)])
def test_h2_rejects_only_an_oversized_agent(size, rejects):
    rng = np.random.default_rng(7)
    claims = rng.random(200) < size
    res = hy.binomial_exceedance(claims)
    assert (res.pvalue < 0.05) is rejects


def test_h2_on_the_run_table(v1_runs):
    res = hy.h2_size(v1_runs)
    null = hy.no_signal_runs(v1_runs)
    k = int(null["claim"].sum())
    assert (res.statistic, res.n) == (k, 70)
    assert res.pvalue == pytest.approx(stats.binomtest(k, 70, 0.05, alternative="greater").pvalue)
    assert res.pvalue < 0.01  # simulated size 20%


def test_missing_verdict_counts_as_no_claim(v1_runs):
    runs = v1_runs.copy()
    idx = hy.no_signal_runs(runs).index[runs.loc[hy.no_signal_runs(runs).index, "claim"]][:3]
    runs["claim"] = runs["claim"].astype(object)
    runs.loc[idx, "claim"] = None
    assert hy.h2_size(runs).statistic == hy.h2_size(v1_runs).statistic - 3


def test_h3_matches_statsmodels_wald(v1_runs):
    res = hy.h3_calibration(v1_runs)
    p = np.clip(v1_runs["probability"].to_numpy(), 0.005, 0.995)
    X = sm.add_constant(np.log(p / (1 - p)))
    fit = sm.Logit(v1_runs["economic"].astype(float).to_numpy(), X).fit(disp=0)
    wald = fit.wald_test((np.eye(2), np.array([0.0, 1.0])), scalar=True, use_f=False)
    assert res.statistic == pytest.approx(float(wald.statistic), rel=1e-7)
    assert res.pvalue == pytest.approx(float(wald.pvalue), rel=1e-6)
    assert res.detail("slope") == pytest.approx(fit.params[1], rel=1e-8)
    assert res.n == len(v1_runs) and res.df == 2
    raw = v1_runs["probability"].to_numpy()
    assert res.detail("n_clipped") == int(((raw < 0.005) | (raw > 0.995)).sum())
    assert f"({int(res.detail('n_clipped'))} of {len(raw)} probabilities clipped)" in res.method


def test_h3_reports_how_many_probabilities_were_clipped():
    from planted.analysis.calibration import calibration_wald

    rng = np.random.default_rng(8)
    p = np.r_[np.zeros(40), np.ones(30), rng.uniform(0.1, 0.9, 200)]
    y = rng.random(p.size) < np.clip(p, 0.05, 0.95)
    result = calibration_wald(y, p)
    assert result.detail("n_clipped") == 70 and "70 of 270 probabilities clipped" in result.method


def _calibrated(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    p = rng.beta(2.0, 2.0, n)
    return rng.random(n) < p, p


def test_h3_passes_a_perfectly_calibrated_agent_and_rejects_a_miscalibrated_one():
    from planted.analysis.calibration import calibration_wald

    y, p = _calibrated(900, np.random.default_rng(5))
    assert calibration_wald(y, p).pvalue > 0.05
    rng = np.random.default_rng(6)
    p = rng.beta(2.0, 2.0, 900)
    y = rng.random(900) < 1 / (1 + np.exp(-(1.0 + 0.36 * np.log(p / (1 - p)))))  # the paper's estimates
    assert calibration_wald(y, p).pvalue < 1e-6


@pytest.mark.slow
def test_h3_rejection_rate_under_perfect_calibration_is_near_5pct():
    from planted.analysis.calibration import calibration_wald

    rng = np.random.default_rng(2024)
    rejections = sum(calibration_wald(*_calibrated(900, rng)).pvalue < 0.05 for _ in range(200))
    lo, hi = wilson_interval(rejections, 200, level=0.99)
    assert lo <= 0.05 <= hi


def test_h4_matches_statsmodels_and_detects_framing(v1_runs):
    res = hy.h4_framing(v1_runs)
    wide = hy.framing_table(v1_runs)
    ref = sm_cochrans_q(wide.to_numpy().astype(int))
    assert res.statistic == pytest.approx(ref.statistic, rel=1e-12) and res.pvalue == pytest.approx(ref.pvalue)
    assert res.n == 160 and res.pvalue < 1e-3
    assert res.detail("rate_skeptical") < res.detail("rate_neutral") < res.detail("rate_optimistic")
    x = wide.to_numpy()
    discordant = x.any(axis=1) & ~x.all(axis=1)
    assert res.detail("discordant") == discordant.sum()
    assert res.detail("ordered") == (discordant & (x[:, 0] <= x[:, 1]) & (x[:, 1] <= x[:, 2])).sum()
    no_effect = study("v1", [Agent(size=0.2, power=0.6, framing_shift=0.0)], seed=12)
    assert hy.h4_framing(no_effect).pvalue > 0.01


def test_h5_matches_clustered_statsmodels(v1_runs):
    res = hy.h5_drift(v1_runs)
    d = v1_runs.dropna(subset=["test_oos_r2"])
    gap = d["in_sample_r2_final"] - d["test_oos_r2"]
    ref = sm.OLS(gap.to_numpy(), sm.add_constant(d["complexity_slope"].to_numpy())).fit(
        cov_type="cluster", cov_kwds={"groups": pd.factorize(d["world_id"])[0]}, use_t=True
    )
    assert res.statistic == pytest.approx(ref.tvalues[1], rel=1e-9)
    assert res.pvalue == pytest.approx(stats.t.sf(ref.tvalues[1], ref.df_resid_inference), rel=1e-8)
    assert res.n == len(d)
    drifting = study("v1", [Agent(size=0.2, power=0.6, drift_effect=0.01)], seed=13)
    assert hy.h5_drift(drifting).pvalue < 1e-6


def test_h6_matches_statsmodels_logit_with_world_clusters():
    runs = study("v1", [Agent(size=0.2, power=0.6, framing_shift=0.1, prior_effect=1.0)], seed=14)
    runs = runs[runs["family"] != "injected"]  # keep every world type with both outcomes
    res = hy.h6_prior(runs)
    types = pd.get_dummies(hy.world_type(runs), drop_first=True, dtype=float)
    p = runs["prior_probability"].to_numpy()
    X = np.column_stack([np.ones(len(runs)), np.log(p / (1 - p)), runs["oracle_cw_stat"], runs["combination_cw_stat"],
                         types.to_numpy()])
    ref = sm.Logit(runs["claim"].astype(float).to_numpy(), X).fit(
        disp=0, cov_type="cluster", cov_kwds={"groups": pd.factorize(runs["world_id"])[0]}
    )
    assert res.estimate == pytest.approx(ref.params[1], rel=1e-7)
    assert res.detail("se_prior") == pytest.approx(ref.bse[1], rel=1e-6)
    assert res.pvalue == pytest.approx(stats.norm.sf(ref.tvalues[1]), rel=1e-6)
    assert res.pvalue < 0.01


def test_h6_drops_world_types_with_a_constant_verdict():
    runs = study("v1", [Agent(size=0.2, power=0.6, prior_effect=1.0)], seed=15)
    runs.loc[runs["family"] == "regime", "claim"] = True  # quasi-complete separation by a dummy
    res = hy.h6_prior(runs)
    assert res.flag == "" and res.detail("dropped_regime") == 1.0
    kept = runs[runs["family"] != "regime"]
    assert res.estimate == pytest.approx(hy.h6_prior(kept).estimate, rel=1e-10)
    inter = hy.h6_prior(runs, framing="interacted")
    assert inter.flag == "" and np.isfinite(inter.pvalue)


# ---------------------------------------------------------------- families


def test_holm_family_matches_multipletests_and_treats_nan_as_one():
    ps = [0.01, 0.04, 0.03, float("nan"), 0.2]
    tests = [TestResult(f"H{i}", 0.0, p, None, "", "greater", 1, "") for i, p in enumerate(ps)]
    fam = hy.holm_family("f", tests)
    expected = multipletests([0.01, 0.04, 0.03, 1.0, 0.2], method="holm")[1]
    np.testing.assert_allclose([a for i, a in enumerate(fam.adjusted) if i != 3], np.delete(expected, 3))
    assert np.isnan(fam.adjusted[3])


def test_confirmatory_family(v1_runs):
    fam = hy.confirmatory_tests(v1_runs)
    assert isinstance(fam, TestFamily)
    assert [t.name for t in fam.tests] == ["H1", "H2", "H3", "H4", "H5"]
    assert [t.name for t in fam.exploratory] == ["H1'", "H6"]
    raw = [t.pvalue for t in fam.tests]
    np.testing.assert_allclose(fam.adjusted, multipletests(raw, method="holm")[1])
    assert fam.adjusted_pvalue("H2") < 0.05 and np.isnan(fam.adjusted_pvalue("H6"))
    frame = fam.to_frame()
    assert list(frame["role"]) == ["confirmatory"] * 5 + ["exploratory"] * 2
    assert "H1-H5" in str(fam)
    with pytest.raises(ValueError, match="several models"):
        hy.confirmatory_tests(study("v1", [Agent(model="a"), Agent(model="b")], seed=1))


def test_cross_model_family():
    agents = [Agent("opus", 0.2, 0.4, 0.15), Agent("sol", 0.2, 0.3, 0.2), Agent("terra", 0.6, 0.55, 0.2)]
    runs = study("v1", agents, seed=16)
    fam = hy.cross_model_tests(runs, new_models=["sol", "terra"])
    c1, c2, c3 = fam.tests
    assert c1.pvalue == max(hy.h2_size(runs[runs["model"] == m]).pvalue for m in ("sol", "terra"))
    assert c2.pvalue == max(hy.h4_framing(runs[runs["model"] == m]).pvalue for m in ("sol", "terra"))
    weak = hy.weak_signal_runs(runs).pivot(index="world_id", columns="model", values="claim")
    ref = sm_cochrans_q(weak[["opus", "sol", "terra"]].to_numpy().astype(int))
    assert c3.statistic == pytest.approx(ref.statistic) and c3.n == 240 and c3.df == 2
    np.testing.assert_allclose(fam.adjusted, multipletests([c1.pvalue, c2.pvalue, c3.pvalue], method="holm")[1])
    assert max(fam.adjusted) < 0.01


def test_gaussian_and_local_families():
    agents = [Agent("opus", 0.34, 0.7), Agent("sol", 0.16, 0.5), Agent("terra", 0.44, 0.8), Agent("qwen", 0.35, 0.4)]
    runs = study("v3", agents, seed=17)
    commercial = runs[runs["model"] != "qwen"]
    fam = hy.gaussian_tests(commercial, models=["opus", "sol", "terra"])
    names = [t.name for t in fam.tests]
    assert names == ["G1 opus", "G1 sol", "G1 terra", "G2", "G3 opus", "G3 sol", "G3 terra"]
    np.testing.assert_allclose(fam.adjusted, multipletests([t.pvalue for t in fam.tests], method="holm")[1])
    null = hy.no_signal_runs(commercial).pivot(index="world_id", columns="model", values="claim")
    ref = sm_cochrans_q(null[["opus", "sol", "terra"]].to_numpy().astype(int))
    assert fam["G2"].statistic == pytest.approx(ref.statistic) and fam["G2"].n == 110
    g3 = fam["G3 opus"]
    sample = hy.no_signal_runs(commercial[commercial["model"] == "opus"])
    assert g3.statistic == np.sum(sample["claim"] & ~sample["baseline_hac_holm"])
    local = hy.local_model_tests(runs, model="qwen")
    assert [t.name for t in local.tests] == ["G1 qwen", "G3 qwen"]
    np.testing.assert_allclose(local.adjusted, multipletests([t.pvalue for t in local.tests], method="holm")[1])


def test_status_filter_and_result_rendering(v1_runs):
    runs = v1_runs.copy()
    runs.loc[hy.no_signal_runs(runs).index[:5], "status"] = "error"
    assert hy.h2_size(runs).n == 65
    res = hy.h2_size(v1_runs)
    assert str(res).startswith("H2: statistic=") and "exact binomial" in res.summary()
    assert res.to_frame().loc[0, "wilson_low"] == res.detail("wilson_low")


def test_no_warnings_on_small_or_degenerate_tables():
    rng = np.random.default_rng(9)
    worlds = make_worlds("v3", rng)
    runs = simulate_runs(worlds, Agent(size=0.0, power=1.0), rng)  # verdict = signal
    runs["economic"] = runs["signal"]
    runs["probability"] = np.where(runs["claim"], 0.9, 0.1)  # H3 data perfectly separated
    assert hy.h3_calibration(runs).flag == "separation"
    assert np.isnan(hy.h3_calibration(runs).pvalue)
    assert hy.h4_framing(runs).flag == "empty sample"  # no framing runs in v3
    fam = hy.confirmatory_tests(runs)
    assert np.isnan(fam.adjusted_pvalue("H3")) and np.isnan(fam.adjusted_pvalue("H4"))

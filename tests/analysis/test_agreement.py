"""Agreement measures against scikit-learn, statsmodels, hand-worked examples and a known truth."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from planted.analysis import agreement as ag

from .simulate import Agent, make_worlds, simulate_runs, study


def test_cohen_kappa_matches_sklearn():
    rng = np.random.default_rng(0)
    for _ in range(30):
        n = int(rng.integers(20, 600))
        a = rng.random(n) < rng.uniform(0.1, 0.9)
        b = np.where(rng.random(n) < rng.uniform(0, 1), a, rng.random(n) < 0.5)
        res = ag.cohen_kappa(a, b)
        assert res.kappa == pytest.approx(cohen_kappa_score(a, b), rel=1e-12, abs=1e-14)
        assert res.observed == pytest.approx(np.mean(a == b))
        assert res.both + res.first_only + res.second_only + res.neither == n
    assert np.isnan(ag.cohen_kappa(np.ones(5, bool), np.ones(5, bool)).kappa)


def test_fleiss_kappa_matches_statsmodels():
    rng = np.random.default_rng(1)
    for m in (2, 3, 5):
        for _ in range(10):
            pi = rng.beta(1.0, 1.5, 80)
            ratings = rng.random((80, m)) < pi[:, None]
            table, _ = aggregate_raters(ratings.astype(int), n_cat=2)
            assert ag.fleiss_kappa(ratings) == pytest.approx(sm_fleiss_kappa(table, method="fleiss"), rel=1e-12)


def test_model_agreement_uses_common_neutral_first_replicates():
    runs = study("v1", [Agent("opus", 0.2, 0.6), Agent("sol", 0.2, 0.5)], seed=3)
    runs = runs[~((runs["model"] == "sol") & (runs["family"] == "regime"))]  # sol skipped 30 worlds
    (pair,) = ag.model_agreement(runs)
    assert (pair.first, pair.second, pair.n) == ("opus", "sol", 580 - 30)
    neutral = runs[runs["framing"] == "neutral"].pivot(index="world_id", columns="model", values="claim").dropna()
    assert pair.kappa == pytest.approx(cohen_kappa_score(neutral["opus"].astype(bool), neutral["sol"].astype(bool)))


def _replicate_table(claims: list[list[int]], level: float = 0.01) -> pd.DataFrame:
    rows = []
    for w, cs in enumerate(claims):
        for r, c in enumerate(cs):
            rows.append(dict(run_id=f"{w}_{r}", world_id=f"w{w}", framing="neutral", replicate=r, model="m",
                             family="linear", r2=level, claim=bool(c)))
    return pd.DataFrame(rows)


def test_replicate_agreement_by_hand():
    # five worlds, three runs each: 6 claims of 15 -> cbar = 0.4
    runs = _replicate_table([[1, 1, 1], [0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 0, 0]])
    (res,) = ag.replicate_agreement(runs, rng=np.random.default_rng(0), n_boot=200)
    assert res.n_worlds == 5 and res.n_runs == 15 and res.claim_rate == pytest.approx(0.4)
    assert res.all_same.value == pytest.approx(3 / 5)
    # s2 = k(m-k)/(m(m-1)): 0, 0, 1/3, 1/3, 0 -> mean 2/15; P(disagree) = 2 s2
    assert res.disagree.value == pytest.approx(4 / 15)
    assert res.within_share.value == pytest.approx((2 / 15) / (0.4 * 0.6))
    table, _ = aggregate_raters(np.array([[1, 1, 1], [0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 0, 0]]), n_cat=2)
    assert res.fleiss == pytest.approx(sm_fleiss_kappa(table, method="fleiss"))
    assert res.all_same.n_boot == 200 and res.all_same.low <= res.all_same.value <= res.all_same.high


def test_anova_share_matches_a_direct_computation_on_unbalanced_data():
    claims = [[1, 1, 1], [0, 0], [1, 0, 0, 1], [1, 1, 0], [0, 0, 0], [1, 0]]
    runs = _replicate_table(claims)
    (res,) = ag.replicate_agreement(runs, rng=np.random.default_rng(0), n_boot=50, method="anova")
    y = runs["claim"].astype(float)
    g = runs["world_id"]
    n, a = len(y), g.nunique()
    means = y.groupby(g).transform("mean")
    msw = ((y - means) ** 2).sum() / (n - a)
    msb = ((means - y.mean()) ** 2).sum() / (a - 1)
    sizes = g.value_counts()
    n0 = (n - (sizes**2).sum() / n) / (a - 1)
    var_b = (msb - msw) / n0
    assert res.within_share.value == pytest.approx(msw / (msw + var_b), rel=1e-12)
    assert np.isnan(res.fleiss)  # unequal numbers of replicates


def test_within_share_recovers_the_simulated_truth():
    """Beta(kappa) propensities: the run-to-run share of a verdict's variance is kappa / (kappa + 1)."""
    rng = np.random.default_rng(4)
    worlds = make_worlds("v3", rng)
    worlds["replicated"] = worlds["family"] == "linear"  # 320 worlds x 3 runs for precision
    runs = simulate_runs(worlds, Agent(size=0.3, power=0.6, kappa=1.0), rng)
    results = {r.level: r for r in ag.replicate_agreement(runs, rng=np.random.default_rng(5), n_boot=300)}
    assert set(results) == {"linear R2=0", "linear R2=0.0025", "linear R2=0.005", "linear R2=0.01", "pooled"}
    pooled = results["pooled"]
    assert pooled.within_share.low < 0.5 < pooled.within_share.high
    anova = {r.level: r for r in ag.replicate_agreement(runs, rng=np.random.default_rng(5), n_boot=300, method="anova")}
    assert anova["pooled"].within_share.low < 0.5 < anova["pooled"].within_share.high
    # P(disagree) = 2 E[pi(1-pi)] = 2 c(1-c) kappa/(kappa+1) at each level
    null = results["linear R2=0"]
    assert null.disagree.low < 2 * 0.3 * 0.7 * 0.5 < null.disagree.high
    again = ag.replicate_agreement(runs, rng=np.random.default_rng(5), n_boot=300)
    assert [r.within_share for r in again] == [results[r.level].within_share for r in again]


def test_replicate_agreement_on_the_third_study_grid():
    runs = study("v3", [Agent(size=0.3, power=0.7, kappa=4.0)], seed=6)
    res = ag.replicate_agreement(runs, rng=np.random.default_rng(0), n_boot=100)
    assert [r.level for r in res] == ["linear R2=0", "linear R2=0.01", "pooled"]
    assert [r.n_worlds for r in res] == [20, 20, 40] and [r.n_runs for r in res] == [60, 60, 120]
    assert res[0].to_frame().shape[0] == 1 and "Fleiss" in str(res[0])
    with pytest.raises(ValueError, match="several models"):
        ag.replicate_agreement(study("v3", [Agent("a"), Agent("b")], seed=1), rng=np.random.default_rng(0))

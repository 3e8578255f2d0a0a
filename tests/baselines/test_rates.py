"""Rates from stored p-values: Wilson vs statsmodels, size matching and frontier properties."""

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from planted.baselines.rates import claim_rate, frontier, matched_alpha, matched_difference, wilson_interval


@pytest.mark.parametrize(("k", "n"), [(0, 40), (6, 40), (40, 40), (123, 4000), (1, 1)])
def test_wilson_matches_statsmodels(k, n):
    low, high = wilson_interval(k, n)
    ref = proportion_confint(k, n, alpha=0.05, method="wilson")
    assert low == pytest.approx(ref[0], abs=1e-12) and high == pytest.approx(ref[1], abs=1e-12)


def test_claim_rate_counts_p_at_most_alpha_and_refuses_nan():
    rate = claim_rate(np.array([0.01, 0.05, 0.2, 0.049]), 0.05)
    assert (rate.claims, rate.n) == (3, 4)
    with pytest.raises(ValueError, match="NaN"):
        claim_rate(np.array([0.1, np.nan]))


def test_matched_alpha_is_the_smallest_level_reaching_the_target():
    p = np.random.default_rng(0).uniform(size=1000)
    for c in (0.0, 0.05, 0.15, 0.5, 1.0):
        a = matched_alpha(p, c)
        assert (p <= a).mean() >= c
        below = p[p < a]
        assert below.size == 0 or (p <= below.max()).mean() < c


def test_frontier_is_monotone_and_spans_zero_to_one():
    rng = np.random.default_rng(1)
    table = frontier(rng.uniform(size=300), rng.uniform(size=300) ** 3)
    assert table["null_rate"].is_monotonic_increasing and table["signal_rate"].is_monotonic_increasing
    assert table["null_rate"].iloc[-1] == 1.0 and table["signal_rate"].iloc[0] == 0.0
    assert (table["signal_rate"] >= table["null_rate"] - 0.1).all()


def test_an_agent_that_is_the_baseline_has_no_matched_difference():
    """An agent claiming exactly like the baseline at alpha = 0.1: difference near 0, CI covering 0."""
    rng = np.random.default_rng(2)
    null_p, signal_p = rng.uniform(size=4000), rng.uniform(size=4000) ** 2.5
    agent_null = rng.uniform(size=80) <= 0.1
    agent_signal = rng.uniform(size=80) ** 2.5 <= 0.1
    result = matched_difference(agent_null, agent_signal, null_p, signal_p, rng=np.random.default_rng(3), n_boot=500)
    assert result.low < 0 < result.high
    assert abs(result.difference) < 0.25
    assert result.baseline_rate == pytest.approx((signal_p <= result.alpha).mean())

"""Building blocks against plain loops, arch's bootstrap sampler and the geometric law."""

import numpy as np
import pandas as pd
import pytest
from arch.bootstrap import StationaryBootstrap
from scipy import stats

from planted.worlds.processes import (
    ar1_from_innovations,
    garch11_returns,
    stationary_bootstrap_indices,
    trailing_mean,
    two_state_markov,
)


def test_stationary_bootstrap_reproduces_arch_index_for_index():
    """Same generator state, same draws (integers(n, n) then random(n)): identical indices."""
    n = 644
    data = np.arange(n, dtype=float)
    arch_bs = StationaryBootstrap(12, data, seed=np.random.default_rng(11))
    arch_indices = arch_bs.update_indices()
    rng = np.random.default_rng(11)
    starts = rng.integers(n, size=n)[None]
    uniforms = rng.random(n)[None]
    ours = stationary_bootstrap_indices(starts, uniforms, n, 12)[0]
    np.testing.assert_array_equal(ours, arch_indices)


def test_block_lengths_follow_the_geometric_law():
    rng = np.random.default_rng(5)
    m, length, n_pool = 200, 2000, 10_000
    idx = stationary_bootstrap_indices(rng.integers(n_pool, size=(m, length)), rng.random((m, length)), n_pool, 12)
    # a block ends where the next index is not the successor (large pool: wraps and chance hits are rare)
    lengths = []
    for row in idx:
        breaks = np.flatnonzero(np.diff(row) != 1) + 1
        edges = np.concatenate([[0], breaks, [length]])
        lengths.extend(np.diff(edges)[1:-1])  # drop censored first/last blocks
    lengths = np.asarray(lengths)
    assert lengths.mean() == pytest.approx(12.0, rel=0.03)
    # chi-square goodness of fit against Geometric(1/12) on lengths 1..40 and a tail bin
    observed = np.array([(lengths == k).sum() for k in range(1, 41)] + [(lengths > 40).sum()])
    pmf = stats.geom.pmf(np.arange(1, 41), 1 / 12)
    expected = np.append(pmf, 1 - pmf.sum()) * lengths.size
    assert stats.chisquare(observed, expected).pvalue > 0.001


def test_ar1_matches_a_loop_for_mixed_persistences():
    rng = np.random.default_rng(1)
    shocks = rng.standard_normal((6, 50))
    start = rng.standard_normal(6)
    phi = np.array([0.3, 0.99, 0.3, 0.5, 0.99, 0.0])
    expected = np.empty_like(shocks)
    for i in range(6):
        expected[i, 0] = start[i]
        for t in range(1, 50):
            expected[i, t] = phi[i] * expected[i, t - 1] + shocks[i, t]
    np.testing.assert_allclose(ar1_from_innovations(start, shocks, phi), expected, rtol=1e-12, atol=1e-12)


def test_garch_matches_a_loop():
    rng = np.random.default_rng(2)
    e = rng.standard_normal((3, 40))
    omega, a, b = 0.05, 0.1, 0.85
    expected = np.empty_like(e)
    for i in range(3):
        h = omega / (1 - a - b)
        for t in range(40):
            expected[i, t] = np.sqrt(h) * e[i, t]
            h = omega + a * expected[i, t] ** 2 + b * h
    np.testing.assert_allclose(garch11_returns(e, omega, a, b), expected, rtol=1e-13)


def test_trailing_mean_matches_pandas_rolling():
    values = np.random.default_rng(4).standard_normal(100)
    expected = pd.Series(values).rolling(12).mean().to_numpy()
    np.testing.assert_allclose(trailing_mean(values), expected, rtol=1e-12, atol=1e-14, equal_nan=True)


def test_markov_chain_stays_with_the_stated_probability_and_is_balanced():
    rng = np.random.default_rng(6)
    states = two_state_markov(rng.random(400), rng.random((400, 1000)), 0.95)
    stays = (states[:, 1:] == states[:, :-1]).mean()
    assert stays == pytest.approx(0.95, abs=0.003)  # 399,600 transitions: s.e. 0.0003
    assert states.mean() == pytest.approx(0.5, abs=0.03)

"""Holm adjustment against statsmodels' multipletests."""

import numpy as np
from statsmodels.stats.multitest import multipletests

from planted.baselines.multiple import holm


def test_holm_matches_statsmodels_including_ties():
    rng = np.random.default_rng(2)
    p = rng.uniform(size=(40, 9)) ** 3
    p[:10, 3] = p[:10, 5]  # ties
    adjusted = holm(p)
    for row, adj in zip(p, adjusted):
        np.testing.assert_allclose(adj, multipletests(row, method="holm")[1], rtol=1e-14)
    for alpha in (0.01, 0.05, 0.2):
        for row, adj in zip(p[:15], adjusted[:15]):
            np.testing.assert_array_equal(adj <= alpha, multipletests(row, alpha=alpha, method="holm")[0])

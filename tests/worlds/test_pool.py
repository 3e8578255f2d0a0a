"""Shock pool and residualisation: bit-reproducible small OLS fits checked against statsmodels."""

import numpy as np
import statsmodels.api as sm

from planted.worlds.data import embedded_hml
from planted.worlds.pool import ar1_residuals, default_pool, exact_ols, own_lag_residuals, standardise


def test_exact_ols_matches_statsmodels():
    rng = np.random.default_rng(3)
    design = np.column_stack([np.ones(500), rng.standard_normal((500, 12))])
    y = design @ rng.standard_normal(13) + rng.standard_normal(500)
    np.testing.assert_allclose(exact_ols(y, design), sm.OLS(y, design).fit().params, rtol=1e-10, atol=1e-12)


def test_ar1_and_own_lag_residuals_match_statsmodels():
    returns = embedded_hml().returns
    ar1 = sm.OLS(returns[1:], sm.add_constant(returns[:-1])).fit()
    np.testing.assert_allclose(ar1_residuals(returns), ar1.resid, rtol=0, atol=1e-14)
    lags = np.column_stack([returns[12 - j : -j] for j in range(1, 13)])
    ar12 = sm.OLS(returns[12:], sm.add_constant(lags)).fit()
    np.testing.assert_allclose(own_lag_residuals(returns, 12), ar12.resid, rtol=0, atol=1e-14)


def test_default_pool_is_standardised_hml_ar1_residuals():
    pool = default_pool()
    assert pool.size == 644  # 645 months 1963-07 .. 2017-03, less one lag
    assert abs(pool.values.mean()) < 1e-15
    assert pool.values.std() == 1.0 or abs(pool.values.std() - 1.0) < 1e-15
    assert not pool.values.flags.writeable
    expected = standardise(ar1_residuals(embedded_hml().returns))
    np.testing.assert_array_equal(pool.values, expected)
    assert "1963-07..2017-03" in pool.source
    # the pool keeps the fat tails of the factor (kurtosis well above the normal's 3)
    assert ((pool.values**4).mean()) > 4.0

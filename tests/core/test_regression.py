"""Vectorised OLS and Newey-West slope t-statistics against statsmodels (tolerance 1e-10 relative)."""

import numpy as np
import pytest
import statsmodels.api as sm

from planted.regression import newey_west_slope_t, ols_slope_t


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(8)
    x = np.cumsum(rng.standard_normal((3, 4, 300)), axis=-1) * 0.1 + rng.standard_normal((3, 4, 300))
    y = 0.05 * x + rng.standard_normal((3, 4, 300)) * (1 + 0.5 * np.abs(x))
    return y, x


def test_ols_slope_t_matches_statsmodels(data):
    y, x = data
    slope, t = ols_slope_t(y, x)
    for i, j in np.ndindex(3, 4):
        fit = sm.OLS(y[i, j], sm.add_constant(x[i, j])).fit()
        assert slope[i, j] == pytest.approx(fit.params[1], rel=1e-10)
        assert t[i, j] == pytest.approx(fit.tvalues[1], rel=1e-10)


@pytest.mark.parametrize("lags", [0, 1, 12])
def test_newey_west_slope_t_matches_statsmodels_hac(data, lags):
    y, x = data
    slope, t = newey_west_slope_t(y, x, lags)
    for i, j in np.ndindex(3, 4):
        fit = sm.OLS(y[i, j], sm.add_constant(x[i, j])).fit(cov_type="HAC", cov_kwds={"maxlags": lags})
        assert slope[i, j] == pytest.approx(fit.params[1], rel=1e-10)
        assert t[i, j] == pytest.approx(fit.tvalues[1], rel=1e-10)


def test_broadcasting_one_y_against_many_regressors(data):
    y, x = data
    _, t_broadcast = newey_west_slope_t(y[:, :1, :], x, 12)
    _, t_explicit = newey_west_slope_t(np.broadcast_to(y[:, :1, :], x.shape), x, 12)
    np.testing.assert_array_equal(t_broadcast, t_explicit)

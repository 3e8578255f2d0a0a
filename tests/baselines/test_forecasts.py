"""Forecast kernels against plain statsmodels loops and the published Clark-West test vector."""

import numpy as np
import pytest
import statsmodels.api as sm

from planted.baselines.forecasts import compare_forecasts, expanding_mean_forecasts, expanding_ols_forecasts
from planted.worlds.processes import trailing_mean

E1 = [9.78432, 12.73500, 8.67224, 2.62740, 5.60947, 7.57809, 4.53774, 2.51084, 0.49290, 3.48394, 9.46152,
      9.41220, 2.36289, 0.34495, 3.33599, 5.31357, 4.28219, -3.74471, -5.73575, -3.71781]
E2 = [2.82053, 4.39754, -1.78647, -4.30662, 3.69526, 3.37259, -1.09002, -0.50984, -0.78973, 3.89077, 7.52849,
      2.82373, -3.95838, -0.13606, 4.54444, 4.18216, 1.67993, -5.38077, -0.85686, 2.70479]


def test_clark_west_reproduces_the_published_vector():
    """HypothesisTests.jl's vector: 3.70222 with divisor P, 3.60847 with P - 1 (ours), p = 0.000154."""
    e1, e2 = np.array(E1), np.array(E2)
    zeros = np.zeros(e1.size)
    result = compare_forecasts(zeros, -e1, -e2, 0, e1.size)
    assert result.cw_stat == pytest.approx(3.60847, abs=5e-6)
    assert result.cw_pvalue == pytest.approx(0.000154, abs=5e-7)
    f = e1**2 - e2**2 + (e1 - e2) ** 2
    assert f.mean() / (f.std(ddof=0) / np.sqrt(f.size)) == pytest.approx(3.70222, abs=5e-6)
    assert result.oos_r2 == pytest.approx(1 - (e2**2).sum() / (e1**2).sum(), rel=1e-12)


def test_clark_west_is_the_t_statistic_of_f_on_a_constant():
    rng = np.random.default_rng(0)
    r, bench, model = rng.standard_normal((3, 2, 80))
    result = compare_forecasts(r, bench, model, 10, 80)
    for i in range(2):
        window = slice(10, 80)
        f = (r[i, window] - bench[i, window]) ** 2 - ((r[i, window] - model[i, window]) ** 2 - (bench[i, window] - model[i, window]) ** 2)
        fit = sm.OLS(f, np.ones_like(f)).fit()
        assert result.cw_stat[i] == pytest.approx(fit.tvalues[0], rel=1e-12)


@pytest.fixture(scope="module")
def series():
    rng = np.random.default_rng(1)
    x = np.empty(200)
    x[0] = 0
    for t in range(1, 200):
        x[t] = 0.9 * x[t - 1] + rng.standard_normal()
    r = np.empty(200)
    r[0] = 0.1
    r[1:] = 0.2 + 0.3 * x[:-1] + rng.standard_normal(199)
    return r * 3 + 1, x * 7 - 40  # large affine offsets stress the cumulative sums


@pytest.mark.parametrize("refit_every", [1, 12])
def test_expanding_ols_matches_a_statsmodels_loop(series, refit_every):
    r, x = series
    fc = expanding_ols_forecasts(r, x, 100, 200, refit_every=refit_every)
    assert np.isnan(fc[:100]).all()
    for m in range(100, 200):
        last = 99 + refit_every * ((m - 100) // refit_every)  # data through month `last`
        fit = sm.OLS(r[1 : last + 1], sm.add_constant(x[:last])).fit()
        assert fc[m] == pytest.approx(fit.params[0] + fit.params[1] * x[m - 1], rel=1e-9)


def test_expanding_ols_skips_missing_pairs_and_needs_24(series):
    r, _ = series
    m12 = trailing_mean(r, 12)
    fc = expanding_ols_forecasts(r, m12, 1, 200)
    # pairs exist from s = 11; at target m there are m - 12 of them; 24 are needed
    assert np.isnan(fc[:36]).all() and np.isfinite(fc[36:]).all()
    fit = sm.OLS(r[12:60], sm.add_constant(m12[11:59])).fit()
    assert fc[60] == pytest.approx(fit.params[0] + fit.params[1] * m12[59], rel=1e-9)


def test_forecasts_use_no_future_data(series):
    r, x = series
    base = expanding_ols_forecasts(r, x, 50, 200, refit_every=12)
    r2, x2 = r.copy(), x.copy()
    r2[120:] += 100.0
    x2[120:] -= 50.0
    moved = expanding_ols_forecasts(r2, x2, 50, 200, refit_every=12)
    np.testing.assert_array_equal(base[:121], moved[:121])
    mean = expanding_mean_forecasts(r, 1, 200)
    np.testing.assert_array_equal(mean[:121], expanding_mean_forecasts(r2, 1, 200)[:121])


def test_expanding_mean_matches_a_loop(series):
    r, _ = series
    fc = expanding_mean_forecasts(r, 5, 200)
    assert np.isnan(fc[:5]).all()
    for m in (5, 77, 199):
        assert fc[m] == pytest.approx(r[:m].mean(), rel=1e-12)

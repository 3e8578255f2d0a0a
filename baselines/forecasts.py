"""Out-of-sample forecasts and their evaluation: expanding OLS, the historical mean, Clark-West, OOS R2.

Conventions (SPEC 3.1, 3.2a):

* Forecast arrays are indexed by **target month**: ``fc[..., m]`` forecasts ``r[m]`` at the end of
  month ``m - 1`` from data through month ``m - 1``; NaN where no forecast is made.
* A univariate forecast is ``a + b x[m-1]`` with ``(a, b)`` the OLS fit over the pairs
  ``(x[s], r[s+1])`` with ``s + 1 <= F``, where F is the last month of data at the (re)fit. With
  ``refit_every = 1``, ``F = m - 1``; with ``refit_every = k``, the coefficients are refit at the
  start of the window and every k months (F = first_target - 1 + k * floor((m - first_target) / k)),
  the forecast still uses the current ``x[m-1]`` (the evaluator's contract for deployed models).
  At least ``min_pairs`` (24) complete pairs are required; pairs with a NaN are skipped.
* The benchmark is the expanding historical mean of all returns through month ``m - 1``, updated
  every month.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from planted._typing import Float64Array

MIN_PAIRS = 24


def fit_months(first_target: int, last_target: int, refit_every: int) -> np.ndarray:
    """Last data month F of the fit used for each target month in ``[first_target, last_target)``."""
    if refit_every < 1:
        raise ValueError(f"refit_every must be at least 1, got {refit_every}")
    offsets = np.arange(last_target - first_target)
    return first_target - 1 + refit_every * (offsets // refit_every)


def expanding_ols_forecasts(
    returns: Float64Array,
    x: Float64Array,
    first_target: int,
    last_target: int,
    *,
    refit_every: int = 1,
    min_pairs: int = MIN_PAIRS,
) -> Float64Array:
    """Expanding-window univariate OLS forecasts of ``returns`` from ``x`` (see module conventions).

    Parameters
    ----------
    returns : ndarray, shape (..., T)
    x : ndarray, shape (..., T)
        Predictor observed at the end of each month (NaN where unavailable); broadcasts with
        ``returns`` over the leading axes.
    first_target, last_target : int
        Target months ``first_target <= m < last_target`` (``first_target >= 1``).
    refit_every : int, default 1
    min_pairs : int, default 24

    Returns
    -------
    ndarray, shape (..., T)
        NaN outside the target range and where fewer than ``min_pairs`` pairs exist.

    Notes
    -----
    Vectorised with cumulative sums of the pairs, after shifting x and r by their first complete
    pair (a causal constant that leaves the OLS forecast unchanged and keeps the sums well
    conditioned).
    """
    returns, x = np.broadcast_arrays(np.asarray(returns, dtype=float), np.asarray(x, dtype=float))
    length = returns.shape[-1]
    if not 1 <= first_target <= last_target <= length:
        raise ValueError(f"need 1 <= first_target <= last_target <= {length}, got {first_target}, {last_target}")
    xs, ys = x[..., :-1], returns[..., 1:]
    valid = np.isfinite(xs) & np.isfinite(ys)
    first_valid = np.argmax(valid, axis=-1)[..., None]
    x_shift = np.take_along_axis(xs, first_valid, axis=-1)
    y_shift = np.take_along_axis(ys, first_valid, axis=-1)
    xc = np.where(valid, xs - x_shift, 0.0)
    yc = np.where(valid, ys - y_shift, 0.0)
    sums = {
        name: np.cumsum(values, axis=-1)
        for name, values in (("n", valid.astype(float)), ("x", xc), ("y", yc), ("xx", xc * xc), ("xy", xc * yc))
    }
    fit = fit_months(first_target, last_target, refit_every)  # pairs s <= F - 1
    at = {name: values[..., fit - 1] for name, values in sums.items()}
    count = at["n"]
    with np.errstate(invalid="ignore", divide="ignore"):
        sxx = at["xx"] - at["x"] ** 2 / count
        sxy = at["xy"] - at["x"] * at["y"] / count
        slope = sxy / sxx
        intercept = (at["y"] - slope * at["x"]) / count
    current_x = x[..., first_target - 1 : last_target - 1] - x_shift
    forecast = y_shift + intercept + slope * current_x
    forecast = np.where(count >= min_pairs, forecast, np.nan)
    out = np.full(returns.shape, np.nan)
    out[..., first_target:last_target] = forecast
    return out


def expanding_mean_forecasts(returns: Float64Array, first_target: int, last_target: int) -> Float64Array:
    """Historical-mean benchmark: ``fc[m] = mean(r[0..m-1])`` for targets in the range (NaN elsewhere)."""
    returns = np.asarray(returns, dtype=float)
    shift = returns[..., :1]
    running = np.cumsum(returns - shift, axis=-1) / np.arange(1, returns.shape[-1] + 1)
    out = np.full(returns.shape, np.nan)
    out[..., first_target:last_target] = shift + running[..., first_target - 1 : last_target - 1]
    return out


@dataclass(frozen=True)
class ForecastComparison:
    """Clark-West test and OOS R2 of a model against the benchmark over one evaluation window.

    Attributes
    ----------
    cw_stat : ndarray
        Clark-West statistic; positive favours the model.
    cw_pvalue : ndarray
        One-sided normal p-value ``1 - Phi(cw_stat)``.
    oos_r2 : ndarray
        Campbell-Thompson out-of-sample R2, ``1 - sum(e_model^2) / sum(e_bench^2)``.
    n_forecasts : int
        P, the number of target months.
    """

    cw_stat: Float64Array
    cw_pvalue: Float64Array
    oos_r2: Float64Array
    n_forecasts: int


def compare_forecasts(
    returns: Float64Array, benchmark: Float64Array, model: Float64Array, first_target: int, last_target: int
) -> ForecastComparison:
    """Clark-West (2007) test and Campbell-Thompson OOS R2 of ``model`` against ``benchmark``.

    Parameters
    ----------
    returns, benchmark, model : ndarray, shape (..., T)
        Realised returns and forecasts indexed by target month.
    first_target, last_target : int
        Evaluation window ``[first_target, last_target)``; P = last_target - first_target.

    Returns
    -------
    ForecastComparison
        NaN entries where a forecast in the window is missing.

    Notes
    -----
    ``f[m] = (r - rbar)^2 - [(r - rhat)^2 - (rbar - rhat)^2]``; the statistic is the t-statistic of a
    regression of f on a constant, ``mean(f) / (sd(f) / sqrt(P))`` with the variance divisor P - 1;
    the p-value is one-sided from the normal distribution (positive statistics favour the model).

    References
    ----------
    Clark, T. E. and West, K. D. (2007). Approximately normal tests for equal predictive accuracy in
    nested models. Journal of Econometrics 138(1), 291-311. doi:10.1016/j.jeconom.2006.05.023
    Campbell, J. Y. and Thompson, S. B. (2008). Predicting excess stock returns out of sample: can
    anything beat the historical average? Review of Financial Studies 21(4), 1509-1531.
    doi:10.1093/rfs/hhm055
    """
    window = slice(first_target, last_target)
    r = np.asarray(returns, dtype=float)[..., window]
    e_bench = r - np.asarray(benchmark, dtype=float)[..., window]
    e_model = r - np.asarray(model, dtype=float)[..., window]
    gap = np.asarray(benchmark, dtype=float)[..., window] - np.asarray(model, dtype=float)[..., window]
    f = e_bench**2 - (e_model**2 - gap**2)
    n = last_target - first_target
    with np.errstate(invalid="ignore", divide="ignore"):
        stat = f.mean(axis=-1) / (f.std(axis=-1, ddof=1) / np.sqrt(n))
        oos = 1.0 - (e_model**2).sum(axis=-1) / (e_bench**2).sum(axis=-1)
    return ForecastComparison(cw_stat=stat, cw_pvalue=stats.norm.sf(stat), oos_r2=oos, n_forecasts=n)

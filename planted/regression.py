"""Vectorised simple-regression kernels shared by world selection rules and the baselines.

Every function regresses ``y`` on a constant and one regressor ``x`` along the **last axis** and
broadcasts over all leading axes, so thousands of worlds (or candidates) are handled in one call.
"""

from __future__ import annotations

import numpy as np

from planted._typing import Float64Array


def _demeaned_fit(y: Float64Array, x: Float64Array) -> tuple[Float64Array, Float64Array, Float64Array]:
    """Return (slope, residuals, demeaned x) of the OLS fit of y on [1, x] along the last axis."""
    x_dm = x - x.mean(axis=-1, keepdims=True)
    y_dm = y - y.mean(axis=-1, keepdims=True)
    sxx = np.einsum("...t,...t->...", x_dm, x_dm)
    slope = np.einsum("...t,...t->...", x_dm, y_dm) / sxx
    resid = y_dm - slope[..., None] * x_dm
    return slope, resid, x_dm


def ols_slope_t(y: Float64Array, x: Float64Array) -> tuple[Float64Array, Float64Array]:
    """OLS slope and its conventional t-statistic in ``y = a + b x + e``.

    Parameters
    ----------
    y, x : ndarray
        Broadcastable arrays with time on the last axis (T observations).

    Returns
    -------
    slope, t : ndarray
        Shape of the broadcast leading axes.

    Notes
    -----
    Homoskedastic standard error with the degrees-of-freedom divisor ``T - 2``, exactly
    ``statsmodels.OLS(y, add_constant(x)).fit()`` (``cov_type="nonrobust"``).
    """
    y, x = np.broadcast_arrays(np.asarray(y, dtype=float), np.asarray(x, dtype=float))
    n_obs = y.shape[-1]
    slope, resid, x_dm = _demeaned_fit(y, x)
    s2 = np.einsum("...t,...t->...", resid, resid) / (n_obs - 2)
    se = np.sqrt(s2 / np.einsum("...t,...t->...", x_dm, x_dm))
    return slope, slope / se


def newey_west_slope_t(
    y: Float64Array, x: Float64Array, lags: int = 12
) -> tuple[Float64Array, Float64Array]:
    """OLS slope and its Newey-West (HAC) t-statistic in ``y = a + b x + e``.

    Parameters
    ----------
    y, x : ndarray
        Broadcastable arrays with time on the last axis.
    lags : int, default 12
        Bartlett truncation lag L; weights ``1 - l / (L + 1)`` for l = 1..L.

    Returns
    -------
    slope, t : ndarray

    Notes
    -----
    The convention of ``statsmodels.OLS(y, add_constant(x)).fit(cov_type="HAC",
    cov_kwds={"maxlags": L})``: Bartlett kernel, no small-sample (degrees-of-freedom) correction,
    meat built from the scores ``x_dm[t] * e[t]`` (which, for the slope of a regression with a
    constant, equals the slope element of the full sandwich by Frisch-Waugh-Lovell). Two-sided
    p-values use the normal distribution.

    References
    ----------
    Newey, W. K. and West, K. D. (1987). A simple, positive semi-definite, heteroskedasticity and
    autocorrelation consistent covariance matrix. Econometrica 55(3), 703-708. doi:10.2307/1913610
    """
    if lags < 0:
        raise ValueError(f"lags must be non-negative, got {lags}")
    y, x = np.broadcast_arrays(np.asarray(y, dtype=float), np.asarray(x, dtype=float))
    slope, resid, x_dm = _demeaned_fit(y, x)
    score = x_dm * resid
    meat = np.einsum("...t,...t->...", score, score)
    for lag in range(1, lags + 1):
        weight = 1.0 - lag / (lags + 1.0)
        meat = meat + 2.0 * weight * np.einsum("...t,...t->...", score[..., lag:], score[..., :-lag])
    sxx = np.einsum("...t,...t->...", x_dm, x_dm)
    se = np.sqrt(meat) / sxx
    return slope, slope / se

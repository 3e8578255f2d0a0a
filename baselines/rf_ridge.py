"""Random Fourier features ridge forecasts (Kelly, Malamud and Zhou 2024), vectorised over months.

:func:`rf_ridge_forecasts` is the ``rf_ridge`` procedure of SPEC 3.1 with the conventions of SPEC
3.2a: 12,000 random Fourier features of the 9 volatility-standardised candidates, a 12-month rolling
window, ridge penalty z = 1,000 solved in the dual (kernel) form. The features and the Gram matrix
of every refit are computed by the compiled kernels of ``rf_kernels.c`` (bound in
``planted.baselines._rf_kernels``); this module prepares their inputs and solves the small dual
systems. See the Notes of :func:`rf_ridge_forecasts`.
"""

from __future__ import annotations

import numpy as np

from planted._typing import Float64Array, Int64Array
from planted.baselines import _rf_kernels  # type: ignore[attr-defined]  # compiled, no stub

__all__ = ["expanding_std", "rf_ridge_forecasts"]


def expanding_std(values: Float64Array) -> Float64Array:
    """Expanding-window sample standard deviation through each month, ignoring NaN.

    Parameters
    ----------
    values : ndarray, shape (..., T)
        Time on the last axis; NaN marks a missing month.

    Returns
    -------
    ndarray, shape (..., T)
        ``out[..., s] = numpy.nanstd(values[..., :s + 1], ddof=1)``: the divisor is (count - 1), as
        MATLAB's ``nanstd`` in Kelly, Malamud and Zhou's ``volstdbwd``. NaN where fewer than two
        finite values are available.

    Notes
    -----
    Computed from cumulative sums of the values shifted by the first finite value of each series
    (which removes the cancellation of a large mean); agrees with the definition to ~1e-13 relative.
    Uses only months 0..s for ``out[..., s]``.
    """
    values = np.asarray(values, dtype=float)
    finite = np.isfinite(values)
    first = np.argmax(finite, axis=-1)
    shift = np.take_along_axis(values, first[..., None], axis=-1)
    shift = np.where(np.isfinite(shift), shift, 0.0)
    dev = np.where(finite, values - shift, 0.0)
    count = np.cumsum(finite, axis=-1)
    s1 = np.cumsum(dev, axis=-1)
    s2 = np.cumsum(dev * dev, axis=-1)
    out = np.full(values.shape, np.nan)
    ok = count >= 2
    safe_count = np.where(ok, count, 2)
    var = (s2 - s1 * s1 / safe_count) / (safe_count - 1)
    np.sqrt(np.maximum(var, 0.0), out=out, where=ok)
    return out


def rf_ridge_forecasts(
    returns: Float64Array,
    predictors: Float64Array,
    weights: Float64Array,
    *,
    first_target: int,
    last_target: int,
    refit_every: int = 1,
    window: int = 12,
    gamma: float = 2.0,
    penalty: float = 1000.0,
) -> Float64Array:
    """Random Fourier features ridge forecasts, indexed by target month.

    Parameters
    ----------
    returns : ndarray, shape (n, T)
        Returns r[0..T-1] of n worlds.
    predictors : ndarray, shape (n, K, T)
        Predictors x[s] observed at the end of month s (NaN where unavailable, e.g. the trailing
        12-month mean return in months 0..10).
    weights : ndarray, shape (P/2, K) or (n, P/2, K)
        Standard normal random weights W (one matrix for all worlds, or one per world); P/2 must be
        even. SPEC: P/2 = 6,000 and K = 9.
    first_target, last_target : int
        Forecast the target months ``first_target <= m < last_target`` (``last_target <= T``).
    refit_every : int, default 1
        Refit in target months ``first_target, first_target + refit_every, ...``; between refits
        the coefficients of the last refit are applied to the current x[m - 1].
    window : int, default 12
        Training window length T_w (rows of the fit).
    gamma : float, default 2.0
        Bandwidth of the random features.
    penalty : float, default 1000.0
        Ridge penalty z.

    Returns
    -------
    ndarray, shape (n, T)
        ``fc[i, m]`` is the forecast of ``returns[i, m]`` made at the end of month m - 1 from data
        through month m - 1 only; NaN outside ``[first_target, last_target)`` and where no forecast
        can be made (see Notes).

    Notes
    -----
    Conventions (SPEC 3.2a; Kelly, Malamud and Zhou 2024, and the authors' MATLAB code
    ``tryrff_v2.m`` / ``volstdbwd.m`` for the choices the paper leaves implicit):

    * Inputs: ``xt[s] = x[s] / sd(x[0..s])``, each of the K predictors divided (not demeaned) by
      its expanding-window sample standard deviation through the month it is observed
      (:func:`expanding_std`: divisor count - 1, NaN months skipped). The authors' code uses the
      first 36 months' s.d. for months 0..35 (a look-ahead); here month s only ever uses months
      0..s, so an input needs two finite observations.
    * Features: ``f(xt) = [cos(gamma W xt); sin(gamma W xt)]``, P = 2 W.shape[0] (the order of the
      features is immaterial: every quantity below is a sum over them).
    * Refit in target month m_r: training pairs (xt[s], r[s + 1]) for the ``window`` months
      s = m_r - window - 1, ..., m_r - 2, i.e. targets r[m_r - window .. m_r - 1].
    * Each feature is divided (not demeaned) by its sample standard deviation over the
      ``window`` training rows, divisor ``window - 1`` (MATLAB ``nanstd`` in the authors' code); the
      prediction row is divided by the same training s.d. A feature with zero training s.d. (only
      possible with degenerate inputs) gets weight zero rather than an infinite value.
    * No intercept, raw return target (the authors' code scales returns by trailing volatility; the
      SPEC fixes the raw return), ``beta = (z I + Z'Z / T_w)^-1 Z'y / T_w`` computed in the dual
      form ``Z'(ZZ' + z T_w I)^-1 y`` (T_w = ``window``), which is algebraically identical
      (push-through identity) and costs a ``window x window`` solve instead of a P x P one.
    * The forecast for target m is ``f(xt[m - 1]) / sd_train @ beta`` with the coefficients and
      training s.d. of the last refit m_r <= m.
    * Missing data: a refit is made only if all ``window`` training rows have finite inputs (all K
      of them) and finite targets; a forecast only if, in addition, the prediction row xt[m - 1] is
      finite. Otherwise the forecast is NaN. With the trailing 12-month mean return as an input
      (NaN in months 0..10, s.d. defined from month 12) the first target that can be forecast with
      ``window = 12`` is month 25; no shorter window is substituted. Refits whose training window
      would start before month 0 are skipped (the months they would serve get NaN).

    Computation (one world at a time): the expanding s.d. and the inputs in numpy; the features
    and, for every refit, the Gram matrix ``Z Z'`` of the scaled training rows and the kernel rows
    ``z_pred Z'`` in C (``rf_kernels.c``). There the features are made block by block of 256, each
    month's block once, as the refits first need it, into a ring of rows that stays in the level-1
    cache (no P-column feature array is ever stored), and the dot products ``sum_p f_a,p w_p f_b,p``
    (``w_p = 1 / sd_p^2``) run in register tiles. The training-window sums of every feature slide
    by one row per monthly refit, as deviations from an anchor row at most a window back; a
    variance then carries a relative error of about ``eps * (spread of the feature since the anchor
    / its s.d. in the window)^2``, which is what the forecasts' agreement with a two-pass reference
    (to 1e-9 relative, tested with 12,000 features) reflects. The ``window x window`` solves are
    batched over refits in numpy (LAPACK). Everything is float64: rounding the features or the Gram
    matrix to float32 moves individual forecasts by up to ~1e-4 relative (nearly constant features
    get large weights ``1 / sd``). The compiled part does not depend on the machine: no fused
    multiply-adds, a fixed summation order (four lanes over the features, added at the end), the
    same bits from its AVX2 and its baseline builds (tested); sin and cos are computed there too
    (fdlibm's polynomials), not by the C library. Memory: about 1.5 MB of workspace per call. On
    one core of the development machine (AMD EPYC, Zen 3) a world costs about 60 ms: the 350 monthly
    pseudo-OOS refits and the 30 test refits, features included; see ``docs/performance.md``.

    References
    ----------
    Kelly, B., Malamud, S. and Zhou, K. (2024). The virtue of complexity in return prediction.
    Journal of Finance 79(1), 459-503. doi:10.1111/jofi.13298
    Rahimi, A. and Recht, B. (2007). Random features for large-scale kernel machines. Advances in
    Neural Information Processing Systems 20.
    """
    returns = np.asarray(returns, dtype=float)
    predictors = np.asarray(predictors, dtype=float)
    weights = np.asarray(weights, dtype=float)
    if returns.ndim != 2 or predictors.ndim != 3 or predictors.shape[0] != returns.shape[0]:
        raise ValueError("returns must be (n, T) and predictors (n, K, T) with the same n")
    n_worlds, n_months = returns.shape
    n_inputs = predictors.shape[1]
    if predictors.shape[2] != n_months:
        raise ValueError("returns and predictors must have the same number of months")
    if weights.ndim == 2:
        weights = np.broadcast_to(weights, (n_worlds, *weights.shape))
    if weights.ndim != 3 or weights.shape[0] != n_worlds or weights.shape[2] != n_inputs:
        raise ValueError(f"weights must be (P/2, {n_inputs}) or ({n_worlds}, P/2, {n_inputs})")
    if not 0 <= first_target <= last_target <= n_months:
        raise ValueError(f"need 0 <= first_target <= last_target <= T = {n_months}")
    if refit_every < 1 or window < 2:
        raise ValueError("refit_every must be >= 1 and window >= 2")
    if penalty <= 0:
        raise ValueError("penalty must be positive")
    if weights.shape[1] % 2:
        raise ValueError(f"weights must have an even number of rows (feature pairs), got {weights.shape[1]}")

    out = np.full((n_worlds, n_months), np.nan)
    refits = np.arange(first_target, last_target, refit_every)
    refits = refits[refits - window - 1 >= 0]  # a window starting before month 0 cannot be fitted
    if refits.size == 0:
        return out
    row_lo = int(refits[0]) - window - 1  # feature rows x[row_lo .. last_target - 2]
    for i in range(n_worlds):
        _one_world(out[i], returns[i], predictors[i], weights[i], refits, row_lo, last_target, window, refit_every,
                   gamma, penalty)
    return out


def _one_world(
    fc: Float64Array,
    returns: Float64Array,
    predictors: Float64Array,
    weights: Float64Array,
    refits: Int64Array,
    row_lo: int,
    last_target: int,
    window: int,
    refit_every: int,
    gamma: float,
    penalty: float,
) -> None:
    """Write the forecasts of one world into ``fc`` (see :func:`rf_ridge_forecasts`)."""
    row_hi = last_target - 1
    # Inputs divided by their expanding s.d. (through the month observed); one feature row a month.
    scale = expanding_std(predictors[:, :row_hi])[:, row_lo:]
    raw = predictors[:, row_lo:row_hi]
    valid_row = np.all(np.isfinite(raw) & np.isfinite(scale) & (scale > 0), axis=0)
    inputs = np.zeros((row_hi - row_lo, predictors.shape[0]))
    np.divide(raw.T, scale.T, out=inputs, where=valid_row[:, None])

    # A refit is usable if its training rows have finite inputs and targets (checked by counting).
    starts = refits - window - 1 - row_lo
    served = np.minimum(refit_every, last_target - refits)
    bad_rows = np.concatenate([[0], np.cumsum(~valid_row)])
    bad_targets = np.concatenate([[0], np.cumsum(~np.isfinite(returns))])
    usable = (bad_rows[starts + window] == bad_rows[starts]) & (
        bad_targets[refits] == bad_targets[refits - window]
    )
    targets = np.where(usable[:, None], returns[refits[:, None] - window + np.arange(window)], 0.0)
    grams = np.empty((refits.size, window, window))
    kernels = np.empty((refits.size, refit_every, window))
    _rf_kernels.grams(inputs, np.ascontiguousarray(gamma * weights.T), starts.astype(np.intp), served.astype(np.intp),
                      grams, kernels)
    diagonal = np.arange(window)
    grams[:, diagonal, diagonal] += penalty * window
    duals = np.linalg.solve(grams, targets[..., None])
    forecasts = np.matmul(kernels, duals)[..., 0]
    offsets = np.arange(refit_every)
    kept = usable[:, None] & (offsets < served[:, None])  # (refit, month served) pairs with a forecast
    months = (refits[:, None] + offsets)[kept]
    fc[months] = np.where(valid_row[months - 1 - row_lo], forecasts[kept], np.nan)

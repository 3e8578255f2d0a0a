"""Random Fourier features ridge forecasts (Kelly, Malamud and Zhou 2024), vectorised over months.

:func:`rf_ridge_forecasts` is the ``rf_ridge`` procedure of SPEC 3.1 with the conventions of SPEC
3.2a: 12,000 random Fourier features of the 9 volatility-standardised candidates, a 12-month rolling
window, ridge penalty z = 1,000 solved in the dual (kernel) form. The work of one world is organised
so that each month's features are computed once (not once per window that uses them) and each refit
costs one 12 x 12 Gram matrix of P scaled features (a BLAS syrk); see the Notes of the function.
"""

from __future__ import annotations

import numpy as np

from planted._typing import Float64Array, Int64Array

__all__ = ["expanding_std", "rf_ridge_forecasts", "sincos"]

_TABLE_BITS = 12
_TABLE_SIZE = 1 << _TABLE_BITS
_TABLE_STEP = 2.0 * np.pi / _TABLE_SIZE
# The step 2 pi / N as an exact sum _STEP_HI + _STEP_LO (to ~1e-26): _STEP_HI has 24 significant
# bits, so q * _STEP_HI is exact for |q| < 2**29 (Cody-Waite reduction); _TWO_PI_LO = 2 pi - fl(2 pi).
_TWO_PI_LO = 2.4492935982947064e-16
_STEP_HI = float(np.float32(_TABLE_STEP))
_STEP_LO = ((2.0 * np.pi - _TABLE_SIZE * _STEP_HI) + _TWO_PI_LO) / _TABLE_SIZE
_ROUND_MAGIC = 1.5 * 2.0**52


def _tables() -> tuple[Float64Array, Float64Array]:
    """cos and sin of 2 pi k / N, k = 0..N-1, to about one unit in the last place."""
    k = np.arange(_TABLE_SIZE, dtype=float)
    hi, lo = k * _STEP_HI, k * _STEP_LO  # hi exact; angle = hi + lo, |lo| < 4e-7
    cos_hi, sin_hi = np.cos(hi), np.sin(hi)
    half_lo2 = 0.5 * lo * lo
    return cos_hi - (sin_hi * lo + cos_hi * half_lo2), sin_hi + (cos_hi * lo - sin_hi * half_lo2)


_TABLE_COS, _TABLE_SIN = _tables()
_SINCOS_CHUNK = 8192


def sincos(angles: Float64Array, out_cos: Float64Array, out_sin: Float64Array) -> None:
    """Write ``cos(angles)`` and ``sin(angles)`` in float64 precision, several times faster than numpy.

    Parameters
    ----------
    angles : ndarray of float64, shape (R, C)
        Finite angles in radians, |angle| < 8e5.
    out_cos, out_sin : ndarray of float64, shape (R, C)
        Overwritten; may be views with any row stride (e.g. the two halves of a feature matrix).

    Notes
    -----
    numpy evaluates float64 ``sin``/``cos`` with scalar libm calls unless the CPU has AVX-512; this
    table method uses only vectorised arithmetic on cache-sized blocks of rows. With N = 4096,
    ``angle = q * 2 pi / N + d`` (q the nearest integer, Cody-Waite reduction, |d| <= pi / N),
    ``cos(angle) = C_q cos d - S_q sin d`` and ``sin(angle) = S_q cos d + C_q sin d`` with tables
    ``C_q, S_q`` accurate to an ulp, ``cos d = 1 + d^2 (d^2 / 24 - 1/2)`` and ``sin d = d (1 - d^2 /
    6)`` (truncation errors below 3e-18). The result agrees with
    ``numpy.cos``/``numpy.sin`` to a few units in the last place for |angle| < 8e5 (tested).
    """
    n_rows, n_cols = angles.shape
    rows = max(1, _SINCOS_CHUNK // max(n_cols, 1))
    shape = (min(rows, n_rows), n_cols)
    t, q, d, d2, a, b, tab_c, tab_s = (np.empty(shape) for _ in range(8))
    index = np.empty(shape, dtype=np.int64)
    for start in range(0, n_rows, rows):
        theta = angles[start : start + rows]
        m = theta.shape[0]
        if m < t.shape[0]:
            t, q, d, d2, a, b, tab_c, tab_s, index = (arr[:m] for arr in (t, q, d, d2, a, b, tab_c, tab_s, index))
        np.multiply(theta, 1.0 / _TABLE_STEP, out=t)
        t += _ROUND_MAGIC  # t now holds round(theta / step) in its low mantissa bits
        np.subtract(t, _ROUND_MAGIC, out=q)
        np.bitwise_and(t.view(np.int64), _TABLE_SIZE - 1, out=index)
        np.multiply(q, _STEP_HI, out=d)
        np.subtract(theta, d, out=d)
        q *= _STEP_LO
        d -= q
        np.take(_TABLE_COS, index, out=tab_c)
        np.take(_TABLE_SIN, index, out=tab_s)
        np.multiply(d, d, out=d2)
        np.multiply(d2, 1.0 / 24.0, out=a)  # a = cos d - 1, then cos d
        a -= 0.5
        a *= d2
        np.multiply(d2, -1.0 / 6.0, out=b)  # b = sin d
        b += 1.0
        b *= d
        a += 1.0  # cos d
        out = out_cos[start : start + m]
        np.multiply(tab_c, a, out=out)
        np.multiply(tab_s, b, out=q)
        out -= q
        out = out_sin[start : start + m]
        np.multiply(tab_s, a, out=out)
        np.multiply(tab_c, b, out=q)
        out += q


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
        Standard normal random weights W (one matrix for all worlds, or one per world).
        SPEC: P/2 = 6,000 and K = 9.
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
    * Features: ``f(xt) = [cos(gamma W xt); sin(gamma W xt)]`` (cosines first), P = 2 W.shape[0].
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

    Computation (one world at a time, vectorised over features): the expanding s.d. and the P
    features are computed once per month (one row each, :func:`sincos`); the training-window
    sums of every feature and of its square slide by one row per monthly refit (deviations from an
    anchor row, re-anchored every ``window`` refits, so nearly constant features keep their
    precision); each refit then costs the scaling of its ``window`` rows, one symmetric rank-P
    update ``Z Z'`` (BLAS syrk), the kernel row(s) ``z_pred Z'``, and a ``window x window`` solve
    (batched over refits). Everything is float64: rounding the features or the Gram matrix to
    float32 moves individual forecasts by up to ~1e-4 relative (nearly constant features get large
    weights ``1 / sd``). Memory: one world's feature matrix, ``(last_target - first_target + window)
    * P * 8`` bytes, reused across worlds. On one core of the development machine a world costs
    about 0.45 ms per monthly refit, features included (syrk ~40%, features ~25%, window sums and
    scaling ~30%). The BLAS calls are small: use one BLAS thread per process (joblib's loky
    workers do; elsewhere ``threadpoolctl.threadpool_limits(1)``), two are ~15% slower.

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

    out = np.full((n_worlds, n_months), np.nan)
    refits = np.arange(first_target, last_target, refit_every)
    refits = refits[refits - window - 1 >= 0]  # a window starting before month 0 cannot be fitted
    if refits.size == 0:
        return out
    work = _Workspace(int(refits[0]) - window - 1, last_target - 1, weights.shape[1], window, refit_every)
    for i in range(n_worlds):
        _one_world(out[i], returns[i], predictors[i], weights[i], refits, last_target, gamma, penalty, work)
    return out


class _Workspace:
    """Buffers reused across refits and worlds (fresh large arrays cost page faults on every use)."""

    def __init__(self, row_lo: int, row_hi: int, half: int, window: int, refit_every: int) -> None:
        self.row_lo, self.row_hi, self.window, self.refit_every = row_lo, row_hi, window, refit_every
        n_features = 2 * half
        self.features = np.empty((row_hi - row_lo, n_features))
        self.block = np.empty((window, n_features))
        self.predict = np.empty((refit_every, n_features))
        self.anchor, self.sum1, self.sum2, self.row, self.inverse_sd = (np.empty(n_features) for _ in range(5))


def _one_world(
    fc: Float64Array,
    returns: Float64Array,
    predictors: Float64Array,
    weights: Float64Array,
    refits: Int64Array,
    last_target: int,
    gamma: float,
    penalty: float,
    work: _Workspace,
) -> None:
    """Write the forecasts of one world into ``fc`` (see :func:`rf_ridge_forecasts`)."""
    window, refit_every, row_lo, row_hi = work.window, work.refit_every, work.row_lo, work.row_hi
    # Inputs divided by their expanding s.d. (through the month observed); one feature row a month.
    scale = expanding_std(predictors[:, :row_hi])[:, row_lo:]
    raw = predictors[:, row_lo:row_hi]
    valid_row = np.all(np.isfinite(raw) & np.isfinite(scale) & (scale > 0), axis=0)
    inputs = np.zeros((row_hi - row_lo, predictors.shape[0]))
    np.divide(raw.T, scale.T, out=inputs, where=valid_row[:, None])
    angles = inputs @ (gamma * weights).T
    half = weights.shape[0]
    features = work.features
    sincos(angles, features[:, :half], features[:, half:])
    del angles

    # A refit is usable if its training rows have finite inputs and targets (checked by counting).
    starts = refits - window - 1 - row_lo
    bad_rows = np.concatenate([[0], np.cumsum(~valid_row)])
    bad_targets = np.concatenate([[0], np.cumsum(~np.isfinite(returns))])
    usable = (bad_rows[starts + window] == bad_rows[starts]) & (
        bad_targets[refits] == bad_targets[refits - window]
    )
    targets = np.where(usable[:, None], returns[refits[:, None] - window + np.arange(window)], 0.0)
    n_refits = refits.size
    grams = np.empty((n_refits, window, window))
    kernels = np.zeros((n_refits, refit_every, window))
    scaled, inverse_sd = work.block, work.inverse_sd
    previous = -window  # training-window start (feature row) of the previous refit
    since_anchor = window
    for j, start in enumerate(starts.tolist()):
        stop = start + window
        served = min(refit_every, last_target - int(refits[j]))
        if start - previous >= window or since_anchor >= window:
            _window_sums(work, start)
            since_anchor = 0
        else:
            _slide_window_sums(work, previous, start)
            since_anchor += 1
        previous = start
        _inverse_sd(work)
        # Z = F_train D^-1 and the served prediction rows F_pred D^-1 (D: training-window s.d.).
        np.multiply(features[start:stop], inverse_sd, out=scaled)
        predict = work.predict[:served]
        np.multiply(features[stop : stop + served], inverse_sd, out=predict)
        # Gram matrix Z Z' (numpy calls BLAS syrk for A @ A.T) and the kernel rows z_pred Z'.
        np.matmul(scaled, scaled.T, out=grams[j])
        np.matmul(predict, scaled.T, out=kernels[j, :served])
    diagonal = np.arange(window)
    grams[:, diagonal, diagonal] += penalty * window
    duals = np.linalg.solve(grams, targets[..., None])
    forecasts = np.matmul(kernels, duals)[..., 0]
    for k in np.flatnonzero(usable).tolist():
        m_r = int(refits[k])
        targets_served = np.arange(m_r, min(m_r + refit_every, last_target))
        fc[targets_served] = np.where(
            valid_row[targets_served - 1 - row_lo], forecasts[k, : targets_served.size], np.nan
        )


def _window_sums(work: _Workspace, start: int) -> None:
    """Sums of the training rows' deviations from their first row, and of their squares."""
    features, block = work.features, work.block
    np.copyto(work.anchor, features[start])
    np.subtract(features[start : start + work.window], work.anchor, out=block)
    np.sum(block, axis=0, out=work.sum1)
    block *= block
    np.sum(block, axis=0, out=work.sum2)


def _slide_window_sums(work: _Workspace, previous: int, start: int) -> None:
    """Move the window sums from the window starting at row ``previous`` to ``start``."""
    features, row, window = work.features, work.row, work.window
    for leaving, entering in zip(range(previous, start), range(previous + window, start + window)):
        np.subtract(features[leaving], work.anchor, out=row)
        work.sum1 -= row
        row *= row
        work.sum2 -= row
        np.subtract(features[entering], work.anchor, out=row)
        work.sum1 += row
        row *= row
        work.sum2 += row


def _inverse_sd(work: _Workspace) -> None:
    """``1 / sd`` (divisor window - 1) of every feature from the window sums; 0 for a constant feature."""
    window, out, row = work.window, work.inverse_sd, work.row
    np.multiply(work.sum1, work.sum1, out=row)
    row *= 1.0 / window
    np.subtract(work.sum2, row, out=row)  # (window - 1) * variance
    if row.min() > 0:
        np.divide(window - 1.0, row, out=out)
    else:
        out[...] = 0.0
        np.divide(window - 1.0, row, out=out, where=row > 0)
    np.sqrt(out, out=out)

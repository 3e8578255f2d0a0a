"""Vectorised building blocks of the world families: AR filters, bootstrap indices, GARCH, regimes.

Each function works on a batch of worlds at once (worlds on the first axis, time on the last) and
takes the random draws as arguments instead of drawing them, so that every world's draws come from
its own seed stream while the arithmetic runs once for the whole batch.
"""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter


def ar1_from_innovations(
    start: np.ndarray, shocks: np.ndarray, phi: np.ndarray | float, *, overwrite: bool = False
) -> np.ndarray:
    """Paths of x[t] = phi x[t-1] + shocks[..., t] with x[..., 0] = start.

    Parameters
    ----------
    start : ndarray, shape (...)
        Initial values x[0].
    shocks : ndarray, shape (..., T)
        Innovations; ``shocks[..., 0]`` is ignored (x[0] is ``start``).
    phi : float or ndarray, shape (...)
        Persistence of each series. Series sharing a value are filtered together with
        :func:`scipy.signal.lfilter` (a sequential C loop, so the result is bit-reproducible).
    overwrite : bool, default False
        Allow the function to use ``shocks`` as its work buffer (saves a copy of a large batch).

    Returns
    -------
    ndarray, shape (..., T)
    """
    drive = shocks if overwrite else np.array(shocks, dtype=float, copy=True)
    drive[..., 0] = start
    phis = np.broadcast_to(np.asarray(phi, dtype=float), drive.shape[:-1])
    values = np.unique(phis)
    if values.size == 1:
        return lfilter([1.0], [1.0, -values[0]], drive, axis=-1)
    for value in values:
        rows = phis == value
        drive[rows] = lfilter([1.0], [1.0, -value], drive[rows], axis=-1)
    return drive


def stationary_unit_ar1(
    start_draws: np.ndarray, normal_draws: np.ndarray, phi: np.ndarray | float, *, overwrite: bool = False
) -> np.ndarray:
    """Unit-variance Gaussian AR(1) paths started from their stationary law.

    x[0] = start_draws, x[t] = phi x[t-1] + sqrt(1 - phi^2) normal_draws[t], so x has unconditional
    variance 1 at every t. ``overwrite`` lets the function scale ``normal_draws`` in place.
    """
    phis = np.broadcast_to(np.asarray(phi, dtype=float), normal_draws.shape[:-1])
    drive = normal_draws if overwrite else np.array(normal_draws, dtype=float, copy=True)
    drive *= np.sqrt(1.0 - phis * phis)[..., None]
    return ar1_from_innovations(start_draws, drive, phis, overwrite=True)


def stationary_bootstrap_indices(starts: np.ndarray, uniforms: np.ndarray, n_pool: int, mean_block: float) -> np.ndarray:
    """Indices of a stationary bootstrap (Politis-Romano), arch's algorithm, batched over rows.

    Parameters
    ----------
    starts : ndarray of int, shape (m, T)
        Uniform draws in [0, n_pool): the index used whenever a new block starts.
    uniforms : ndarray, shape (m, T)
        Standard uniforms; a new block starts at t > 0 when ``uniforms[:, t] <= 1 / mean_block``,
        otherwise the index advances by one and wraps around at ``n_pool``. t = 0 always starts one.
    n_pool : int
        Pool size.
    mean_block : float
        Expected block length (block lengths are geometric with success probability 1/mean_block).

    Returns
    -------
    ndarray of int64, shape (m, T)

    Notes
    -----
    Identical to ``arch.bootstrap.StationaryBootstrap`` (``stationary_bootstrap_sample``) when given
    the same ``starts`` and ``uniforms``; arch draws ``integers(n, size=n)`` then ``random(n)``.
    """
    m, length = uniforms.shape
    new_block = uniforms <= 1.0 / mean_block
    new_block[:, 0] = True
    time = np.broadcast_to(np.arange(length), (m, length))
    block_start = np.maximum.accumulate(np.where(new_block, time, 0), axis=1)
    first_index = np.take_along_axis(starts, block_start, axis=1)
    return (first_index + (time - block_start)) % n_pool


def trailing_mean(values: np.ndarray, window: int = 12) -> np.ndarray:
    """Trailing mean of the last ``window`` values through t (NaN for the first window - 1 values)."""
    values = np.asarray(values, dtype=float)
    out = np.full_like(values, np.nan)
    kernel = np.ones(window) / window
    full = lfilter(kernel, [1.0], values, axis=-1)
    out[..., window - 1 :] = full[..., window - 1 :]
    return out


def garch11_returns(std_shocks: np.ndarray, omega: float, arch: float, garch: float) -> np.ndarray:
    """GARCH(1,1) innovations eps[t] = sqrt(h[t]) e[t], h[t] = omega + arch eps[t-1]^2 + garch h[t-1].

    Starts at the unconditional variance h[0] = omega / (1 - arch - garch). Rows are independent.
    """
    h = np.full(std_shocks.shape[0], omega / (1.0 - arch - garch))
    eps = np.empty_like(std_shocks)
    for t in range(std_shocks.shape[1]):
        eps[:, t] = np.sqrt(h) * std_shocks[:, t]
        h = omega + arch * eps[:, t] ** 2 + garch * h
    return eps


def two_state_markov(first_uniform: np.ndarray, switch_uniforms: np.ndarray, stay: float) -> np.ndarray:
    """Symmetric two-state Markov chain (0 = low, 1 = high volatility) started from its 50/50 law.

    The state at t = 0 is high when ``first_uniform < 0.5``; at each later t the chain switches
    when ``switch_uniforms[:, t] < 1 - stay``.
    """
    switches = switch_uniforms < 1.0 - stay
    switches[:, 0] = first_uniform < 0.5
    return (np.cumsum(switches, axis=1) % 2).astype(np.int8)

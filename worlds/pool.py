"""Shock pools and residualised real returns, computed the same to the last bit on every machine.

The bootstrap worlds resample a **finite pool** of standardised AR(1) residuals of the monthly HML
factor; injected worlds use a factor residualised on 12 of its own lags. Both come from small OLS
fits. BLAS/LAPACK results may differ in the last bits across CPUs, which would change world bytes,
so these fits use exactly rounded sums (:func:`math.fsum`) and a pure-Python solve instead.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from planted.hashing import sha256_array
from planted.worlds.data import FactorSeries, embedded_hml


def exact_ols(y: np.ndarray, regressors: np.ndarray) -> np.ndarray:
    """OLS coefficients of ``y`` on the columns of ``regressors``, bit-reproducible across machines.

    Parameters
    ----------
    y : ndarray, shape (T,)
    regressors : ndarray, shape (T, k)
        Include a column of ones for an intercept.

    Returns
    -------
    ndarray, shape (k,)

    Notes
    -----
    Normal equations with every cross-product summed by :func:`math.fsum` (exactly rounded) and
    solved by Gaussian elimination with partial pivoting in Python floats. Meant for the handful of
    small fits (k <= 13) that define data pools, not for hot loops.
    """
    y = np.asarray(y, dtype=float)
    regressors = np.asarray(regressors, dtype=float)
    k = regressors.shape[1]
    columns = [regressors[:, j] for j in range(k)]
    gram = [[math.fsum(columns[i] * columns[j]) for j in range(k)] for i in range(k)]
    rhs = [math.fsum(columns[i] * y) for i in range(k)]
    for pivot in range(k):
        best = max(range(pivot, k), key=lambda row: abs(gram[row][pivot]))
        if gram[best][pivot] == 0.0:
            raise np.linalg.LinAlgError("singular design in exact_ols")
        gram[pivot], gram[best] = gram[best], gram[pivot]
        rhs[pivot], rhs[best] = rhs[best], rhs[pivot]
        for row in range(pivot + 1, k):
            factor = gram[row][pivot] / gram[pivot][pivot]
            for col in range(pivot, k):
                gram[row][col] -= factor * gram[pivot][col]
            rhs[row] -= factor * rhs[pivot]
    coef = [0.0] * k
    for row in reversed(range(k)):
        acc = rhs[row] - math.fsum(gram[row][col] * coef[col] for col in range(row + 1, k))
        coef[row] = acc / gram[row][row]
    return np.asarray(coef)


def standardise(values: np.ndarray) -> np.ndarray:
    """Return ``(v - mean) / sd`` with the population s.d. (divisor T), using exactly rounded sums."""
    values = np.asarray(values, dtype=float)
    mean = math.fsum(values) / values.size
    centred = values - mean
    sd = math.sqrt(math.fsum(centred * centred) / values.size)
    return centred / sd


def ar1_residuals(returns: np.ndarray) -> np.ndarray:
    """Residuals of the OLS fit ``r[t] = c + a r[t-1] + e[t]`` (T - 1 values)."""
    returns = np.asarray(returns, dtype=float)
    design = np.column_stack([np.ones(returns.size - 1), returns[:-1]])
    coef = exact_ols(returns[1:], design)
    return returns[1:] - (coef[0] + coef[1] * returns[:-1])


def own_lag_residuals(returns: np.ndarray, lags: int = 12) -> np.ndarray:
    """Residuals of the OLS fit of r[t] on a constant and r[t-1..t-lags] (T - lags values)."""
    returns = np.asarray(returns, dtype=float)
    n = returns.size
    design = np.column_stack(
        [np.ones(n - lags)] + [returns[lags - j : n - j] for j in range(1, lags + 1)]
    )
    coef = exact_ols(returns[lags:], design)
    fitted = design[:, 0] * coef[0]
    for j in range(1, lags + 1):
        fitted = fitted + design[:, j] * coef[j]
    return returns[lags:] - fitted


@dataclass(frozen=True)
class ShockPool:
    """A finite pool of standardised return shocks (mean 0, population variance 1).

    Attributes
    ----------
    values : ndarray
        The standardised AR(1) residuals.
    sha256 : str
        SHA-256 of ``values`` as little-endian float64 bytes (recorded in every world's metadata).
    source : str
        Where the factor came from, and its months.
    source_sha256 : str
        SHA-256 of the source data file.
    """

    values: np.ndarray
    sha256: str
    source: str
    source_sha256: str

    @property
    def size(self) -> int:
        """Number of distinct shocks in the pool."""
        return int(self.values.size)


def pool_from_factor(series: FactorSeries) -> ShockPool:
    """Build the shock pool from a factor: standardised residuals of its AR(1) fit (SPEC 1.2)."""
    values = standardise(ar1_residuals(series.returns))
    values.setflags(write=False)
    span = f"{series.months[0]}..{series.months[-1]}"
    return ShockPool(
        values=values,
        sha256=sha256_array(values),
        source=f"{series.name} {span} ({series.source})",
        source_sha256=series.sha256,
    )


@functools.lru_cache(maxsize=1)
def default_pool() -> ShockPool:
    """The embedded default pool: HML from linearmodels, 1963-07 .. 2017-03 (644 shocks)."""
    return pool_from_factor(embedded_hml())

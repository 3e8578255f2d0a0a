"""Shock pools and residualised real returns, computed the same to the last bit on every machine.

The bootstrap worlds resample a **finite pool** of standardised AR(1) residuals of the monthly HML
factor; injected worlds use a factor residualised on 12 of its own lags. Both come from small OLS
fits. BLAS/LAPACK results may differ in the last bits across CPUs, which would change world bytes,
so these fits use exactly rounded sums (:func:`math.fsum`) and a pure-Python solve instead.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from planted.hashing import sha256_array
from planted.worlds.data import EMBEDDED_START, FactorSeries, embedded_hml


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


POOL_SOURCES = ("embedded", "ff5")
"""Where a study's shock pool comes from: the embedded linearmodels HML series, or HML of a 5-factor file."""


@dataclass(frozen=True)
class PoolChoice:
    """The shock pool of a study or a simulation (a study-level choice, recorded in its manifest).

    Attributes
    ----------
    source : {"embedded", "ff5"}
        ``embedded``: HML from ``linearmodels.datasets.french``, 1963-07 .. 2017-03 (644 residuals;
        the default). ``ff5``: the HML column of a Fama-French 5-factor file, from 1963-07 (the
        paper's pool: 758 residuals through 2026-08).
    end : str or None
        Last month used (``"YYYY-MM"``): ``ff5`` with ``end="2026-08"`` reproduces the paper's vintage
        from a later file.
    """

    source: str = "embedded"
    end: str | None = None

    def __post_init__(self) -> None:
        if self.source not in POOL_SOURCES:
            raise ValueError(f"unknown shock pool {self.source!r}; choose from {', '.join(POOL_SOURCES)}")
        if self.end is not None and not re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", self.end):
            raise ValueError(f"pool end {self.end!r} is not a month written YYYY-MM")

    @property
    def is_default(self) -> bool:
        """Whether this is the embedded pool over its whole span."""
        return self.source == "embedded" and self.end is None

    def load(self, factor_file: str | Path | None) -> ShockPool:
        """The pool (``factor_file`` is the 5-factor CSV, needed for ``ff5``).

        Raises
        ------
        FactorDataError
            ``ff5`` without a file (the message says to pass ``--path``).
        """
        return _load_pool(self.source, self.end, None if factor_file is None else str(factor_file))

    def to_dict(self) -> dict[str, str | None]:
        """JSON-ready form (stored in configurations and manifests)."""
        return {"source": self.source, "end": self.end}


@functools.lru_cache(maxsize=8)
def _load_pool(source: str, end: str | None, factor_file: str | None) -> ShockPool:
    from planted.worlds.data import FactorDataError, ff5_factor

    if source == "embedded":
        series = embedded_hml()
    else:
        if factor_file is None:
            raise FactorDataError(
                "the shock pool is HML of a Fama-French 5-factor file: pass --path F-F_Research_Data_5_Factors_2x3.csv "
                "(`planted data fetch` downloads it)"
            )
        series = ff5_factor("HML", factor_file).since(EMBEDDED_START)
    return pool_from_factor(series.until(end) if end else series)


def repeated_value_share(pool: ShockPool, *, worlds: int = 200, seed: int = 0) -> float:
    """Median share of a null world's 1,060 visible returns that repeat an earlier return of that world.

    Linear R2 = 0 bootstrap worlds (whose returns are the mean plus scaled pool shocks) built from
    ``pool`` with seeds ``SeedSequence(seed, spawn_key=(3, j))``: the finite pool's repeated-value
    artifact (the paper's section 5.1: 46% with its 758-residual pool).
    """
    from planted.worlds.spec import WorldSpec
    from planted.worlds.world import build_batch

    seeds = [np.random.SeedSequence(seed, spawn_key=(3, j)) for j in range(worlds)]
    batch = build_batch(WorldSpec(family="linear", r2=0.0, phi=0.95, rho=-0.8, shocks="bootstrap"), seeds, pool=pool)
    shares = []
    for returns in batch.returns:
        _, first = np.unique(returns, return_index=True)
        shares.append(1.0 - first.size / returns.size)
    return float(np.median(shares))

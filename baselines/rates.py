"""Claim rates from stored decision p-values: Wilson intervals, size matching, frontiers, bootstrap CIs.

Nothing here re-simulates: every function works on the decision p-values that the procedures
stored per world (SPEC 3.3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats


@dataclass(frozen=True)
class Rate:
    """A claim rate with its Wilson score interval."""

    claims: int
    n: int
    low: float
    high: float

    @property
    def rate(self) -> float:
        """Share of claims (NaN for an empty sample)."""
        return self.claims / self.n if self.n else float("nan")

    def __str__(self) -> str:
        return f"{self.rate:.1%} [{self.low:.1%}, {self.high:.1%}] (n={self.n})"


def wilson_interval(claims: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson (1927) score interval for a binomial proportion.

    Notes
    -----
    ``(p + z^2/2n -/+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)`` with ``z`` the two-sided normal
    quantile; equals ``statsmodels.stats.proportion.proportion_confint(method="wilson")``.
    Returns (NaN, NaN) for n = 0.

    References
    ----------
    Wilson, E. B. (1927). Probable inference, the law of succession, and statistical inference.
    JASA 22(158), 209-212. doi:10.1080/01621459.1927.10502953
    """
    if n == 0:
        return float("nan"), float("nan")
    z = stats.norm.isf((1.0 - level) / 2.0)
    p = claims / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def share_of_claims(claims: np.ndarray, level: float = 0.95) -> Rate:
    """The claim-rate primitive: the share of ``True`` in ``claims`` with its Wilson interval.

    Every claim rate planted prints (the ``planted run`` summary, the Monte Carlo summaries, every
    table of the report) is this function's, on the sample its output names.
    """
    x = np.asarray(claims, dtype=bool)
    k = int(x.sum())
    low, high = wilson_interval(k, int(x.size), level)
    return Rate(claims=k, n=int(x.size), low=low, high=high)


def claim_rate(decision_p: np.ndarray, alpha: float = 0.05, level: float = 0.95) -> Rate:
    """Claim rate (share of ``decision_p <= alpha``) with its Wilson interval; NaN p-values are errors."""
    p = np.asarray(decision_p, dtype=float)
    if np.isnan(p).any():
        raise ValueError("decision p-values contain NaN; drop not-evaluable worlds explicitly first")
    return share_of_claims(p <= alpha, level)


def matched_alpha(null_p: np.ndarray, target_rate: float) -> float:
    """Level alpha* at which a procedure claims in share ``target_rate`` of null worlds.

    Notes
    -----
    alpha* is the ``ceil(c N)``-th smallest null decision p-value (c = ``target_rate``), so the
    procedure claims (``p <= alpha*``) in at least ``c`` of the N null worlds and in the fewest
    worlds that achieve it. ``c = 0`` gives alpha* = 0.
    """
    p = np.sort(np.asarray(null_p, dtype=float))
    if not 0.0 <= target_rate <= 1.0:
        raise ValueError(f"target rate must lie in [0, 1], got {target_rate}")
    k = math.ceil(target_rate * p.size - 1e-12)
    return 0.0 if k == 0 else float(p[k - 1])


def frontier(null_p: np.ndarray, signal_p: np.ndarray, alphas: np.ndarray | None = None) -> pd.DataFrame:
    """Size-power frontier: claim rate in signal worlds against claim rate in null worlds over alpha.

    Parameters
    ----------
    null_p, signal_p : ndarray
        Decision p-values in null worlds and in signal worlds (e.g. R2 = 1%).
    alphas : ndarray, optional
        Levels to evaluate; by default every distinct p-value of either sample plus 0 and 1.
    """
    null_p = np.sort(np.asarray(null_p, dtype=float))
    signal_p = np.sort(np.asarray(signal_p, dtype=float))
    if alphas is None:
        alphas = np.unique(np.concatenate([[0.0, 1.0], null_p, signal_p]))
    return pd.DataFrame(
        {
            "alpha": alphas,
            "null_rate": np.searchsorted(null_p, alphas, side="right") / null_p.size,
            "signal_rate": np.searchsorted(signal_p, alphas, side="right") / signal_p.size,
        }
    )


@dataclass(frozen=True)
class MatchedDifference:
    """Agent's claim rate minus a size-matched baseline's, with a bootstrap percentile interval."""

    agent_rate: float
    null_rate: float
    alpha: float
    baseline_rate: float
    difference: float
    low: float
    high: float
    n_boot: int


def matched_difference(
    agent_null_claims: np.ndarray,
    agent_signal_claims: np.ndarray,
    baseline_null_p: np.ndarray,
    baseline_signal_p: np.ndarray,
    *,
    rng: np.random.Generator,
    n_boot: int = 2000,
    level: float = 0.95,
) -> MatchedDifference:
    """Agent minus size-matched baseline claim rate at one signal level, with a bootstrap CI (SPEC 3.3).

    The agent's false-positive rate c in its null worlds sets alpha* on the baseline's simulated
    null p-values; the baseline's matched rate is its claim rate at alpha* in simulated signal
    worlds. The interval resamples the agent's null and signal worlds with replacement and
    re-derives c and alpha* in every draw (the simulated baseline p-values stay fixed: their
    sampling error is small next to the agent's). Percentile interval.

    Notes
    -----
    Each draw is computed in closed form: resampling n null worlds with replacement gives k*
    claims with ``k* ~ Binomial(n, k/n)``, and alpha* and the baseline's matched rate depend on the
    draw only through k*, so they are tabulated once for k* = 0..n; the agent's signal rate in a
    draw is ``Binomial(m, s) / m``. The draws have exactly the distribution of a loop over resampled
    worlds (tested against such a loop), at a cost independent of the number of simulated worlds.
    Empty samples give NaN.
    """
    null = np.asarray(agent_null_claims, dtype=bool)
    signal = np.asarray(agent_signal_claims, dtype=bool)
    base_null = np.asarray(baseline_null_p, dtype=float)
    base_signal = np.sort(np.asarray(baseline_signal_p, dtype=float))
    n, m = null.size, signal.size
    if n == 0 or m == 0 or base_null.size == 0 or base_signal.size == 0:
        nan = float("nan")
        return MatchedDifference(nan, nan, nan, nan, nan, nan, nan, 0)
    alphas = np.array([matched_alpha(base_null, k / n) for k in range(n + 1)])
    base_rates = np.searchsorted(base_signal, alphas, side="right") / base_signal.size
    k = int(null.sum())
    point_base = float(base_rates[k])
    draws = rng.binomial(m, signal.mean(), size=n_boot) / m - base_rates[rng.binomial(n, k / n, size=n_boot)]
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(draws, [tail, 1.0 - tail])
    return MatchedDifference(
        agent_rate=float(signal.mean()), null_rate=float(null.mean()), alpha=float(alphas[k]),
        baseline_rate=point_base, difference=float(signal.mean()) - point_base, low=float(low), high=float(high),
        n_boot=n_boot,
    )

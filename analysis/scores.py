"""Scores of stated probabilities against binary labels: Brier score and skill, the Murphy
decomposition with its two within-bin terms, ECE (with a world-clustered bootstrap interval) and AUC.

Conventions (shared with :mod:`planted.analysis.calibration`): ten equal-width bins on [0, 1],
bin k holds ``k/10 <= p < (k+1)/10`` and p = 1 falls in the last bin (the bins of Figure 2).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from planted._typing import Float64Array
from planted.analysis.results import Estimate
from planted.analysis.summary_records import MurphyDecomposition

N_BINS = 10
"""Equal-width bins of the ECE, the Murphy decomposition and Figure 2."""



def checked_pair(probabilities: np.ndarray, labels: np.ndarray) -> tuple[Float64Array, Float64Array]:
    """Probabilities and labels as float arrays; ValueError for unequal shapes, NaN or a probability outside [0, 1]."""
    p = np.asarray(probabilities, dtype=float)
    y = np.asarray(labels, dtype=float)
    if p.shape != y.shape or p.ndim != 1:
        raise ValueError(f"probabilities and labels must be 1-d of equal length, got {p.shape} and {y.shape}")
    if np.isnan(p).any() or np.isnan(y).any():
        raise ValueError("probabilities or labels contain NaN; drop those runs first")
    if ((p < 0) | (p > 1)).any():
        raise ValueError("probabilities must lie in [0, 1]")
    return p, y


def brier_score(probabilities: np.ndarray, labels: np.ndarray) -> float:
    """Brier (1950) score ``mean((p - y)^2)`` (sklearn ``brier_score_loss``).

    References
    ----------
    Brier, G. W. (1950). Verification of forecasts expressed in terms of probability. Monthly
    Weather Review 78(1), 1-3. doi:10.1175/1520-0493(1950)078<0001:VOFEIT>2.0.CO;2
    """
    p, y = checked_pair(probabilities, labels)
    return float(np.mean((p - y) ** 2))


def brier_skill(probabilities: np.ndarray, labels: np.ndarray) -> float:
    """Brier skill score against climatology: ``1 - BS / (ybar (1 - ybar))``.

    Notes
    -----
    The reference forecast is the sample base rate ``ybar`` of the same runs (in-sample
    climatology, whose Brier score is the Murphy uncertainty term); NaN when all labels agree.
    """
    p, y = checked_pair(probabilities, labels)
    ref = float(y.mean() * (1.0 - y.mean()))
    return 1.0 - brier_score(p, y) / ref if ref > 0 else float("nan")


def bin_index(probabilities: np.ndarray, n_bins: int = N_BINS) -> np.ndarray:
    """Equal-width bin of each probability: ``floor(p n_bins)``, with p = 1 in the last bin.

    The product is rounded to 9 decimals first, so a stated 0.3 lands in bin 3 despite
    floating-point representation.
    """
    p = np.asarray(probabilities, dtype=float)
    return np.minimum(np.floor(np.round(p * n_bins, 9)).astype(int), n_bins - 1)


def murphy_decomposition(
    probabilities: np.ndarray, labels: np.ndarray, *, n_bins: int | None = N_BINS
) -> MurphyDecomposition:
    """Murphy decomposition of the Brier score, over equal-width bins or distinct forecast values.

    Parameters
    ----------
    probabilities, labels : ndarray, shape (n,)
    n_bins : int or None
        Number of equal-width bins on [0, 1] (default 10, the bins of the ECE and of Figure 2);
        None groups runs by their distinct stated value.

    Returns
    -------
    MurphyDecomposition
        With groups k of size n_k, mean forecast ``pbar_k``, outcome rate ``obar_k`` and base rate
        ``obar``: ``REL = sum n_k (pbar_k - obar_k)^2 / n``, ``RES = sum n_k (obar_k - obar)^2 / n``,
        ``UNC = obar (1 - obar)``, ``WBV = sum_k sum_{i in k} (p_i - pbar_k)^2 / n`` and
        ``WBC = sum_k sum_{i in k} (p_i - pbar_k)(y_i - obar_k) / n``.
        ``BS = REL - RES + UNC + WBV - 2 WBC`` exactly; over distinct values WBV = WBC = 0 and
        Murphy's identity ``BS = REL - RES + UNC`` holds.

    References
    ----------
    Murphy, A. H. (1973). A new vector partition of the probability score. Journal of Applied
    Meteorology 12(4), 595-600. doi:10.1175/1520-0450(1973)012<0595:ANVPOT>2.0.CO;2
    Stephenson, D. B., Coelho, C. A. S. and Jolliffe, I. T. (2008). Two extra components in the
    Brier score decomposition. Weather and Forecasting 23(4), 752-757. doi:10.1175/2007WAF2006116.1
    """
    p, y = checked_pair(probabilities, labels)
    n = p.size
    if n_bins is None:
        _, group = np.unique(p, return_inverse=True)
    else:
        group = bin_index(p, n_bins)
    size = np.bincount(group).astype(float)
    used = size > 0
    pbar = np.bincount(group, weights=p)[used] / size[used]
    obar_k = np.bincount(group, weights=y)[used] / size[used]
    size = size[used]
    remap = np.cumsum(used) - 1
    g = remap[group]
    obar = float(y.mean())
    return MurphyDecomposition(
        brier=float(np.mean((p - y) ** 2)),
        reliability=float(np.sum(size * (pbar - obar_k) ** 2) / n),
        resolution=float(np.sum(size * (obar_k - obar) ** 2) / n),
        uncertainty=obar * (1.0 - obar),
        within_variance=float(np.sum((p - pbar[g]) ** 2) / n),
        within_covariance=float(np.sum((p - pbar[g]) * (y - obar_k[g])) / n),
        n=n,
        n_bins=n_bins,
    )


def expected_calibration_error(probabilities: np.ndarray, labels: np.ndarray, *, n_bins: int = N_BINS) -> float:
    """ECE: ``sum_k (n_k / n) |pbar_k - obar_k|`` over equal-width bins (Naeini et al. 2015).

    References
    ----------
    Naeini, M. P., Cooper, G. F. and Hauskrecht, M. (2015). Obtaining well calibrated probabilities
    using Bayesian binning. Proceedings of AAAI 29(1), 2901-2907. doi:10.1609/aaai.v29i1.9602
    """
    p, y = checked_pair(probabilities, labels)
    b = bin_index(p, n_bins)
    gap = np.bincount(b, weights=p, minlength=n_bins) - np.bincount(b, weights=y, minlength=n_bins)
    return float(np.abs(gap).sum() / p.size)


def ece_bootstrap(
    probabilities: np.ndarray,
    labels: np.ndarray,
    worlds: np.ndarray,
    *,
    rng: np.random.Generator,
    n_boot: int = 2000,
    n_bins: int = N_BINS,
    level: float = 0.95,
) -> Estimate:
    """ECE with a world-clustered percentile bootstrap interval.

    Parameters
    ----------
    probabilities, labels : ndarray, shape (n,)
    worlds : ndarray, shape (n,)
        World of each run; a draw resamples worlds with replacement and keeps all runs of each
        drawn world (runs of one world share the label and the data, so they are not independent).
    rng : numpy.random.Generator
    n_boot : int
    n_bins : int
    level : float

    Returns
    -------
    Estimate
        The ECE of the sample and the ``(1-level)/2``, ``(1+level)/2`` quantiles of the draws.

    Notes
    -----
    Per world and bin the run count, sum of p and sum of y are tabulated once; a draw is a vector of
    multinomial world counts (equivalent to drawing G worlds with replacement), and its ECE is
    ``sum_k |sum p - sum y|_k / n``.
    """
    p, y = checked_pair(probabilities, labels)
    _, world = np.unique(np.asarray(worlds), return_inverse=True)
    n_worlds = int(world.max()) + 1
    b = bin_index(p, n_bins)
    cell = world * n_bins + b
    gap = np.bincount(cell, weights=p - y, minlength=n_worlds * n_bins).reshape(n_worlds, n_bins)
    count = np.bincount(world, minlength=n_worlds).astype(float)
    weights = rng.multinomial(n_worlds, np.full(n_worlds, 1.0 / n_worlds), size=n_boot).astype(float)
    draws = np.abs(weights @ gap).sum(axis=1) / (weights @ count)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(draws, [tail, 1.0 - tail])
    return Estimate(
        name="ECE", value=expected_calibration_error(p, y, n_bins=n_bins), low=float(low), high=float(high),
        level=level, n=int(p.size), n_clusters=n_worlds, n_boot=n_boot,
        method=f"{n_bins} equal-width bins; percentile bootstrap over worlds",
    )


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve as the Mann-Whitney probability ``P(s+ > s-) + P(s+ = s-)/2``.

    Ties get mid-ranks (sklearn ``roc_auc_score``); NaN when only one class is present.

    References
    ----------
    Hanley, J. A. and McNeil, B. J. (1982). The meaning and use of the area under a receiver
    operating characteristic (ROC) curve. Radiology 143(1), 29-36. doi:10.1148/radiology.143.1.7063747
    """
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=bool)
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = stats.rankdata(s)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))

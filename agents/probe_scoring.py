"""The memorization probe's months and scores: which months are asked, the no-knowledge guess, and
how the answers are scored against the published returns (paper section 6, Table 5).

:func:`draw_months` draws the months before and after a model's knowledge cutoff;
:func:`no_knowledge_guess` is the trailing 12-month mean a model without memory could give;
:func:`score_answers` scores one period's answers (share answered, sign agreement, errors against
the guess, Spearman correlation), each share with its Wilson 95% interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from planted.baselines.rates import wilson_interval

MIN_HISTORY = 12
"""Months of history a drawn month needs (the no-knowledge guess is their mean)."""


def draw_months(months: pd.PeriodIndex, *, cutoff: pd.Period, n_before: int, n_after: int | None = None,
                rng: np.random.Generator, min_history: int = MIN_HISTORY) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the months asked about, before and after the knowledge cutoff.

    Parameters
    ----------
    months : pandas.PeriodIndex
        The monthly index of the factor series.
    cutoff : pandas.Period
        The model's knowledge cutoff month.
    n_before : int
        Months drawn without replacement among those before the cutoff.
    n_after : int, optional
        Months drawn among those after the cutoff; ``None`` takes them all.
    rng : numpy.random.Generator
    min_history : int
        Earlier months in the series a drawn month needs (for the no-knowledge guess).

    Returns
    -------
    before, after : ndarray of int
        Positions into ``months``, each in calendar order.

    Notes
    -----
    "Before" is strictly earlier than the cutoff month and "after" strictly later; the cutoff
    month itself is asked in neither (its return was published after the cutoff, but the model
    may have seen the month's news).
    """
    position = np.arange(len(months))
    eligible = position >= min_history
    before = position[eligible & (months < cutoff)]
    after = position[eligible & (months > cutoff)]
    if n_before > before.size:
        raise ValueError(f"only {before.size} months before the cutoff {cutoff} (with {min_history} months of "
                         f"history), fewer than the {n_before} asked for")
    drawn_before = np.sort(rng.choice(before, size=n_before, replace=False))
    drawn_after = after if n_after is None or n_after >= after.size else np.sort(
        rng.choice(after, size=n_after, replace=False))
    return drawn_before.astype(np.int64), np.asarray(drawn_after, dtype=np.int64)


def no_knowledge_guess(returns: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The historical mean of ``returns`` over all months before each position (same units)."""
    sums = np.concatenate([[0.0], np.cumsum(returns)])
    positions = np.asarray(positions, dtype=np.int64)
    if np.any(positions < 1):
        raise ValueError("the no-knowledge guess needs at least one earlier month")
    return sums[positions] / positions


@dataclass(frozen=True)
class PeriodScore:
    """The scores of one period (before or after the cutoff), as in Table 5 panel A.

    Attributes
    ----------
    period : str
    asked, answered : int
        Months asked about and months answered with a number.
    answered_low, answered_high : float
        Wilson 95% interval of the answered share.
    spearman, spearman_pvalue : float
        Spearman rank correlation between answers and published returns over the answered months
        (two-sided p-value, :func:`scipy.stats.spearmanr`); NaN with fewer than three answers or
        when either side is constant.
    correct_sign : int
        Answered months whose answer has the published return's sign (``numpy.sign`` equal; a
        zero matches only a zero).
    sign_low, sign_high : float
        Wilson 95% interval of the correct-sign share among the answered months.
    mae, mae_guess : float
        Mean absolute error (percentage points) of the answers and of the no-knowledge guess,
        both over the answered months; NaN without answers.
    """

    period: str
    asked: int
    answered: int
    answered_low: float
    answered_high: float
    spearman: float
    spearman_pvalue: float
    correct_sign: int
    sign_low: float
    sign_high: float
    mae: float
    mae_guess: float

    @property
    def answered_share(self) -> float:
        """Answered months over months asked (NaN when none were asked)."""
        return self.answered / self.asked if self.asked else float("nan")

    @property
    def correct_sign_share(self) -> float:
        """Correct-sign months over answered months (NaN without answers)."""
        return self.correct_sign / self.answered if self.answered else float("nan")


def score_answers(truth_pct: np.ndarray, answer_pct: np.ndarray, guess_pct: np.ndarray, *,
                  period: str = "") -> PeriodScore:
    """Score one period's answers against the published returns.

    Parameters
    ----------
    truth_pct : ndarray
        Published returns of the months asked about, in percent.
    answer_pct : ndarray
        The model's answers in percent; NaN where it gave none.
    guess_pct : ndarray
        The no-knowledge guess of each month (historical mean up to the month before), in percent.
    period : str
        Label carried into the result.

    Returns
    -------
    PeriodScore

    Notes
    -----
    Shares carry Wilson (1927) 95% score intervals (:func:`planted.baselines.rates.wilson_interval`).
    """
    truth = np.asarray(truth_pct, dtype=float)
    answer = np.asarray(answer_pct, dtype=float)
    guess = np.asarray(guess_pct, dtype=float)
    if not truth.shape == answer.shape == guess.shape or truth.ndim != 1:
        raise ValueError("truth, answers and guesses must be one-dimensional arrays of one length")
    if np.isnan(truth).any() or np.isnan(guess).any():
        raise ValueError("published returns and guesses must not be NaN")
    mask = ~np.isnan(answer)
    k = int(mask.sum())
    t, a, g = truth[mask], answer[mask], guess[mask]
    rho = pvalue = float("nan")
    if k >= 3 and np.ptp(t) > 0 and np.ptp(a) > 0:
        result = stats.spearmanr(a, t)
        rho, pvalue = float(result.statistic), float(result.pvalue)
    correct = int((np.sign(a) == np.sign(t)).sum())
    mae = float(np.mean(np.abs(a - t))) if k else float("nan")
    mae_guess = float(np.mean(np.abs(g - t))) if k else float("nan")
    answered_low, answered_high = wilson_interval(k, truth.size)
    sign_low, sign_high = wilson_interval(correct, k)
    return PeriodScore(period, int(truth.size), k, answered_low, answered_high, rho, pvalue, correct,
                       sign_low, sign_high, mae, mae_guess)

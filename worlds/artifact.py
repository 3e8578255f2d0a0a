"""Measures of the repeated-value artifact of bootstrap worlds (SPEC 1.2).

Resampling a finite pool makes return values repeat exactly, and within a bootstrap block the value
after a repeated value repeats too. The artifact is a documented feature of these worlds; these
functions measure it so that every world's metadata states how strong it is.
"""

from __future__ import annotations

import numpy as np


def repeated_share(values: np.ndarray) -> float:
    """Share of entries that equal (bit for bit) an earlier entry of the same 1-D series.

    Parameters
    ----------
    values : ndarray, shape (T,)

    Returns
    -------
    float
        ``#{t : values[t] == values[s] for some s < t} / T``; 0 for a continuous series.
    """
    values = np.asarray(values)
    if values.size == 0:
        return 0.0
    _, first = np.unique(values, return_index=True)
    return float(1.0 - first.size / values.size)


def repeated_follower_share(values: np.ndarray) -> float:
    """Share of t whose pair (values[t-1], values[t]) occurred earlier: the lookup-exploitable share.

    A forecaster that finds the last occurrence of the current value and predicts its successor is
    exactly right on these months.
    """
    values = np.asarray(values)
    if values.size < 2:
        return 0.0
    pairs = np.stack([values[:-1], values[1:]], axis=1)
    _, first = np.unique(pairs, axis=0, return_index=True)
    return float(1.0 - first.size / pairs.shape[0])

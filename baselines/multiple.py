"""Multiple-testing adjustments, vectorised over leading axes."""

from __future__ import annotations

import numpy as np

from planted._typing import Float64Array


def holm(pvalues: Float64Array) -> Float64Array:
    """Holm (1979) step-down adjusted p-values along the last axis.

    Parameters
    ----------
    pvalues : ndarray, shape (..., m)

    Returns
    -------
    ndarray, shape (..., m)
        ``p_adj[(i)] = max_{j <= i} min(1, (m - j + 1) p_(j))`` in the order of the sorted p-values,
        returned in the input order; rejecting where ``p_adj <= alpha`` is Holm's procedure at level
        alpha (``statsmodels.stats.multitest.multipletests(method="holm")``).

    References
    ----------
    Holm, S. (1979). A simple sequentially rejective multiple test procedure. Scandinavian Journal
    of Statistics 6(2), 65-70.
    """
    p = np.asarray(pvalues, dtype=float)
    m = p.shape[-1]
    order = np.argsort(p, axis=-1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=-1)
    adjusted = np.minimum(1.0, np.maximum.accumulate(ranked * (m - np.arange(m)), axis=-1))
    out = np.empty_like(adjusted)
    np.put_along_axis(out, order, adjusted, axis=-1)
    return out

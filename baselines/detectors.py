"""Detectors of the world audit: forecasters that use structure a linear test on the candidates misses.

Each detector maps a :class:`~planted.baselines.panel.Panel` to forecasts of every target month of a
window, using for a target month ``m`` only what is known at the end of month ``m - 1`` (returns
``r[0..m-1]`` and candidates ``x[0..m-1]``); where it has nothing to go on it forecasts the
benchmark (the expanding historical mean), so a detector never claims by abstaining. The audit
(:mod:`planted.baselines.audit`) decides each like the pre-specified baselines, by the one-sided
Clark-West test against the benchmark, on the pseudo-out-of-sample window (second half of training)
and on the sealed test window.

* ``lookup_exact_k``: the last k returns matched exactly (bit for bit) against every earlier
  k-tuple of the world's history; the forecast is the mean of what followed the matches. Finite
  shock pools make returns repeat (SPEC 1.2), which this exploits.
* ``lookup_nearest_k``: the same with the nearest earlier k-tuple (Euclidean; every tuple at the
  minimal distance counts).
* ``knn_lags`` / ``knn_candidates``: k-nearest-neighbour regression (k = 10, uniform weights,
  Euclidean) of the next return on the last 12 returns, or on the nine candidates standardised by
  their training means and standard deviations; the training pairs are those whose target is
  before the fit month, refit every :data:`REFIT_EVERY` months.
* ``lightgbm``: gradient-boosted trees with small fixed hyper-parameters (:data:`LGBM_PARAMS`) on
  the last 12 returns and the candidates, refit every :data:`TREE_REFIT_EVERY` months.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from planted._typing import Float64Array
from planted.baselines.forecasts import expanding_mean_forecasts
from planted.baselines.panel import PROCEDURE_STREAM, Panel
from planted.seeding import generator

REFIT_EVERY = 12
"""Months between refits of the neighbour regressions (the test window's refit interval)."""
TREE_REFIT_EVERY = 60
"""Months between refits of the boosted trees (five years: their fit dominates the audit's cost)."""
N_LAGS = 12
N_NEIGHBOURS = 10
LGBM_PARAMS: dict[str, Any] = {"n_estimators": 60, "learning_rate": 0.05, "num_leaves": 7, "min_child_samples": 20,
               "subsample": 1.0, "colsample_bytree": 1.0, "reg_lambda": 1.0, "n_jobs": 1, "deterministic": True,
               "force_row_wise": True, "verbose": -1}
"""Small, fixed hyper-parameters: a flexible but not tuned learner (tuning on the audit worlds would
itself be a search)."""
AUDIT_STREAM = 1
"""Sub-stream (below :data:`~planted.baselines.panel.PROCEDURE_STREAM`) of a world's seed for the trees."""


@dataclass(frozen=True)
class Window:
    """Target months ``[first, last)`` of one evaluation window."""

    first: int
    last: int


def lookup_exact(returns: Float64Array, k: int, window: Window) -> Float64Array:
    """Forecasts of one world's returns by exact matches of the last ``k`` returns (benchmark if none).

    For target month m the key is ``r[m-k..m-1]``; every earlier position j (``j + k <= m - 1``) whose
    ``r[j..j+k-1]`` equals the key bit for bit contributes its successor ``r[j+k]``.
    """
    r = np.asarray(returns, dtype=float)
    out = np.full(r.shape, np.nan)
    bench = expanding_mean_forecasts(r, 1, r.size)
    sums: dict[bytes, float] = {}
    counts: dict[bytes, int] = {}
    for m in range(k, window.last):
        if m - 1 >= k:  # the tuple ending at m - 2 and its successor r[m-1] are now history
            key = r[m - 1 - k : m - 1].tobytes()
            sums[key] = sums.get(key, 0.0) + r[m - 1]
            counts[key] = counts.get(key, 0) + 1
        if m >= window.first:
            key = r[m - k : m].tobytes()
            out[m] = sums[key] / counts[key] if key in counts else bench[m]
    out[window.first : max(window.first, k)] = bench[window.first : max(window.first, k)]
    return out


def lookup_nearest(returns: Float64Array, k: int, window: Window) -> Float64Array:
    """Forecasts by the successors of the nearest earlier ``k``-tuples of returns (benchmark if none)."""
    r = np.asarray(returns, dtype=float)
    out = np.full(r.shape, np.nan)
    bench = expanding_mean_forecasts(r, 1, r.size)
    tuples = np.lib.stride_tricks.sliding_window_view(r, k)  # tuples[j] = r[j..j+k-1], successor r[j+k]
    for m in range(window.first, window.last):
        n_past = m - k  # tuples j = 0 .. m-k-1 have their successor r[j+k] <= r[m-1]
        if n_past < 1:
            out[m] = bench[m]
            continue
        distance = ((tuples[:n_past] - r[m - k : m]) ** 2).sum(axis=1)
        nearest = np.flatnonzero(distance == distance.min())
        out[m] = r[nearest + k].mean()
    return out


def _lag_features(returns: Float64Array) -> Float64Array:
    """Row t: ``r[t-11..t]`` (NaN for t < 11), the information for target t + 1."""
    lags = np.full((returns.size, N_LAGS), np.nan)
    for lag in range(N_LAGS):
        lags[lag:, lag] = returns[: returns.size - lag]
    return lags


def knn_predict(train_x: Float64Array, train_y: Float64Array, query: Float64Array, n_neighbors: int) -> Float64Array:
    """Uniform k-nearest-neighbour regression (Euclidean; ties broken by training order)."""
    distance = ((query[:, None, :] - train_x[None, :, :]) ** 2).sum(axis=2)
    k = min(n_neighbors, train_x.shape[0])
    nearest = np.argsort(distance, axis=1, kind="stable")[:, :k]
    return train_y[nearest].mean(axis=1)


def _refit_forecasts(features: Float64Array, returns: Float64Array, window: Window, refit_every: int,
                     predict: Callable[[Float64Array, Float64Array, Float64Array], Float64Array],
                     standardise: bool) -> Float64Array:
    """Forecasts of ``window`` from ``features[t] -> r[t+1]``, refit every ``refit_every`` months."""
    out = np.full(returns.shape, np.nan)
    bench = expanding_mean_forecasts(returns, 1, returns.size)
    starts = list(range(window.first, window.last, refit_every))  # a fit uses returns up to start - 1
    for start, stop in zip(starts, [*starts[1:], window.last]):
        rows = np.arange(0, start - 1)  # pairs (features[t], r[t+1]) with t + 1 < start
        usable = rows[np.isfinite(features[rows]).all(axis=1)]
        targets = np.arange(start, stop)
        query = features[targets - 1]
        if usable.size < N_NEIGHBOURS or not np.isfinite(query).all():
            out[targets] = bench[targets]
            continue
        x, y = features[usable], returns[usable + 1]
        if standardise:
            centre, scale = x.mean(axis=0), x.std(axis=0)
            scale[scale == 0] = 1.0
            x, query = (x - centre) / scale, (query - centre) / scale
        out[targets] = predict(x, y, query)
    return out


def knn_lags(panel: Panel, window: Window) -> Float64Array:
    """(n, T) kNN forecasts on the last 12 returns."""
    def predict(x: Float64Array, y: Float64Array, q: Float64Array) -> Float64Array:
        return knn_predict(x, y, q, N_NEIGHBOURS)

    return np.stack([_refit_forecasts(_lag_features(r), r, window, REFIT_EVERY, predict, standardise=False)
                     for r in panel.returns])


def knn_candidates(panel: Panel, window: Window) -> Float64Array:
    """(n, T) kNN forecasts on the nine candidates (standardised on the training pairs of each fit)."""
    def predict(x: Float64Array, y: Float64Array, q: Float64Array) -> Float64Array:
        return knn_predict(x, y, q, N_NEIGHBOURS)

    return np.stack([_refit_forecasts(panel.candidates[i].T, panel.returns[i], window, REFIT_EVERY, predict,
                                      standardise=True) for i in range(len(panel))])


def boosted_trees(panel: Panel, window: Window) -> Float64Array:
    """(n, T) lightgbm forecasts on the last 12 returns and the candidates (:data:`LGBM_PARAMS`)."""
    import lightgbm

    forecasts = []
    for i in range(len(panel)):
        seed = int(generator(panel.seeds[i], PROCEDURE_STREAM, AUDIT_STREAM).integers(2**31 - 1))

        def predict(x: Float64Array, y: Float64Array, q: Float64Array, seed: int = seed) -> Float64Array:
            model = lightgbm.LGBMRegressor(random_state=seed, **LGBM_PARAMS)
            model.fit(x, y)
            return np.asarray(model.predict(q), dtype=float)

        features = np.hstack([_lag_features(panel.returns[i]), panel.candidates[i].T])
        forecasts.append(_refit_forecasts(features, panel.returns[i], window, TREE_REFIT_EVERY, predict,
                                          standardise=False))
    return np.stack(forecasts)


Detector = Callable[[Panel, Window], Float64Array]


def _per_world(forecaster: Callable[[Float64Array, int, Window], Float64Array], k: int) -> Detector:
    def detector(panel: Panel, window: Window) -> Float64Array:
        return np.stack([forecaster(r, k, window) for r in panel.returns])

    return detector


DETECTORS: dict[str, Detector] = {
    **{f"lookup_exact_{k}": _per_world(lookup_exact, k) for k in (1, 2, 3)},
    **{f"lookup_nearest_{k}": _per_world(lookup_nearest, k) for k in (1, 2, 3)},
    "knn_lags": knn_lags,
    "knn_candidates": knn_candidates,
    "lightgbm": boosted_trees,
}
"""Every detector of the audit, by name (the audit's ``--detectors`` picks among these)."""


__all__ = ["DETECTORS", "Detector", "LGBM_PARAMS", "N_NEIGHBOURS", "REFIT_EVERY", "TREE_REFIT_EVERY", "Window",
           "boosted_trees", "knn_candidates", "knn_lags", "knn_predict", "lookup_exact", "lookup_nearest"]

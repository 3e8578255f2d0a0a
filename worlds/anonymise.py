"""Anonymisation: shuffle the candidate columns and hide units and signs (SPEC 1.5).

Per world, from its ``anonymise`` sub-stream, in this order:

1. ``permutation(8)``: visible column j shows source column ``perm[j]`` (source 0 is the planted
   predictor when there is one);
2. ``uniform(20, 200)``: the positive factor multiplying returns (hides decimal vs percent units);
3. ``uniform(0.1, 10, 8)``: slope magnitudes of the visible columns' affine maps;
4. ``integers(0, 2, 8)``: slope signs (1 keeps, 0 flips the sign);
5. ``uniform(-5, 5, 8)``: intercepts.

A visible column is ``slope * x_source + intercept``. All factors are sealed metadata, and
:func:`deanonymise` inverts the maps exactly up to floating-point rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from planted.seeding import generator

RETURN_SCALE_RANGE = (20.0, 200.0)
SLOPE_MAGNITUDE_RANGE = (0.1, 10.0)
INTERCEPT_RANGE = (-5.0, 5.0)


@dataclass(frozen=True)
class Anonymisation:
    """Batch of anonymisation maps: ``perm`` (n, 8), ``return_scale`` (n,), ``slope``/``intercept`` (n, 8)."""

    perm: np.ndarray
    return_scale: np.ndarray
    slope: np.ndarray
    intercept: np.ndarray


def draw_anonymisation(seeds: Sequence[np.random.SeedSequence], stream: int, n_columns: int) -> Anonymisation:
    """Draw the anonymisation maps of each world from its sub-stream ``stream`` (order in module doc)."""
    n = len(seeds)
    perm = np.empty((n, n_columns), dtype=np.int64)
    scale = np.empty(n)
    slope = np.empty((n, n_columns))
    intercept = np.empty((n, n_columns))
    for i, seq in enumerate(seeds):
        rng = generator(seq, stream)
        perm[i] = rng.permutation(n_columns)
        scale[i] = rng.uniform(*RETURN_SCALE_RANGE)
        magnitude = rng.uniform(*SLOPE_MAGNITUDE_RANGE, size=n_columns)
        sign = np.where(rng.integers(0, 2, size=n_columns) == 1, 1.0, -1.0)
        slope[i] = magnitude * sign
        intercept[i] = rng.uniform(*INTERCEPT_RANGE, size=n_columns)
    return Anonymisation(perm=perm, return_scale=scale, slope=slope, intercept=intercept)


def anonymise(returns: np.ndarray, candidates: np.ndarray, maps: Anonymisation) -> tuple[np.ndarray, np.ndarray]:
    """Apply the maps: returns (n, T) times the scale; candidates (n, 8, T) shuffled and affine-mapped."""
    visible = candidates[np.arange(candidates.shape[0])[:, None], maps.perm]
    visible *= maps.slope[:, :, None]
    visible += maps.intercept[:, :, None]
    return returns * maps.return_scale[:, None], visible


def deanonymise(
    visible_returns: np.ndarray, visible_candidates: np.ndarray, maps: Anonymisation
) -> tuple[np.ndarray, np.ndarray]:
    """Invert :func:`anonymise`: raw returns (n, T) and candidates (n, 8, T) in source order."""
    shuffled = (visible_candidates - maps.intercept[:, :, None]) / maps.slope[:, :, None]
    source = np.empty_like(shuffled)
    np.put_along_axis(source, maps.perm[:, :, None], shuffled, axis=1)
    return visible_returns / maps.return_scale[:, None], source

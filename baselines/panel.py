"""The data every procedure sees: a batch of worlds as aligned arrays with the nine candidates.

Candidates for every procedure are the eight visible columns plus the asset's trailing 12-month
mean return (SPEC 3), computed from the visible (anonymised) returns. The panel also carries what
only the oracle and the truth labels may use: the true regressor and the design's signal label.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from planted._typing import Float64Array
from planted.worlds import World, WorldBatch
from planted.worlds.processes import trailing_mean

CANDIDATE_NAMES = (*(f"x{j}" for j in range(1, 9)), "m12")
M12 = CANDIDATE_NAMES.index("m12")
PSEUDO_OOS_START = 350
"""First target month of the pseudo-out-of-sample evaluation in the training window (SPEC 3.1)."""
PROCEDURE_STREAM = 100
"""Sub-stream key, below a world's seed sequence, of the randomness of procedures (RF weights)."""
IN_SAMPLE_FIRST_PAIR = 12
"""In-sample tests use the pairs (x[t], r[t+1]) for t = 12 .. n_train - 2 (SPEC 3.2)."""


@dataclass(frozen=True)
class Panel:
    """A batch of worlds as the procedures see them.

    Attributes
    ----------
    returns : ndarray, shape (n, T)
        Visible (anonymised) returns over training then test months.
    candidates : ndarray, shape (n, 9, T)
        ``x1..x8`` then ``m12`` (NaN for the first 11 months).
    n_train : int
    oracle : ndarray, shape (n, T)
        The true regressor, up to an affine map (which a regression with an intercept does not
        see): the planted column (linear, persistent_null, injected; on the visible scale), ``m12``
        (momentum_null, reversal) or, in regime worlds, the raw planted predictor times the true
        high-volatility indicator, ``x[t] s[t]``. (The anonymised column times the state,
        ``(a x + b) s``, is not an affine map of ``x s``: the anonymisation intercept ``b`` would
        leak in as ``b s``.)
    signal : ndarray of bool, shape (n,)
        Design truth: whether a planted predictive relation exists.
    seeds : tuple of numpy.random.SeedSequence
        Each world's seed sequence; randomised procedures draw from its sub-stream
        ``PROCEDURE_STREAM`` (never from a world's own streams).
    """

    returns: Float64Array
    candidates: Float64Array
    n_train: int
    oracle: Float64Array
    signal: np.ndarray
    seeds: tuple[np.random.SeedSequence, ...]

    def __len__(self) -> int:
        return self.returns.shape[0]

    @property
    def n_months(self) -> int:
        """Training plus test months."""
        return self.returns.shape[1]


def has_signal(family: str, r2: float | None) -> bool:
    """Design truth label (SPEC 4): a planted predictive relation exists."""
    if family in ("persistent_null", "momentum_null"):
        return False
    if family in ("linear", "injected"):
        return bool(r2 and r2 > 0)
    return True  # reversal and regime plant a 1% R2


def _assemble(returns, visible, planted_index, regime_signal, family, r2, n_train, seeds) -> Panel:
    n = returns.shape[0]
    m12 = trailing_mean(returns, 12)
    candidates = np.concatenate([visible, m12[:, None, :]], axis=1)
    if family in ("momentum_null", "reversal"):
        oracle = m12
    elif family == "regime":
        oracle = regime_signal
    else:
        oracle = visible[np.arange(n), planted_index]
    return Panel(
        returns=returns, candidates=candidates, n_train=n_train, oracle=oracle,
        signal=np.full(n, has_signal(family, r2)), seeds=tuple(seeds),
    )


def panel_from_batch(batch: WorldBatch) -> Panel:
    """Panel of a :class:`~planted.worlds.WorldBatch` (the Monte Carlo engine's input)."""
    return _assemble(
        batch.returns, batch.candidates, batch.planted_index, batch.raw.signal,
        batch.spec.family, batch.spec.r2, batch.n_train, batch.seeds,
    )


def panel_from_worlds(worlds: Sequence[World]) -> Panel:
    """Panel of built worlds of one family and length (the agent grid's baselines use this)."""
    families = {w.spec.family for w in worlds}
    lengths = {len(w.visible) + len(w.test) for w in worlds}
    if len(families) != 1 or len(lengths) != 1:
        raise ValueError("panel_from_worlds needs worlds of one family and one length")
    frames = [np.vstack([w.visible.to_numpy(), w.test.to_numpy()]) for w in worlds]
    data = np.stack(frames)  # (n, T, 10): month, asset_A, x1..x8
    returns = data[:, :, 1]
    visible = np.transpose(data[:, :, 2:], (0, 2, 1))
    names = [f"x{j}" for j in range(1, 9)]
    planted = np.array([names.index(w.planted_column) if w.planted_column else -1 for w in worlds])
    regime_signal = (np.stack([np.asarray(w.truth.signal) for w in worlds])
                     if worlds[0].spec.family == "regime" else None)
    spec = worlds[0].spec
    r2s = {w.spec.r2 for w in worlds}
    seeds = [
        np.random.SeedSequence(w.meta["seed"]["entropy"], spawn_key=tuple(w.meta["seed"]["spawn_key"])) for w in worlds
    ]
    panel = _assemble(returns, visible, planted, regime_signal, spec.family, spec.r2, worlds[0].meta["n_train"], seeds)
    if len(r2s) > 1:
        signal = np.array([has_signal(w.spec.family, w.spec.r2) for w in worlds])
        panel = replace(panel, signal=signal)
    return panel

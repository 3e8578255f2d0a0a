"""Worlds as the agent and the procedures see them: :func:`build` one, :func:`build_batch` many.

A :class:`World` holds exactly what the agent gets (``visible``), the sealed test window
(``test``, same columns and anonymisation), the sealed metadata (``meta``) and the un-anonymised
truth (``truth``). A :class:`WorldBatch` holds the same for many worlds of one spec as arrays, for
the Monte Carlo engine; ``batch.world(i)`` is bit-identical to ``build(spec, seeds[i])``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

import planted
from planted.hashing import sha256_bytes
from planted.seeding import SeedLike, as_seed_sequence, describe
from planted.worlds import spec as S
from planted.worlds.anonymise import Anonymisation, anonymise, draw_anonymisation
from planted.worlds.artifact import repeated_follower_share, repeated_share
from planted.worlds.data import FactorSeries, embedded_hml, ff5_factor
from planted.worlds.pool import ShockPool, default_pool
from planted.worlds.simulate import STREAMS, RawBatch, simulate_raw
from planted.worlds.spec import WorldSpec

CANDIDATE_COLUMNS = tuple(f"x{j}" for j in range(1, S.N_CANDIDATES + 1))
COLUMNS = ("month", "asset_A", *CANDIDATE_COLUMNS)
CSV_FLOAT_FORMAT = "%.17g"
"""Round-trip precision: the CSV holds exactly the floats the procedures use."""


@dataclass(frozen=True)
class WorldTruth:
    """Un-anonymised arrays of one world over its kept window (training then test months).

    Attributes
    ----------
    returns : ndarray, shape (T,)
        Decimal returns.
    candidates : ndarray, shape (8, T)
        Candidates in source order (planted first when there is one).
    planted : ndarray or None
        The planted predictor x (linear, persistent_null, regime, injected).
    signal : ndarray or None
        The oracle regressor when it is not a plain candidate (regime: x times the high-state
        indicator); ``None`` elsewhere.
    regime : ndarray or None
        1 in high-volatility months (regime worlds).
    shock_ids : ndarray or None
        Pool index of each month's shock (bootstrap worlds).
    n_train : int
    """

    returns: np.ndarray
    candidates: np.ndarray
    planted: np.ndarray | None
    signal: np.ndarray | None
    regime: np.ndarray | None
    shock_ids: np.ndarray | None
    n_train: int


@dataclass(frozen=True)
class World:
    """One built world: ``visible`` (agent's data), ``test`` (sealed), ``meta`` (sealed), ``truth``."""

    spec: WorldSpec
    visible: pd.DataFrame
    test: pd.DataFrame
    meta: dict[str, Any]
    truth: WorldTruth

    @property
    def planted_column(self) -> str | None:
        """Name of the visible column holding the planted predictor, or ``None``."""
        return self.meta["planted_column"]

    def visible_csv(self) -> str:
        """The agent's data file, byte for byte."""
        return frame_to_csv(self.visible)

    def test_csv(self) -> str:
        """The sealed test window file, byte for byte."""
        return frame_to_csv(self.test)

    def summary(self) -> str:
        """A readable, timestamp-free description of the world."""
        meta = self.meta
        lines = [
            f"world {meta['label']}  seed={meta['seed']['entropy']}{_key(meta['seed'])}",
            f"  family={meta['spec']['family']}  shocks={meta['spec']['shocks']}  "
            f"train={meta['n_train']}  test={meta['n_test']}",
            f"  planted column: {meta['planted_column'] or 'none'}",
            "  candidate persistence: "
            + ", ".join(f"{c}={meta['persistence'][c]:g}" for c in CANDIDATE_COLUMNS),
            f"  repeated returns (train): {meta['repeated_share']:.1%}   "
            f"repeated (prev, value) pairs: {meta['repeated_pair_share']:.1%}",
            f"  return scale: {meta['anonymisation']['return_scale']:.4g}",
            f"  content sha256: {meta['content_sha256']}",
        ]
        if "pool_sha256" in meta["params"]:
            lines.insert(3, f"  shock pool: {meta['params']['pool_source']}  sha256={meta['params']['pool_sha256'][:16]}...")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _key(seed: dict) -> str:
    return f" spawn_key={tuple(seed['spawn_key'])}" if seed["spawn_key"] else ""


def frame_to_csv(frame: pd.DataFrame) -> str:
    """Serialise a world frame as CSV text (``\\n`` line ends, round-trip float precision)."""
    return frame.to_csv(index=False, float_format=CSV_FLOAT_FORMAT, lineterminator="\n")


@dataclass
class WorldBatch:
    """Many worlds of one spec as arrays (anonymised, as the agent would see them).

    Attributes
    ----------
    spec : WorldSpec
    seeds : list of numpy.random.SeedSequence
    returns : ndarray, shape (n, T)
        Anonymised returns, training then test months.
    candidates : ndarray, shape (n, 8, T)
        Anonymised candidates in visible order (column j is ``x{j+1}``).
    n_train : int
    planted_index : ndarray of int, shape (n,)
        Visible column index of the planted predictor, -1 when none.
    raw : RawBatch
        The un-anonymised simulation.
    maps : Anonymisation
    """

    spec: WorldSpec
    seeds: list[np.random.SeedSequence]
    returns: np.ndarray
    candidates: np.ndarray
    n_train: int
    planted_index: np.ndarray
    raw: RawBatch
    maps: Anonymisation

    def __len__(self) -> int:
        return len(self.seeds)

    def world(self, i: int) -> World:
        """Return world ``i`` of the batch as a :class:`World` (DataFrames, metadata, truth)."""
        months = np.arange(self.returns.shape[1])
        frame = pd.DataFrame({"month": months, "asset_A": self.returns[i]})
        for j, name in enumerate(CANDIDATE_COLUMNS):
            frame[name] = self.candidates[i, j]
        visible = frame.iloc[: self.n_train].reset_index(drop=True)
        test = frame.iloc[self.n_train :].reset_index(drop=True)
        raw = self.raw
        truth = WorldTruth(
            returns=raw.returns[i],
            candidates=raw.candidates[i],
            planted=raw.candidates[i, 0] if raw.has_planted else None,
            signal=None if raw.signal is None else raw.signal[i],
            regime=None if raw.regime is None else raw.regime[i],
            shock_ids=None if raw.shock_ids is None else raw.shock_ids[i],
            n_train=self.n_train,
        )
        visible_csv, test_csv = frame_to_csv(visible), frame_to_csv(test)
        meta = self._meta(i, visible_csv, test_csv)
        return World(spec=self.spec, visible=visible, test=test, meta=meta, truth=truth)

    def _meta(self, i: int, visible_csv: str, test_csv: str) -> dict[str, Any]:
        raw, maps = self.raw, self.maps
        planted_idx = int(self.planted_index[i])
        source_of = maps.perm[i]
        return {
            "label": self.spec.label(),
            "spec": self.spec.to_dict(),
            "seed": describe(self.seeds[i]),
            "streams": dict(STREAMS),
            "planted_column": CANDIDATE_COLUMNS[planted_idx] if planted_idx >= 0 else None,
            "persistence": {
                name: float(raw.persistences[i, source_of[j]]) for j, name in enumerate(CANDIDATE_COLUMNS)
            },
            "anonymisation": {
                "return_scale": float(maps.return_scale[i]),
                "source_column": {name: int(source_of[j]) for j, name in enumerate(CANDIDATE_COLUMNS)},
                "slope": {name: float(maps.slope[i, j]) for j, name in enumerate(CANDIDATE_COLUMNS)},
                "intercept": {name: float(maps.intercept[i, j]) for j, name in enumerate(CANDIDATE_COLUMNS)},
            },
            "constants": {"sigma": S.SIGMA, "mu": S.MU, "burn_in": S.BURN_IN},
            "params": raw.params,
            **raw.per_world[i],
            "n_train": self.n_train,
            "n_test": int(self.returns.shape[1] - self.n_train),
            "repeated_share": repeated_share(raw.returns[i, : self.n_train]),
            "repeated_pair_share": repeated_follower_share(raw.returns[i, : self.n_train]),
            "visible_sha256": sha256_bytes(visible_csv.encode()),
            "content_sha256": sha256_bytes(visible_csv.encode() + test_csv.encode()),
            "planted_version": planted.__version__,
        }


def resolve_factor(spec: WorldSpec, factor_file: str | Path | None) -> FactorSeries | None:
    """The real factor an injected world needs (``None`` for simulated families).

    HML comes from ``factor_file`` when given, else from the embedded linearmodels data (from
    1963-07); RMW needs the 5-factor file (``factor_file`` or the copy ``planted data fetch`` stored).
    Raises :class:`~planted.worlds.data.FactorDataError` before any work when it is missing.
    """
    if spec.family != "injected":
        return None
    if spec.factor == "HML" and factor_file is None:
        return embedded_hml()
    if spec.factor is None:
        raise ValueError("injected worlds need factor='HML' or 'RMW'")
    return ff5_factor(spec.factor, factor_file)


def build_batch(
    spec: WorldSpec,
    seeds: Sequence[SeedLike],
    *,
    pool: ShockPool | None = None,
    factor_file: str | Path | None = None,
) -> WorldBatch:
    """Build many worlds of one spec, one seed each, with the arithmetic vectorised over worlds.

    Parameters
    ----------
    spec : WorldSpec
    seeds : sequence of int or numpy.random.SeedSequence
        World ``i`` depends only on ``seeds[i]`` (and the data sources), never on the batch.
    pool : ShockPool, optional
        Shock pool of bootstrap worlds; the embedded HML pool by default.
    factor_file : path, optional
        Fama-French 5-factor CSV for injected worlds (required for RMW).

    Returns
    -------
    WorldBatch
    """
    factor = resolve_factor(spec, factor_file)
    sequences = [as_seed_sequence(seed) for seed in seeds]
    if not sequences:
        raise ValueError("build_batch needs at least one seed")
    raw = simulate_raw(spec, sequences, pool=pool or default_pool(), factor=factor)
    maps = draw_anonymisation(sequences, STREAMS["anonymise"], S.N_CANDIDATES)
    returns, candidates = anonymise(raw.returns, raw.candidates, maps)
    planted_index = (
        np.argmax(maps.perm == 0, axis=1) if raw.has_planted else np.full(len(sequences), -1)
    )
    return WorldBatch(
        spec=spec, seeds=sequences, returns=returns, candidates=candidates, n_train=raw.n_train,
        planted_index=planted_index.astype(np.int64), raw=raw, maps=maps,
    )


def build(
    spec: WorldSpec, seed: SeedLike, *, pool: ShockPool | None = None, factor_file: str | Path | None = None
) -> World:
    """Build one world from its spec and seed; the same arguments give the same bytes.

    Parameters
    ----------
    spec : WorldSpec
    seed : int or numpy.random.SeedSequence
    pool : ShockPool, optional
        Shock pool for bootstrap worlds (default: embedded HML residuals).
    factor_file : path, optional
        Fama-French 5-factor CSV (needed for injected RMW worlds).

    Returns
    -------
    World

    Examples
    --------
    >>> from planted.worlds import WorldSpec, build
    >>> w = build(WorldSpec(family="linear", r2=0.01, phi=0.95, rho=-0.8, shocks="gaussian"), seed=7)
    >>> w.visible.shape
    (700, 10)
    """
    return build_batch(spec, [seed], pool=pool, factor_file=factor_file).world(0)



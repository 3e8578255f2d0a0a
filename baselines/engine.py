"""The Monte Carlo engine: a grid of world specs x seeds x procedures -> a tidy table of p-values.

Design (SPEC 3.3):

* **Seeds first.** World j of a cell gets ``SeedSequence(seed, spawn_key=(SIMULATION_DOMAIN,
  cell_key, j))``, where ``cell_key`` is ``WorldSpec.seed_key()``, a stable hash of the cell's label. Agent worlds use another
  domain, so simulated worlds never coincide with them; adding a cell or changing the chunk size,
  the number of workers or the backend never changes any world.
* **Chunks.** Each cell's worlds are split into chunks of ``chunk_size``; a chunk is built as one
  vectorised batch, every procedure runs on it, and its rows are written to its own Parquet file
  (``DIR/chunks/``). Peak memory is bounded by the chunk size, whatever the number of worlds, and a
  rerun skips chunks already on disk (resumable).
* **Parallel.** Chunks run through joblib: ``backend="loky"`` (local processes), or ``"dask"`` /
  ``"ray"`` via joblib's backends for a cluster. The backend is a configuration switch only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
from joblib import Parallel, delayed, parallel_config
from tqdm.auto import tqdm

import planted
from planted.baselines.panel import Panel, panel_from_batch
from planted.baselines.procedures import KINDS, PROCEDURES, economic_label, run_procedures
from planted.seeding import describe, substream
from planted.worlds import PoolChoice, ShockPool, WorldBuildError, WorldSpec, build_batch

SIMULATION_DOMAIN = 1
"""First spawn-key element of simulated (Monte Carlo) worlds; agent worlds use 0."""
SPEC_COLUMNS = ("family", "r2", "phi", "rho", "shocks", "factor")


class SimulationConfigError(ValueError):
    """A simulation that cannot run as asked (the message names the option and the fix)."""


def world_seed(seed: int, spec: WorldSpec, index: int) -> np.random.SeedSequence:
    """Seed sequence of simulated world ``index`` of cell ``spec`` under the study seed ``seed``."""
    return substream(np.random.SeedSequence(seed), SIMULATION_DOMAIN, spec.seed_key(), index)


@dataclass(frozen=True)
class Chunk:
    """A contiguous range of worlds of one cell: the unit of work, of parallelism and of resumption."""

    spec: WorldSpec
    start: int
    stop: int

    @property
    def name(self) -> str:
        """File stem of the chunk's Parquet file."""
        return f"{self.spec.label()}__{self.start:07d}-{self.stop:07d}"


@dataclass
class SimulationConfig:
    """What to simulate and how.

    Attributes
    ----------
    cells : list of WorldSpec
    worlds_per_cell : int
    procedures : list of str
        Names in ``PROCEDURES``.
    seed : int
        Study seed of the simulation domain.
    chunk_size : int
        Worlds per vectorised batch (bounds memory: roughly 0.5 MB per world).
    n_jobs : int
    backend : str
        ``loky`` (default), ``threading``, ``dask`` or ``ray``.
    factor_file : str, optional
        Fama-French 5-factor CSV for injected RMW cells (and for the ``ff5`` shock pool).
    pool : PoolChoice
        The bootstrap worlds' shock pool (default: the embedded HML pool); it should be the agent
        worlds' pool, so that simulated baselines are comparable (``planted mc --pool``).
    """

    cells: list[WorldSpec]
    worlds_per_cell: int
    procedures: list[str]
    seed: int = 1
    chunk_size: int = 250
    n_jobs: int = 1
    backend: str = "loky"
    factor_file: str | None = None
    pool: PoolChoice = field(default_factory=PoolChoice)
    chunks: list[Chunk] = field(init=False)

    def __post_init__(self) -> None:
        unknown = [p for p in self.procedures if p not in PROCEDURES]
        if unknown:
            raise SimulationConfigError(f"unknown procedures {unknown}; choose from {', '.join(PROCEDURES)}")
        if self.worlds_per_cell < 1 or self.chunk_size < 1:
            raise SimulationConfigError("worlds per cell and chunk size must be 1 or more")
        if self.n_jobs == 0:
            raise SimulationConfigError("0 workers cannot run anything: pass n_jobs 1 or more, or -1 for every core")
        self.chunks = [
            Chunk(spec, start, min(start + self.chunk_size, self.worlds_per_cell))
            for spec in self.cells
            for start in range(0, self.worlds_per_cell, self.chunk_size)
        ]

    def fingerprint(self) -> dict:
        """What determines the results (not how they are computed): seed, cells, worlds, procedures."""
        return {
            "seed": self.seed,
            "cells": [c.to_dict() for c in self.cells],
            "worlds_per_cell": self.worlds_per_cell,
            "procedures": sorted(self.procedures),
            "chunk_size": self.chunk_size,
            "factor_file": self.factor_file,
        } | ({} if self.pool.is_default else {"pool": self.pool.to_dict()})  # default: as recorded before pools were chosen


def run_chunk(chunk: Chunk, config: SimulationConfig) -> pd.DataFrame:
    """Build one chunk's worlds, run every procedure on them and return the tidy rows.

    Seeds for which the world cannot be built (a momentum-null seed that never meets its selection
    rule) are dropped and reported in a row with ``procedure = "<build-error>"``.
    """
    indices = list(range(chunk.start, chunk.stop))
    seeds = [world_seed(config.seed, chunk.spec, j) for j in indices]
    panel, failures = build_panel(chunk.spec, indices, seeds, config.pool.load(config.factor_file), config.factor_file)
    if panel is None:
        return _failure_rows(chunk.spec, failures, config.seed)
    results = run_procedures(panel, sorted(set(config.procedures) | {"oracle"}))
    economic = economic_label(results["oracle"])
    frames = []
    for name in config.procedures:
        frame = results[name].to_frame()
        frame.insert(0, "world", indices)
        frames.append(frame)
    rows = pd.concat(frames, ignore_index=True)
    n_proc = len(config.procedures)
    rows["signal"] = np.tile(panel.signal, n_proc)
    rows["economic"] = np.tile(economic, n_proc)
    rows["seed_spawn_key"] = np.tile([json.dumps(describe(s)["spawn_key"]) for s in seeds], n_proc)
    rows = _with_spec(rows, chunk.spec, config.seed)
    if failures:
        rows = pd.concat([rows, _failure_rows(chunk.spec, failures, config.seed)], ignore_index=True)
    return rows


def build_panel(spec: WorldSpec, indices: list[int], seeds: list[np.random.SeedSequence], pool: ShockPool,
                factor_file: str | None) -> tuple[Panel | None, list[tuple[int, str]]]:
    """The panel of the worlds ``indices`` (with ``seeds``) that can be built, and (index, reason) of the
    others (a momentum-null seed that never meets its selection rule). ``indices`` and ``seeds`` are
    narrowed in place to the built worlds; the panel is None when none could be built."""
    failures: list[tuple[int, str]] = []
    while seeds:
        try:
            return panel_from_batch(build_batch(spec, seeds, pool=pool, factor_file=factor_file)), failures
        except WorldBuildError as exc:
            for position in sorted(exc.failed, reverse=True):
                failures.append((indices.pop(position), str(exc)))
                seeds.pop(position)
    return None, failures


def _with_spec(rows: pd.DataFrame, spec: WorldSpec, seed: int) -> pd.DataFrame:
    for position, column in enumerate(SPEC_COLUMNS):
        rows.insert(position, column, getattr(spec, column))
    rows.insert(len(SPEC_COLUMNS), "cell", spec.label())
    rows["seed"] = seed
    return rows


def _failure_rows(spec: WorldSpec, failures: list[tuple[int, str]], seed: int) -> pd.DataFrame:
    rows = pd.DataFrame({"world": [i for i, _ in failures], "procedure": "<build-error>", "error": [m for _, m in failures]})
    return _with_spec(rows, spec, seed)


def _chunk_path(directory: Path, chunk: Chunk) -> Path:
    return directory / "chunks" / f"{chunk.name}.parquet"


def _write_atomic(frame: pd.DataFrame, path: Path) -> None:
    partial = path.with_name(path.name + ".part")
    frame.to_parquet(partial, index=False)
    partial.replace(path)


def simulate(config: SimulationConfig, out: str | Path | None = None, *, progress: bool = True) -> pd.DataFrame:
    """Run the Monte Carlo grid and return one row per world x procedure.

    Parameters
    ----------
    config : SimulationConfig
    out : path, optional
        Directory for ``chunks/*.parquet``, ``simulation.json`` and the combined ``mc.parquet``.
        With a directory, chunks already written are reused (resumable); a directory may be
        extended with more worlds per cell or more cells (same seed tree: the result equals one
        larger run bit for bit), and any other change of configuration is refused.
    progress : bool
        Show a progress bar over chunks.

    Returns
    -------
    pandas.DataFrame
        Columns: the cell's spec fields and label, ``world`` (index in the cell), ``procedure``,
        ``kind``, ``decision_p``, ``chosen``, ``statistic``, ``test_oos_r2``, ``test_cw_stat``,
        ``test_cw_p``, ``signal``, ``economic``, ``seed_spawn_key``, ``seed``.
    """
    directory = Path(out) if out is not None else None
    todo = list(config.chunks)
    if directory is not None:
        _claim_directory(directory, config)
        todo = [c for c in todo if not _chunk_path(directory, c).is_file()]
    bar = tqdm(total=len(config.chunks), initial=len(config.chunks) - len(todo), disable=not progress, desc="mc chunks")
    new: dict[str, pd.DataFrame] = {}
    with parallel_config(backend=config.backend, n_jobs=config.n_jobs):
        for chunk, rows in Parallel(return_as="generator_unordered")(
            delayed(_run_and_name)(chunk, config) for chunk in todo
        ):
            if directory is not None:
                _write_atomic(rows, _chunk_path(directory, chunk))
            new[chunk.name] = rows
            bar.update(1)
    bar.close()
    frames = [
        new[c.name] if c.name in new else pd.read_parquet(_chunk_path(directory, c))  # type: ignore[arg-type]
        for c in config.chunks
    ]
    table = pd.concat(frames, ignore_index=True)
    if directory is not None:
        _write_atomic(table, directory / "mc.parquet")
    return table


def _run_and_name(chunk: Chunk, config: SimulationConfig) -> tuple[Chunk, pd.DataFrame]:
    return chunk, run_chunk(chunk, config)


EXTENSIBLE = ("cells", "worlds_per_cell")
"""Fingerprint fields a simulation directory may grow in: world j of a cell has the same seed
whatever the number of worlds or cells, and chunks cover fixed ranges ``[k chunk_size, (k+1)
chunk_size)``, so a grown simulation reuses every full chunk and equals one larger run bit for bit."""


def _claim_directory(directory: Path, config: SimulationConfig) -> None:
    """Create or check ``simulation.json``: the same configuration, or one that only adds worlds or cells.

    On growth, chunks that the larger run computes differently (a cell's last, partial chunk) are
    moved to ``chunks/superseded/`` (never deleted) and recomputed; the manifest records the history.

    Raises
    ------
    SimulationConfigError
        The directory holds a simulation that differs in anything but growth (seed, procedures,
        chunk size, pool, factor file), or this one is smaller.
    """
    (directory / "chunks").mkdir(parents=True, exist_ok=True)
    manifest = directory / "simulation.json"
    fingerprint = json.loads(json.dumps(config.fingerprint()))
    history: list[dict] = []
    if manifest.is_file():
        recorded = json.loads(manifest.read_text())
        old = recorded["config"]
        if old == fingerprint:
            return
        fixed = sorted(k for k in set(old) | set(fingerprint) if k not in EXTENSIBLE and old.get(k) != fingerprint.get(k))
        old_cells = [json.dumps(c, sort_keys=True) for c in old["cells"]]
        new_cells = {json.dumps(c, sort_keys=True) for c in fingerprint["cells"]}
        if fixed:
            raise SimulationConfigError(
                f"{directory} holds a simulation with another {', '.join(fixed)}; a directory can only grow (more "
                "--worlds-per-cell or more cells, the rest unchanged): use a new --out directory"
            )
        if fingerprint["worlds_per_cell"] < old["worlds_per_cell"] or not set(old_cells) <= new_cells:
            raise SimulationConfigError(
                f"{directory} holds a larger simulation ({old['worlds_per_cell']} worlds per cell, {len(old_cells)} cells) "
                "than asked: pass at least its worlds per cell and cells to extend it, or use a new --out directory"
            )
        keep = {c.name for c in config.chunks}
        superseded = directory / "chunks" / "superseded"
        for path in sorted((directory / "chunks").glob("*.parquet")):
            if path.stem not in keep:
                superseded.mkdir(exist_ok=True)
                path.rename(superseded / path.name)
        history = recorded.get("history", []) + [{"config": old, "planted_version": recorded.get("planted_version")}]
    text = json.dumps({"config": fingerprint, "planted_version": planted.__version__} | ({"history": history} if history else {}),
                      indent=2, sort_keys=True) + "\n"
    partial = manifest.with_name(manifest.name + ".part")
    partial.write_text(text)
    partial.replace(manifest)


def procedure_kinds(names: Iterable[str]) -> dict[str, str]:
    """Kind (pre-specified or exploratory) of each named procedure."""
    return {name: KINDS[name] for name in names}


def linear_grid(r2_levels: Sequence[float], shocks: str, phis=(0.5, 0.95), rhos=(0.0, -0.8)) -> list[WorldSpec]:
    """The linear cells for the given R2 levels (pooled over phi and rho in the claim-rate summaries)."""
    return [WorldSpec(family="linear", r2=r2, phi=phi, rho=rho, shocks=shocks) for r2 in r2_levels for phi in phis for rho in rhos]


def cells_for(family: str, *, shocks: str | None, r2: Sequence[float] = (), phi: Sequence[float] = (),
              rho: Sequence[float] = (), factor: str | None = None) -> list[WorldSpec]:
    """The cells ``planted mc`` simulates: linear cells cross R2 x phi x rho; injected cells one per R2;
    a trap family is one cell (its parameters are fixed by SPEC 1.3)."""
    if family == "linear":
        return [WorldSpec(family="linear", r2=a, phi=b, rho=c, shocks=shocks) for a in r2 for b in phi for c in rho]
    if family == "injected":
        return [WorldSpec(family="injected", factor=factor, r2=a) for a in r2]
    return [WorldSpec(family=family, shocks=shocks)]


def connect_cluster(backend: str, scheduler: str | None) -> tuple[object | None, str | None]:
    """Attach joblib to a Dask or Ray cluster (``backend`` ``dask`` or ``ray``).

    Returns the client, which the caller keeps while it simulates (a Dask cluster started here
    lives as long as its client), and the scheduler's address. ``dask`` without an address starts
    an in-process cluster; ``loky`` and ``threading`` need nothing (``(None, None)``).
    """
    if backend == "dask":
        from distributed import Client

        client = Client(scheduler) if scheduler else Client(processes=False)
        return client, str(client.scheduler.address)
    if backend == "ray":
        import ray
        from ray.util.joblib import register_ray

        ray.init(address=scheduler)
        register_ray()
        return ray, scheduler or "local ray"
    return None, None

"""The resumable grid runner: worlds -> episodes in the sandbox -> evaluation -> baselines -> run table.

The study directory ``OUT/<study>/`` is laid out by :class:`planted.study_layout.StudyLayout`
(every file name is there); files that must never be seen half-written are written with its
atomic, durable helpers.

A run counts as done exactly when its ``result.json`` exists with status ``ok`` (an agent outcome)
or ``infra_error`` (the host failed it ``1 + max_infra_retries`` times in a row: recorded with the
reason, never counted as an agent outcome, not redone unless asked); it is written atomically as
the run's last act. Anything else (no result, an interrupted run, a damaged transcript) is redone
on the same world, and the files of the earlier attempt are moved to ``attempts/<n>/`` first, so a
rerun of the same command does only what is missing, never duplicates a run and never loses a file.
"""

from __future__ import annotations

import json
import secrets
import threading
import traceback
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

import planted
from planted.agents.backend import Backend, FatalBackendError
from planted.agents.episode import EpisodeSettings, Evaluator, SandboxFactory, run_episode
from planted.agents.prompts import Prompts
from planted.agents.study import StudyGrid, WorldUnit
from planted.agents.transcript import EventLog, TranscriptError, read_events
from planted.agents.workspace_files import remove_tree
from planted.baselines.panel import panel_from_worlds
from planted.baselines.procedures import economic_label, run_procedures
from planted.hashing import canonical_json, sha256_bytes
from planted.provenance import code_provenance
from planted.records import baselines_frame, rows_frame, run_row
from planted.run_record import RunIdentity, RunRecord, RunRecordError, read_run_record
from planted.study_config import StudyConfig
from planted.study_layout import (
    ATTEMPTS_DIR, RESULT_FILE, TRANSCRIPT_FILE, WORKSPACE_POINTER, StudyLayout, atomic_write_json, atomic_write_parquet,
)
from planted.worlds import World, WorldFileError, build, read_meta, write_world
from planted.worlds.files import VISIBLE_FILE



class StudyConfigMismatch(RuntimeError):
    """The output directory holds a study run with another configuration."""


@dataclass
class GridContext:
    """Everything a grid run needs besides the grid itself."""

    out: Path
    config: dict[str, Any]
    backend: Backend
    prompts: Prompts
    sandbox_factory: SandboxFactory
    evaluator: Evaluator
    sandboxed: bool
    concurrency: int = 1
    factor_file: str | None = None
    progress: bool = True
    analysis_label: str = "exploratory"
    """``confirmatory`` (a frozen study whose manifest verified) or ``exploratory``; stamped into every record."""
    analysis_reason: str | None = None
    """Why the runs are exploratory (None when confirmatory); stamped into every record."""
    project: str = "no project (shipped templates only)"
    """Where the study, models and prompts were resolved (:meth:`planted.project.Project.describe`)."""
    max_infra_retries: int = 2
    """Attempts after the first when a run fails for infrastructure reasons, before it is recorded as ``infra_error``."""

    @property
    def layout(self) -> StudyLayout:
        """The paths of the study directory :attr:`out`."""
        return StudyLayout(self.out)

    @property
    def study(self) -> StudyConfig:
        """The study section of :attr:`config`, typed (checked when the configuration was composed)."""
        return StudyConfig.from_dict(self.config["study"], "study configuration")

    @property
    def settings(self) -> EpisodeSettings:
        return EpisodeSettings(budget=self.study.budget, refit_every=self.study.refit_every)


def config_hash(config: dict[str, Any], prompts: Prompts) -> str:
    """SHA-256 of the resolved study + model configuration and the prompts file."""
    return sha256_bytes(canonical_json({"config": config, "prompts": prompts.sha256}).encode())


def claim_directory(ctx: GridContext) -> str:
    """Create or verify ``study.json``; return the configuration hash."""
    ctx.out.mkdir(parents=True, exist_ok=True)
    digest = config_hash(ctx.config, ctx.prompts)
    manifest = ctx.layout.study_file
    if manifest.is_file():
        recorded = json.loads(manifest.read_text())
        if recorded["config_hash"] != digest:
            raise StudyConfigMismatch(
                f"{ctx.out} holds runs of another configuration (hash {recorded['config_hash'][:12]} vs "
                f"{digest[:12]}); pass a new --out directory (or --new-dir) instead of mixing results"
            )
        return digest
    atomic_write_json(manifest, {"config": ctx.config, "config_hash": digest, "prompts_sha256": ctx.prompts.sha256,
                            "prompts_version": ctx.prompts.version, "planted_version": planted.__version__})
    return digest


def materialise_worlds(ctx: GridContext, grid: StudyGrid) -> dict[str, World]:
    """Build every world of the grid and write its files (reusing files whose hash matches)."""
    worlds: dict[str, World] = {}
    for unit in tqdm(grid.worlds.values(), desc="worlds", disable=not ctx.progress):
        world = build(unit.spec, unit.seed, pool=ctx.study.pool_choice.load(ctx.factor_file), factor_file=ctx.factor_file)
        directory = ctx.layout.world_dir(unit.world_id)
        try:
            recorded = read_meta(directory)["content_sha256"]
        except WorldFileError:  # missing or damaged files: (re)write them
            write_world(world, directory, replace=True)
        else:
            if recorded != world.meta["content_sha256"]:
                raise StudyConfigMismatch(
                    f"{directory} holds another world than this code builds from the same seed; "
                    "use a new --out directory"
                )
        worlds[unit.world_id] = world
    return worlds


def run_baselines(ctx: GridContext, grid: StudyGrid, worlds: dict[str, World]) -> pd.DataFrame:
    """Every configured baseline procedure on every world of the grid (written once, then reused)."""
    path = ctx.layout.baselines_table
    if path.is_file():
        try:
            table = pd.read_parquet(path)
        except (OSError, ValueError) as exc:  # derived from the worlds alone: recomputed, the damaged file kept
            kept = path.with_name(path.name + ".damaged")
            path.rename(kept)
            tqdm.write(f"{path} could not be read ({type(exc).__name__}); kept as {kept.name}, recomputing")
        else:
            if set(table["world_id"]) == set(worlds):
                return table
    procedures = list(ctx.study.procedures)
    frames = []
    by_kind: dict[tuple[str, int], list[str]] = {}
    for wid, world in worlds.items():
        by_kind.setdefault((world.spec.family, len(world.visible) + len(world.test)), []).append(wid)
    for ids in by_kind.values():
        panel = panel_from_worlds([worlds[i] for i in ids])
        results = run_procedures(panel, sorted(set(procedures) | {"oracle"}))
        economic = economic_label(results["oracle"])
        for name in procedures:
            frame = results[name].to_frame()
            frame.insert(0, "world_id", ids)
            frame["claim_5pct"] = results[name].claims(0.05)
            frame["signal"] = panel.signal
            frame["economic"] = economic
            frames.append(frame)
    table = baselines_frame(pd.concat(frames, ignore_index=True))
    atomic_write_parquet(path, table)
    return table


def run_status(run_dir: Path) -> str | None:
    """The status of a run's result (None without a readable result and an intact transcript)."""
    result = run_dir / RESULT_FILE
    if not result.is_file():
        return None
    try:
        status = read_run_record(result).status
        if status == "ok":
            read_events(run_dir / TRANSCRIPT_FILE)
    except (RunRecordError, TranscriptError, FileNotFoundError):
        return None
    return status


def run_is_done(run_dir: Path, *, redo_infra_errors: bool = False) -> bool:
    """A run is done when its result says ``ok`` (with an intact transcript) or ``infra_error``."""
    status = run_status(run_dir)
    return status == "ok" or (status == "infra_error" and not redo_infra_errors)


def new_workspace(layout: StudyLayout) -> Path:
    """A fresh agent workspace ``OUT/ws/<random>``: a name that reveals nothing about the world or the run.

    The sandbox mounts it at ``/workspace`` and its host path is readable inside the sandbox, so it
    is random (never derived from the run id, which names the cell's R2 and the framing).
    """
    while True:
        path = layout.workspace(secrets.token_hex(10))
        try:
            path.mkdir(parents=True)
        except FileExistsError:
            continue
        return path


def archive_attempt(run_dir: Path, layout: StudyLayout) -> int | None:
    """Move the files of an unfinished attempt of a run to ``attempts/<n>/``; return n (None: nothing there).

    The attempt's workspace (named in its ``workspace.txt``) is removed: only the record and the
    transcript are kept.
    """
    files = [p for p in run_dir.iterdir() if p.name != ATTEMPTS_DIR] if run_dir.is_dir() else []
    if not files:
        return None
    pointer = run_dir / WORKSPACE_POINTER
    if pointer.is_file():
        workspace = layout.workspace(pointer.read_text().strip())
        if workspace.parent == layout.workspaces_dir and workspace.is_dir():
            remove_tree(workspace)  # the agent's tree: however deep, no link followed
    attempts = run_dir / ATTEMPTS_DIR
    attempts.mkdir(exist_ok=True)
    number = 1 + max((int(p.name) for p in attempts.iterdir() if p.name.isdigit()), default=0)
    target = attempts / str(number)
    target.mkdir()
    for path in files:
        path.rename(target / path.name)
    return number


def _attempt(ctx: GridContext, unit, world: World, identity: RunIdentity, run_dir: Path) -> RunRecord:
    """One attempt of a run: its record (status ``ok``) or the infrastructure error (status ``error``)."""
    workspace = new_workspace(ctx.layout)
    (run_dir / WORKSPACE_POINTER).write_text(workspace.name + "\n")
    started = RunRecord(identity, status="error", workspace=str(workspace.relative_to(ctx.out)))
    try:
        outcome = run_episode(
            backend=ctx.backend, prompts=ctx.prompts, framing=unit.framing, visible=world.visible, test=world.test,
            data_file=ctx.layout.world_dir(unit.world_id) / VISIBLE_FILE, run_dir=run_dir, workspace=workspace,
            sandbox_factory=ctx.sandbox_factory, evaluator=ctx.evaluator, settings=ctx.settings,
        )
    except FatalBackendError:
        raise
    except Exception as exc:  # infrastructure failure (never the agent's): recorded, retried
        return started.ended("error", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
    return started.ended("ok", outcome=outcome)


def _execute(ctx: GridContext, unit, world: World, world_unit: WorldUnit, digest: str, ledger: EventLog) -> None:
    run_dir = ctx.layout.run_dir(unit.run_id)
    earlier = archive_attempt(run_dir, ctx.layout)
    if earlier is not None:
        tqdm.write(f"{unit.run_id}: an unfinished earlier attempt is kept in {run_dir / ATTEMPTS_DIR / str(earlier)}")
    run_dir.mkdir(parents=True, exist_ok=True)
    ledger.write("run_start", run_id=unit.run_id)
    identity = RunIdentity(
        run_id=unit.run_id, world_id=unit.world_id, framing=unit.framing, replicate=unit.replicate,
        group=unit.group, spec=world_unit.spec.to_dict(), seed=world.meta["seed"],
        planted_column=world.planted_column, model=ctx.config["model"].get("model_id"),
        backend=ctx.config["model"].get("backend"), sandboxed=ctx.sandboxed, config_hash=digest,
        planted_version=planted.__version__, code_version=code_provenance().commit, analysis_label=ctx.analysis_label,
        analysis_reason=ctx.analysis_reason,
    )
    failures: list[str] = []
    try:
        for attempt in range(1 + ctx.max_infra_retries):
            if attempt:
                archive_attempt(run_dir, ctx.layout)
            record = _attempt(ctx, unit, world, identity, run_dir)
            if record.status == "ok":
                break
            failures.append(str(record.error))
            ledger.write("run_attempt_failed", run_id=unit.run_id, attempt=attempt + 1, error=record.error)
        else:
            record = record.ended("infra_error", attempt_errors=tuple(failures))
            tqdm.write(f"{unit.run_id}: gave up after {len(failures)} infrastructure failures: {failures[-1]}")
    except FatalBackendError:
        ledger.write("run_interrupted", run_id=unit.run_id)
        raise
    record = record.ended(record.status, attempts=len(failures) + (record.status == "ok"))
    atomic_write_json(run_dir / RESULT_FILE, record.to_json())
    ledger.write("run_end", run_id=unit.run_id, status=record.status)


def run_grid(ctx: GridContext, grid: StudyGrid, *, limit: int | None = None, redo_infra_errors: bool = False) -> pd.DataFrame:
    """Run (or resume) every episode of ``grid`` and return the run table (also ``runs.parquet``).

    Parameters
    ----------
    ctx : GridContext
    grid : StudyGrid
    limit : int, optional
        Run at most this many pending episodes (for staged runs); the rest stay pending.
    redo_infra_errors : bool
        Also redo runs recorded as ``infra_error`` (after fixing what failed them).

    Raises
    ------
    FatalBackendError
        Stops the grid at once; finished runs stay, the interrupted ones are redone next time.
    """
    digest = claim_directory(ctx)
    worlds = materialise_worlds(ctx, grid)
    baselines = run_baselines(ctx, grid, worlds)
    pending = [u for u in grid.runs if not run_is_done(ctx.layout.run_dir(u.run_id), redo_infra_errors=redo_infra_errors)]
    if limit is not None:
        pending = pending[:limit]
    bar = tqdm(total=len(pending), desc="episodes", disable=not ctx.progress)  # this invocation's runs only
    stop = threading.Event()
    with EventLog(ctx.layout.ledger) as ledger, ThreadPoolExecutor(max_workers=ctx.concurrency) as pool:

        def task(unit) -> None:
            if stop.is_set():
                return
            try:
                _execute(ctx, unit, worlds[unit.world_id], grid.worlds[unit.world_id], digest, ledger)
            except FatalBackendError:
                stop.set()
                raise
            finally:
                bar.update(1)

        futures = [pool.submit(task, unit) for unit in pending]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for future in done:
            if future.exception() is not None:
                stop.set()
                for other in futures:
                    other.cancel()
                bar.close()
                raise future.exception()  # type: ignore[misc]
    bar.close()
    return collect_runs(ctx.out, grid, baselines)


def collect_runs(out: Path, grid: StudyGrid, baselines: pd.DataFrame) -> pd.DataFrame:
    """Gather every readable run record into ``runs.parquet`` (one :class:`~planted.records.RunRow` per run,
    in run order, with the world's truth labels and the same-world baseline claims joined on)."""
    layout = StudyLayout(out)
    rows = []
    for unit in grid.runs:
        try:
            rows.append(run_row(read_run_record(layout.result_file(unit.run_id))))
        except RunRecordError:  # missing or damaged: pending, redone by the next `planted run`
            continue
    runs = rows_frame(rows)
    if runs.empty:
        return runs
    truth = baselines.drop_duplicates("world_id").set_index("world_id")[["signal", "economic"]]
    runs = runs.join(truth, on="world_id")
    claims = baselines.pivot(index="world_id", columns="procedure", values="claim_5pct").add_prefix("baseline_")
    runs = runs.join(claims, on="world_id")
    atomic_write_parquet(StudyLayout(out).runs_table, runs)
    return runs


__all__ = ["GridContext", "StudyConfigMismatch", "collect_runs", "run_grid"]

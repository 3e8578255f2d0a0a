"""The resumable grid runner: worlds -> episodes in the sandbox -> evaluation -> baselines -> run table.

Output layout under ``OUT/<study>/``::

    study.json          the resolved configuration and its hash (a rerun with another one is refused)
    worlds/<world_id>/  each world's files (visible/ for the agent, sealed/ for evaluation)
    baselines.parquet   every baseline procedure on every world (decision p-values, truth labels)
    sealed/study_secret.json  the study's secret (world seeds; see planted.agents.secret)
    runs/<run_id>/      transcript.jsonl, final_model.py, evaluation.csv, result.json
                        attempts/<n>/: the files of earlier attempts of the run, kept
    ws/<random>/        each run's agent workspace (a random name: its path is visible to the agent)
    ledger.jsonl        append-only log of run starts and ends (informational)
    runs.parquet        one row per run, with the world's truth labels and the baselines' claims

A run counts as done exactly when its ``result.json`` exists with status ``ok`` (an agent outcome)
or ``infra_error`` (the host failed it ``1 + max_infra_retries`` times in a row: recorded with the
reason, never counted as an agent outcome, not redone unless asked); it is written atomically as
the run's last act. Anything else (no result, an interrupted run, a damaged transcript) is redone
on the same world, and the files of the earlier attempt are moved to ``attempts/<n>/`` first, so a
rerun of the same command does only what is missing, never duplicates a run and never loses a file.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
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
from planted.study_config import StudyConfig
from planted.worlds import World, WorldFileError, build, read_meta, write_world
from planted.worlds.files import VISIBLE_FILE

RESULT_FILE = "result.json"
ATTEMPTS_DIR = "attempts"
DONE_STATUSES = ("ok", "infra_error")
"""Statuses of a finished run: ``ok`` (an agent outcome) and ``infra_error`` (given up on; not an outcome)."""


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
    max_infra_retries: int = 2
    """Attempts after the first when a run fails for infrastructure reasons, before it is recorded as ``infra_error``."""

    @property
    def study(self) -> StudyConfig:
        """The study section of :attr:`config`, typed (checked when the configuration was composed)."""
        return StudyConfig.from_dict(self.config["study"], "study configuration")

    @property
    def settings(self) -> EpisodeSettings:
        return EpisodeSettings(budget=self.study.budget, refit_every=self.study.refit_every)


def code_version() -> str | None:
    """Git commit of the planted source tree, when it is a git checkout (else ``None``)."""
    root = Path(planted.__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def config_hash(config: dict[str, Any], prompts: Prompts) -> str:
    """SHA-256 of the resolved study + model configuration and the prompts file."""
    return sha256_bytes(canonical_json({"config": config, "prompts": prompts.sha256}).encode())


def _atomic_json(path: Path, payload: dict[str, Any]) -> None:
    partial = path.with_name(path.name + ".part")
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(payload, handle, indent=2, sort_keys=True, default=str, allow_nan=False)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)


def claim_directory(ctx: GridContext) -> str:
    """Create or verify ``study.json``; return the configuration hash."""
    ctx.out.mkdir(parents=True, exist_ok=True)
    digest = config_hash(ctx.config, ctx.prompts)
    manifest = ctx.out / "study.json"
    if manifest.is_file():
        recorded = json.loads(manifest.read_text())
        if recorded["config_hash"] != digest:
            raise StudyConfigMismatch(
                f"{ctx.out} holds runs of another configuration (hash {recorded['config_hash'][:12]} vs "
                f"{digest[:12]}); pass a new --out directory (or --new-dir) instead of mixing results"
            )
        return digest
    _atomic_json(manifest, {"config": ctx.config, "config_hash": digest, "prompts_sha256": ctx.prompts.sha256,
                            "prompts_version": ctx.prompts.version, "planted_version": planted.__version__})
    return digest


def materialise_worlds(ctx: GridContext, grid: StudyGrid) -> dict[str, World]:
    """Build every world of the grid and write its files (reusing files whose hash matches)."""
    worlds: dict[str, World] = {}
    for unit in tqdm(grid.worlds.values(), desc="worlds", disable=not ctx.progress):
        world = build(unit.spec, unit.seed, pool=ctx.study.pool_choice.load(ctx.factor_file), factor_file=ctx.factor_file)
        directory = ctx.out / "worlds" / unit.world_id
        try:
            recorded = read_meta(directory)["content_sha256"]
        except WorldFileError:  # missing or damaged files: (re)write them
            write_world(world, directory)
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
    path = ctx.out / "baselines.parquet"
    if path.is_file():
        table = pd.read_parquet(path)
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
    table = pd.concat(frames, ignore_index=True)
    partial = path.with_name(path.name + ".part")
    table.to_parquet(partial, index=False)
    partial.replace(path)
    return table


def run_status(run_dir: Path) -> str | None:
    """The status of a run's result (None without a readable result and an intact transcript)."""
    result = run_dir / RESULT_FILE
    if not result.is_file():
        return None
    try:
        status = json.loads(result.read_text()).get("status")
        if status == "ok":
            read_events(run_dir / "transcript.jsonl")
    except (ValueError, TranscriptError, FileNotFoundError):
        return None
    return status


def run_is_done(run_dir: Path, *, redo_infra_errors: bool = False) -> bool:
    """A run is done when its result says ``ok`` (with an intact transcript) or ``infra_error``."""
    status = run_status(run_dir)
    return status == "ok" or (status == "infra_error" and not redo_infra_errors)


def new_workspace(out: Path) -> Path:
    """A fresh agent workspace ``OUT/ws/<random>``: a name that reveals nothing about the world or the run.

    The sandbox mounts it at ``/workspace`` and its host path is readable inside the sandbox, so it
    is random (never derived from the run id, which names the cell's R2 and the framing).
    """
    while True:
        path = out / "ws" / secrets.token_hex(10)
        try:
            path.mkdir(parents=True)
        except FileExistsError:
            continue
        return path


def archive_attempt(run_dir: Path, out: Path) -> int | None:
    """Move the files of an unfinished attempt of a run to ``attempts/<n>/``; return n (None: nothing there).

    The attempt's workspace (named in its ``workspace.txt``) is removed: only the record and the
    transcript are kept.
    """
    files = [p for p in run_dir.iterdir() if p.name != ATTEMPTS_DIR] if run_dir.is_dir() else []
    if not files:
        return None
    pointer = run_dir / "workspace.txt"
    if pointer.is_file():
        workspace = out / "ws" / pointer.read_text().strip()
        if workspace.parent == out / "ws" and workspace.is_dir():
            remove_tree(workspace)  # the agent's tree: however deep, no link followed
    attempts = run_dir / ATTEMPTS_DIR
    attempts.mkdir(exist_ok=True)
    number = 1 + max((int(p.name) for p in attempts.iterdir() if p.name.isdigit()), default=0)
    target = attempts / str(number)
    target.mkdir()
    for path in files:
        path.rename(target / path.name)
    return number


def _attempt(ctx: GridContext, unit, world: World, base: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """One attempt of a run: its record (status ``ok``) or the infrastructure error (status ``error``)."""
    workspace = new_workspace(ctx.out)
    (run_dir / "workspace.txt").write_text(workspace.name + "\n")
    base = base | {"workspace": str(workspace.relative_to(ctx.out))}
    try:
        record = run_episode(
            backend=ctx.backend, prompts=ctx.prompts, framing=unit.framing, visible=world.visible, test=world.test,
            data_file=ctx.out / "worlds" / unit.world_id / VISIBLE_FILE, run_dir=run_dir, workspace=workspace,
            sandbox_factory=ctx.sandbox_factory, evaluator=ctx.evaluator, settings=ctx.settings,
        )
    except FatalBackendError:
        raise
    except Exception as exc:  # infrastructure failure (never the agent's): recorded, retried
        return base | {"status": "error", "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    return base | {"status": "ok", "error": None} | record


def _execute(ctx: GridContext, unit, world: World, world_unit: WorldUnit, digest: str, ledger: EventLog) -> None:
    run_dir = ctx.out / "runs" / unit.run_id
    earlier = archive_attempt(run_dir, ctx.out)
    if earlier is not None:
        tqdm.write(f"{unit.run_id}: an unfinished earlier attempt is kept in {run_dir / ATTEMPTS_DIR / str(earlier)}")
    run_dir.mkdir(parents=True, exist_ok=True)
    ledger.write("run_start", run_id=unit.run_id)
    base = {
        "run_id": unit.run_id, "world_id": unit.world_id, "framing": unit.framing, "replicate": unit.replicate,
        "group": unit.group, "spec": world_unit.spec.to_dict(), "seed": world.meta["seed"],
        "planted_column": world.planted_column, "model": ctx.config["model"].get("model_id"),
        "backend": ctx.config["model"].get("backend"), "sandboxed": ctx.sandboxed, "config_hash": digest,
        "planted_version": planted.__version__, "code_version": code_version(),
        "analysis_label": ctx.analysis_label,
    }
    failures: list[str] = []
    try:
        for attempt in range(1 + ctx.max_infra_retries):
            if attempt:
                archive_attempt(run_dir, ctx.out)
            payload = _attempt(ctx, unit, world, base, run_dir)
            if payload["status"] == "ok":
                break
            failures.append(payload["error"])
            ledger.write("run_attempt_failed", run_id=unit.run_id, attempt=attempt + 1, error=payload["error"])
        else:
            payload = payload | {"status": "infra_error", "attempt_errors": failures}
            tqdm.write(f"{unit.run_id}: gave up after {len(failures)} infrastructure failures: {failures[-1]}")
    except FatalBackendError:
        ledger.write("run_interrupted", run_id=unit.run_id)
        raise
    _atomic_json(run_dir / RESULT_FILE, payload | {"attempts": len(failures) + (payload["status"] == "ok")})
    ledger.write("run_end", run_id=unit.run_id, status=payload["status"])


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
    pending = [u for u in grid.runs if not run_is_done(ctx.out / "runs" / u.run_id, redo_infra_errors=redo_infra_errors)]
    if limit is not None:
        pending = pending[:limit]
    bar = tqdm(total=len(grid.runs), initial=len(grid.runs) - len(pending), desc="episodes", disable=not ctx.progress)
    stop = threading.Event()
    with EventLog(ctx.out / "ledger.jsonl") as ledger, ThreadPoolExecutor(max_workers=ctx.concurrency) as pool:

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
    """Gather every finished run's result into ``runs.parquet`` (one row per run, in run order)."""
    rows = []
    for unit in grid.runs:
        path = out / "runs" / unit.run_id / RESULT_FILE
        if not path.is_file():
            continue
        result = json.loads(path.read_text())
        evaluation = result.get("evaluation") or {}
        usage = result.get("usage") or {}
        spec = result["spec"]
        rows.append(
            {
                "run_id": unit.run_id, "world_id": unit.world_id, "group": unit.group, "framing": unit.framing,
                "replicate": unit.replicate, "status": result["status"], "error": result.get("error"),
                **{k: spec.get(k) for k in ("family", "r2", "phi", "rho", "shocks", "factor")},
                "seed_entropy": json.dumps(result["seed"]["entropy"]), "seed_spawn_key": json.dumps(result["seed"]["spawn_key"]),
                "planted_column": result.get("planted_column"), "model": result.get("model"),
                "backend": result.get("backend"), "sandboxed": result.get("sandboxed"),
                "verdict": result.get("verdict"), "claim": result.get("claim"), "probability": result.get("probability"),
                "prior_verdict": result.get("prior_verdict"), "prior_probability": result.get("prior_probability"),
                "predictors": json.dumps(result.get("predictors")), "n_specs": result.get("n_specs"),
                "budget_used": result.get("budget_used"), "invalid_calls": result.get("invalid_calls"),
                "rejected_submissions": result.get("rejected_submissions"),
                "evaluable": evaluation.get("evaluable"), "test_oos_r2": evaluation.get("oos_r2"),
                "holdout_cw_stat": evaluation.get("cw_stat"), "holdout_cw_p": evaluation.get("cw_pvalue"),
                "evaluation_error": evaluation.get("error"),
                "input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens"),
                "reasoning_tokens": usage.get("reasoning_tokens"), "cached_tokens": usage.get("cached_tokens"),
                "cost_usd": usage.get("cost_usd"), "wall_seconds": result.get("wall_seconds"),
                "config_hash": result.get("config_hash"), "code_version": result.get("code_version"),
                "analysis_label": result.get("analysis_label"),
            }
        )
    runs = pd.DataFrame(rows)
    if runs.empty:
        return runs
    truth = baselines.drop_duplicates("world_id").set_index("world_id")[["signal", "economic"]]
    runs = runs.join(truth, on="world_id")
    claims = baselines.pivot(index="world_id", columns="procedure", values="claim_5pct").add_prefix("baseline_")
    runs = runs.join(claims, on="world_id")
    partial = out / "runs.parquet.part"
    runs.to_parquet(partial, index=False)
    partial.replace(out / "runs.parquet")
    return runs


__all__ = ["GridContext", "StudyConfigMismatch", "collect_runs", "run_grid"]

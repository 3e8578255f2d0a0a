"""From a command line to a running grid: compose the configuration, check everything, then run.

:func:`prepare_run` does every check that can fail before any world is built or any request is sent
(the study and model exist, the API key is set, bubblewrap works, the output directory holds the
same configuration), and returns a :class:`PreparedRun` whose :meth:`~PreparedRun.plan` prints the
plan and cost estimate and whose :meth:`~PreparedRun.execute` runs the grid and prints the summary.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from planted.agents.evaluator import evaluate
from planted.agents.grid import GridContext, StudyConfigMismatch, config_hash, run_grid
from planted.agents.prompts import load_prompts
from planted.agents.registry import make_backend
from planted.agents.sandbox import BwrapSandbox, SandboxLimits, UnsafeLocalSandbox
from planted.agents.secret import parse_secret, study_secret
from planted.agents.study import StudyGrid, study_grid
from planted.config import compose_study
from planted.study_config import StudyConfig
from planted.study_layout import StudyLayout
from planted.prereg import analysis_label, committed_secret, revealed_secret_file
from planted.project import Project


@dataclass
class PreparedRun:
    """A checked grid, ready to run."""

    context: GridContext
    grid: StudyGrid
    runnable: bool = True
    """False for a dry run, whose grid has a placeholder secret."""

    def plan(self) -> str:
        """Planned runs, what is already done, and a cost estimate from logged usage and the prices."""
        from planted.agents.grid import run_is_done

        done = sum(run_is_done(self.context.layout.run_dir(r.run_id)) for r in self.grid.runs)
        pending = len(self.grid.runs) - done
        lines = [
            f"study {self.grid.name}: {len(self.grid.runs)} runs on {len(self.grid.worlds)} worlds; "
            f"{done} done, {pending} to run",
            f"model {self.context.config['model'].get('model_id')} ({self.context.config['model'].get('backend')}), "
            f"concurrency {self.context.concurrency}, sandboxed={self.context.sandboxed}",
            self.label_line(),
            f"output: {self.context.out}; configuration from {self.context.project}",
            self.pool_line(),
        ]
        lines.append(cost_estimate(self.context.out, pending, self.context.config["model"]))
        return "\n".join(lines)

    def label_line(self) -> str:
        """The runs' label and, when exploratory, why."""
        reason = self.context.analysis_reason
        return f"analysis label: {self.context.analysis_label}" + (f" ({reason})" if reason else "")

    def pool_line(self) -> str:
        """The study's shock pool, as every output states it."""
        pool = self.context.study.pool_choice.load(self.context.factor_file)
        return f"shock pool: {pool.source}, {pool.size} residuals (sha256 {pool.sha256[:12]})"

    def execute(self, limit: int | None = None, redo_infra_errors: bool = False) -> str:
        """Run (or resume) the grid; return the summary table and where the files are."""
        if not self.runnable:
            raise RuntimeError("a dry-run plan cannot be executed: prepare the run without dry_run")
        from planted.analysis.tables import claim_rates_by_world  # the summary is Table D.1 on the runs logged

        started = time.monotonic()
        runs = run_grid(self.context, self.grid, limit=limit, redo_infra_errors=redo_infra_errors)
        elapsed = time.monotonic() - started
        procedures = list(self.context.study.procedures)
        shown = [p for p in ("hac_holm", "combination", "oracle") if p in procedures]
        lines = [f"study {self.grid.name}: {len(runs)} of {len(self.grid.runs)} runs logged", self.label_line(),
                 self.pool_line()]
        if not runs.empty:
            errors = int((runs["status"] == "infra_error").sum())
            table = claim_rates_by_world(runs, shown)
            lines.append(f"{table.title} (the agent next to {', '.join(shown)}):")
            lines.append(table.formatted().to_string(index=False))
            if errors:
                lines.append(f"{errors} runs failed for infrastructure reasons on every attempt (not agent outcomes; "
                             "their result.json says why); fix the cause, then rerun with --redo-infra-errors")
        out = self.context.out
        lines.append(spending_line(runs, elapsed))
        lines += [
            f"run table:  {out / 'runs.parquet'}",
            f"baselines:  {out / 'baselines.parquet'}",
            f"episodes:   {out / 'runs'}/<run_id>/ (transcript.jsonl, result.json, final_model.py)",
            f"worlds:     {out / 'worlds'}/<world_id>/ (visible/ for the agent, sealed/)",
        ]
        return "\n".join(lines)


def spending_line(runs: pd.DataFrame, elapsed: float) -> str:
    """Tokens, cost and agent wall time of the logged runs, and this invocation's wall time."""
    def total(column: str) -> float:
        return float(pd.to_numeric(runs[column], errors="coerce").sum()) if column in runs.columns and len(runs) else 0.0

    return (f"spent on the {len(runs)} logged runs: {total('input_tokens'):,.0f} input and {total('output_tokens'):,.0f} "
            f"output tokens, ${total('cost_usd'):.2f}, {total('wall_seconds') / 60:.1f} episode-minutes; this invocation "
            f"took {elapsed / 60:.1f} minutes")


def cost_estimate(out: Path, pending: int, model: dict[str, Any]) -> str:
    """Cost estimate of the pending runs from the mean cost of the runs already logged in ``out``."""
    path = StudyLayout(out).runs_table
    if path.is_file():
        logged = pd.read_parquet(path)
        logged = logged[logged["status"] == "ok"]
        if len(logged) and logged["cost_usd"].notna().any():
            mean = float(logged["cost_usd"].mean())
            return (
                f"cost: ${logged['cost_usd'].sum():.2f} so far over {len(logged)} runs; estimate for the "
                f"{pending} pending runs: ${mean * pending:.2f} (mean ${mean:.3f} per run, prices as of "
                f"{model.get('prices', {}).get('as_of', '?')})"
            )
    prices = model.get("prices", {})
    return (
        f"cost: no logged runs yet to estimate from; prices per million tokens: input "
        f"${prices.get('input_per_mtok', 0)}, output ${prices.get('output_per_mtok', 0)} (as of {prices.get('as_of', '?')})"
    )


def _fresh_directory(base: Path) -> Path:
    for k in range(2, 1000):
        candidate = base.with_name(f"{base.name}-{k}")
        if not candidate.exists():
            return candidate
    raise StudyConfigMismatch(f"no free directory next to {base}")


def prepare_run(
    *,
    study: str,
    model: str,
    out: Path,
    concurrency: int | None = None,
    unsafe_no_sandbox: bool = False,
    new_dir: bool = False,
    factor_file: Path | None = None,
    base_url: str | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    progress: bool = True,
    sandbox_limits: SandboxLimits | None = None,
    exploratory: bool = False,
    dry_run: bool = False,
    max_infra_retries: int = 2,
    project: Project | None = None,
    base_url_is_override: bool = True,
) -> PreparedRun:
    """Compose and check a study run; nothing is built or sent before every check has passed.

    Raises
    ------
    planted.config.ConfigError
        Unknown study, model or override.
    planted.agents.registry.MissingAPIKeyError
        The model's API key is not in the environment.
    planted.agents.sandbox.SandboxUnavailableError
        bubblewrap is missing or cannot start a sandbox (and ``unsafe_no_sandbox`` is not set).
    planted.agents.grid.StudyConfigMismatch
        The output directory holds another configuration (and ``new_dir`` is not set).
    planted.prereg.PreregistrationError
        The study is frozen and its manifest does not verify (and ``exploratory`` is not set).

    planted.agents.secret.StudySecretError
        A frozen study whose committed secret is missing or does not match.

    Notes
    -----
    A run is ``confirmatory`` only for a frozen study whose manifest is committed under its tag in
    the project and verifies, without overrides and without ``exploratory``; everything else is
    labelled ``exploratory`` in every record, with the reason (:func:`planted.prereg.analysis_label`).
    Studies, models and prompts are resolved in ``project`` (default: the current directory's)
    first, then among the shipped templates.
    World seeds need the study's secret (:mod:`planted.agents.secret`): a frozen study's secret is
    the one committed by its manifest (or its revealed file); an unfrozen study's is created in
    ``OUT/<study>/sealed/`` on first use. ``dry_run`` creates nothing: its grid has a placeholder
    secret (counts and run order do not depend on the secret).
    """
    project = project if project is not None else Project.find()
    config = compose_study(study, model, overrides, project=project)
    settings = StudyConfig.from_dict(config["study"], study)
    if sandbox_limits is None:
        sandbox_limits = limits_from_config(settings.sandbox)
    pool = settings.pool_choice.load(factor_file)  # a 5-factor pool without --path fails now, before any work
    label = analysis_label(study, exploratory=exploratory, project=project, overrides=bool(overrides), model=model,
                           pool_sha256=pool.sha256, base_url=base_url if base_url_is_override else None,
                           sandboxed=not unsafe_no_sandbox)
    backend = make_backend(config["model"], base_url=base_url)
    prompts_file = project.config_file(None, "prompts.yaml")
    prompts = load_prompts(prompts_file.path if prompts_file is not None else None)
    sandbox_class = UnsafeLocalSandbox if unsafe_no_sandbox else BwrapSandbox
    with tempfile.TemporaryDirectory() as probe:
        sandbox_class(Path(probe) / "workspace", None, sandbox_limits)  # fails now, not mid-grid
    name = settings.name
    target = Path(out) / name
    manifest = StudyLayout(target).study_file
    if manifest.is_file() and json.loads(manifest.read_text())["config_hash"] != config_hash(config, prompts):
        if not new_dir:
            raise StudyConfigMismatch(
                f"{target} holds runs of another configuration; pass --new-dir to write to a fresh directory "
                "next to it, or choose another --out"
            )
        target = _fresh_directory(target)
    frozen = None if study.endswith((".yaml", ".yml")) else study
    if dry_run:
        secret = 0
    else:
        published = settings.secret
        secret = study_secret(target, name, committed_sha256=committed_secret(frozen, project) if frozen else None,
                              revealed=revealed_secret_file(frozen, project) if frozen else None,
                              published=None if published is None else parse_secret(published, f"study {name}"))
    grid = study_grid(settings, secret)
    context = GridContext(
        out=target, config=config, backend=backend, prompts=prompts,
        sandbox_factory=partial(_make_sandbox, sandbox_class, sandbox_limits),
        evaluator=partial(_evaluate, unsafe_no_sandbox=unsafe_no_sandbox, refit_every=settings.refit_every),
        sandboxed=not unsafe_no_sandbox, concurrency=concurrency or int(config["model"].get("concurrency", 1)),
        factor_file=str(factor_file) if factor_file else None, progress=progress, analysis_label=label.label,
        analysis_reason=label.reason, project=project.describe(),
        max_infra_retries=max_infra_retries,
    )
    return PreparedRun(context=context, grid=grid, runnable=not dry_run)


def limits_from_config(given: dict[str, Any]) -> SandboxLimits:
    """The sandbox limits of a study: the defaults of :class:`SandboxLimits`, overridden by its ``sandbox`` mapping.

    Raises
    ------
    planted.config.ConfigError
        An unknown key (the valid ones are listed) or an invalid value.
    """
    from dataclasses import fields

    from planted.config import ConfigError

    valid = [f.name for f in fields(SandboxLimits)]
    unknown = sorted(set(given) - set(valid))
    if unknown:
        raise ConfigError(f"study.sandbox has unknown keys {unknown}; the limits are {', '.join(valid)}")
    try:
        return SandboxLimits(**given)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"study.sandbox: {exc}") from None


def _make_sandbox(sandbox_class, limits: SandboxLimits, workspace: Path, data_file: Path):
    return sandbox_class(workspace, data_file, limits)


def _evaluate(model_file: Path, train: pd.DataFrame, test: pd.DataFrame, *, unsafe_no_sandbox: bool, refit_every: int):
    return evaluate(model_file, train, test, refit_every=refit_every, unsafe_no_sandbox=unsafe_no_sandbox)

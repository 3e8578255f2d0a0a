"""The run table's row: one typed record between the grid that writes ``runs.parquet`` and the analyses.

:class:`RunRow` names every column the grid writes for a run (before the world's truth labels and
the same-world baseline claims are joined on, ``signal``, ``economic`` and ``baseline_<procedure>``),
with its type; :func:`run_row` is the one place that turns a run's ``result.json`` into a row, and
:data:`RUNS_SCHEMA_VERSION` is stamped into every table so that a reader can refuse a table it
does not understand with a message naming both versions. Test fixtures build their tables from
:func:`run_columns`, never from a copy of the list.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Iterable

from planted.run_record import RunRecord, SchemaVersionError

RUNS_SCHEMA_VERSION = 3
"""Version of ``runs.parquet``: 1 had no ``schema_version`` column (planted 0.1 before issue #11); 2 adds it;
3 adds ``analysis_reason`` (issue #12)."""


@dataclass(frozen=True)
class RunRow:
    """One run as ``runs.parquet`` holds it (the grid's columns; truth labels and baseline claims are joined after)."""

    run_id: str
    world_id: str
    group: str
    framing: str
    replicate: int
    status: str
    """``ok`` (an agent outcome) or ``infra_error`` (never an agent outcome)."""
    error: str | None
    family: str
    r2: float | None
    phi: float | None
    rho: float | None
    shocks: str | None
    factor: str | None
    seed_entropy: str
    """JSON of the world seed's entropy (``[study seed, secret]``)."""
    seed_spawn_key: str
    planted_column: str | None
    model: str | None
    backend: str | None
    sandboxed: bool | None
    verdict: str | None
    claim: bool | None
    probability: float | None
    prior_verdict: str | None
    prior_probability: float | None
    predictors: str
    """JSON list of the submitted predictors."""
    n_specs: int | None
    budget_used: int | None
    invalid_calls: int | None
    rejected_submissions: int | None
    evaluable: bool | None
    test_oos_r2: float | None
    holdout_cw_stat: float | None
    holdout_cw_p: float | None
    evaluation_error: str | None
    input_tokens: int | None
    output_tokens: int | None
    reasoning_tokens: int | None
    cached_tokens: int | None
    cost_usd: float | None
    wall_seconds: float | None
    config_hash: str | None
    code_version: str | None
    analysis_label: str | None
    analysis_reason: str | None
    """Why the run is exploratory (None when confirmatory)."""
    schema_version: int = RUNS_SCHEMA_VERSION


@dataclass(frozen=True)
class BaselineRow:
    """One procedure's decision on one world, as ``baselines.parquet`` holds it.

    The columns of :meth:`planted.baselines.procedures.ProcedureResult.to_frame` plus the 5% claim
    and the world's truth labels (``signal``: a planted predictor; ``economic``: the oracle's
    test-window OOS R2 is positive).
    """

    world_id: str
    procedure: str
    kind: str
    """``prespecified`` or ``exploratory`` (the paper's two kinds of baseline)."""
    decision_p: float
    chosen: str
    statistic: float
    test_oos_r2: float
    test_cw_stat: float
    test_cw_p: float
    claim_5pct: bool
    signal: bool
    economic: bool


def baseline_columns() -> list[str]:
    """The columns of ``baselines.parquet``, in order."""
    return [f.name for f in fields(BaselineRow)]


def baselines_frame(table: Any) -> Any:
    """``table`` with exactly the columns of :class:`BaselineRow`, in order (``ValueError`` naming any missing)."""
    missing = [c for c in baseline_columns() if c not in table.columns]
    if missing:
        raise ValueError(f"a baselines table lacks the columns {', '.join(missing)}")
    return table[baseline_columns()]


def run_columns() -> list[str]:
    """The grid's columns of ``runs.parquet``, in order."""
    return [f.name for f in fields(RunRow)]


def run_row(record: RunRecord) -> RunRow:
    """The row of a run from its record (the one mapping from ``result.json`` to the table)."""
    identity, outcome = record.identity, record.outcome
    evaluation = outcome.evaluation if outcome else None
    usage = outcome.usage if outcome else None
    spec = identity.spec
    return RunRow(
        run_id=identity.run_id, world_id=identity.world_id, group=identity.group, framing=identity.framing,
        replicate=identity.replicate, status=record.status, error=record.error,
        family=spec["family"], r2=spec.get("r2"), phi=spec.get("phi"), rho=spec.get("rho"), shocks=spec.get("shocks"),
        factor=spec.get("factor"),
        seed_entropy=json.dumps(identity.seed["entropy"]), seed_spawn_key=json.dumps(identity.seed["spawn_key"]),
        planted_column=identity.planted_column, model=identity.model, backend=identity.backend,
        sandboxed=identity.sandboxed, verdict=outcome.verdict if outcome else None,
        claim=outcome.claim if outcome else None, probability=outcome.probability if outcome else None,
        prior_verdict=outcome.prior_verdict if outcome else None,
        prior_probability=outcome.prior_probability if outcome else None,
        predictors=json.dumps(None if outcome is None or outcome.predictors is None else list(outcome.predictors)),
        n_specs=outcome.n_specs if outcome else None, budget_used=outcome.budget_used if outcome else None,
        invalid_calls=outcome.invalid_calls if outcome else None,
        rejected_submissions=outcome.rejected_submissions if outcome else None,
        evaluable=evaluation.evaluable if evaluation else None, test_oos_r2=evaluation.oos_r2 if evaluation else None,
        holdout_cw_stat=evaluation.cw_stat if evaluation else None,
        holdout_cw_p=evaluation.cw_pvalue if evaluation else None,
        evaluation_error=evaluation.error if evaluation else None,
        input_tokens=usage.input_tokens if usage else None, output_tokens=usage.output_tokens if usage else None,
        reasoning_tokens=usage.reasoning_tokens if usage else None, cached_tokens=usage.cached_tokens if usage else None,
        cost_usd=usage.cost_usd if usage else None, wall_seconds=outcome.wall_seconds if outcome else None,
        config_hash=identity.config_hash, code_version=identity.code_version, analysis_label=identity.analysis_label,
        analysis_reason=identity.analysis_reason,
    )


def rows_frame(rows: Iterable[RunRow]) -> Any:
    """A DataFrame of rows, with every column of :class:`RunRow` even when there are none."""
    import pandas as pd

    return pd.DataFrame([asdict(r) for r in rows], columns=run_columns())


def check_runs_schema(runs: Any, path: Path) -> Any:
    """The table as this version reads it; :class:`SchemaVersionError` when it is newer than this version.

    Older tables are read as they are, with the columns later versions added set to missing
    (version 2 added ``schema_version``, version 3 ``analysis_reason``).
    """
    version = int(runs["schema_version"].max()) if "schema_version" in runs.columns and len(runs) else 1
    if version > RUNS_SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{path} has run-table schema version {version}, newer than the {RUNS_SCHEMA_VERSION} this planted reads; "
            "upgrade planted (or rerun `planted run` with this version into a new --out directory)"
        )
    if "schema_version" not in runs.columns:
        runs = runs.assign(schema_version=1)
    return runs if "analysis_reason" in runs.columns else runs.assign(analysis_reason=None)


__all__ = ["RUNS_SCHEMA_VERSION", "BaselineRow", "RunRow", "baseline_columns", "check_runs_schema", "rows_frame", "run_columns", "run_row"]

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

RUNS_SCHEMA_VERSION = 2
"""Version of ``runs.parquet``: 1 had no ``schema_version`` column (planted 0.1 before issue #11); 2 adds it."""
RESULT_SCHEMA_VERSION = 2
"""Version of a run's ``result.json``: 2 adds ``schema_version``, ``sandbox``, ``attempts`` and the
``infra_error`` status (issue #10); 1 (no ``schema_version`` key) is read the same way."""


class SchemaVersionError(ValueError):
    """A table written by another version of planted than this one reads."""


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
    schema_version: int = RUNS_SCHEMA_VERSION


def run_columns() -> list[str]:
    """The grid's columns of ``runs.parquet``, in order."""
    return [f.name for f in fields(RunRow)]


def run_row(result: dict[str, Any], source: Path | str = "result.json") -> RunRow:
    """The row of a run from its ``result.json`` (the one mapping from the record to the table).

    Raises
    ------
    SchemaVersionError
        A record written by a newer planted (``source`` names the file in the message).
    """
    version = int(result.get("schema_version", 1))
    if version > RESULT_SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{source} has run-record schema version {version}, newer than the {RESULT_SCHEMA_VERSION} this planted reads; "
            "upgrade planted, or rerun into a new --out directory"
        )
    evaluation = result.get("evaluation") or {}
    usage = result.get("usage") or {}
    spec = result["spec"]
    return RunRow(
        run_id=result["run_id"], world_id=result["world_id"], group=result["group"], framing=result["framing"],
        replicate=int(result["replicate"]), status=result["status"], error=result.get("error"),
        family=spec["family"], r2=spec.get("r2"), phi=spec.get("phi"), rho=spec.get("rho"), shocks=spec.get("shocks"),
        factor=spec.get("factor"),
        seed_entropy=json.dumps(result["seed"]["entropy"]), seed_spawn_key=json.dumps(result["seed"]["spawn_key"]),
        planted_column=result.get("planted_column"), model=result.get("model"), backend=result.get("backend"),
        sandboxed=result.get("sandboxed"), verdict=result.get("verdict"), claim=result.get("claim"),
        probability=result.get("probability"), prior_verdict=result.get("prior_verdict"),
        prior_probability=result.get("prior_probability"), predictors=json.dumps(result.get("predictors")),
        n_specs=result.get("n_specs"), budget_used=result.get("budget_used"), invalid_calls=result.get("invalid_calls"),
        rejected_submissions=result.get("rejected_submissions"),
        evaluable=evaluation.get("evaluable"), test_oos_r2=evaluation.get("oos_r2"),
        holdout_cw_stat=evaluation.get("cw_stat"), holdout_cw_p=evaluation.get("cw_pvalue"),
        evaluation_error=evaluation.get("error"),
        input_tokens=usage.get("input_tokens"), output_tokens=usage.get("output_tokens"),
        reasoning_tokens=usage.get("reasoning_tokens"), cached_tokens=usage.get("cached_tokens"),
        cost_usd=usage.get("cost_usd"), wall_seconds=result.get("wall_seconds"), config_hash=result.get("config_hash"),
        code_version=result.get("code_version"), analysis_label=result.get("analysis_label"),
    )


def rows_frame(rows: Iterable[RunRow]) -> Any:
    """A DataFrame of rows, with every column of :class:`RunRow` even when there are none."""
    import pandas as pd

    return pd.DataFrame([asdict(r) for r in rows], columns=run_columns())


def check_runs_schema(runs: Any, path: Path) -> Any:
    """The table as this version reads it; :class:`SchemaVersionError` when it is newer than this version.

    A version-1 table (no ``schema_version`` column) is read as it is: version 2 only added the column.
    """
    version = int(runs["schema_version"].max()) if "schema_version" in runs.columns and len(runs) else 1
    if version > RUNS_SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{path} has run-table schema version {version}, newer than the {RUNS_SCHEMA_VERSION} this planted reads; "
            "upgrade planted (or rerun `planted run` with this version into a new --out directory)"
        )
    return runs if "schema_version" in runs.columns else runs.assign(schema_version=1)


__all__ = ["RESULT_SCHEMA_VERSION", "RUNS_SCHEMA_VERSION", "RunRow", "SchemaVersionError", "check_runs_schema", "rows_frame", "run_columns",
           "run_row"]

"""A run's ``result.json`` as one frozen, typed record, with its one path to and from JSON.

The grid builds a :class:`RunRecord` for every run (what the run is, :class:`RunIdentity`; how it
ended, ``status``; and, for an agent outcome, the :class:`EpisodeOutcome` that
:func:`planted.agents.episode.run_episode` returns) and writes it with :meth:`RunRecord.to_json`;
everything that reads a run (the grid's resume check, the run table, the analysis loader) goes
through :func:`read_run_record`, which refuses a damaged or newer record with one line naming the
file and what to do.

The JSON layout is flat (the identity, the status and the outcome's fields side by side, the
evaluation and the token usage nested), the layout of schema version 2; version 1 records (no
``schema_version``, ``sandbox`` or ``attempts`` key) read the same way.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from planted.agents.backend import Usage

RESULT_SCHEMA_VERSION = 2
"""Version of a run's ``result.json``: 2 adds ``schema_version``, ``sandbox``, ``attempts`` and the
``infra_error`` status (issue #10); 1 (no ``schema_version`` key) is read the same way."""

RUN_STATUSES = ("ok", "error", "infra_error")
"""``ok``: an agent outcome; ``error``: one attempt failed on the host (retried); ``infra_error``: every
attempt failed on the host (recorded with the reasons, never an agent outcome)."""


class SchemaVersionError(ValueError):
    """A record or table written by another version of planted than this one reads."""


class RunRecordError(ValueError):
    """A ``result.json`` that cannot be read (truncated, not a run record); the message names the file."""


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None  # NaN (not evaluable) -> null


@dataclass(frozen=True)
class EvaluationSummary:
    """The scalar results of the sealed-window evaluation (the forecasts themselves are ``evaluation.csv``).

    ``oos_r2`` is the test-window out-of-sample R2 against the expanding historical mean and
    ``cw_pvalue`` the one-sided Clark-West p-value (:mod:`planted.agents.evaluator`); both are
    ``None`` when the model could not be evaluated.
    """

    evaluable: bool
    error: str | None
    oos_r2: float | None
    cw_stat: float | None
    cw_pvalue: float | None
    n_forecasts: int = 0
    refit_every: int = 0
    sandboxed: bool = False
    wall_seconds: float = 0.0

    @classmethod
    def of(cls, evaluation: Any) -> "EvaluationSummary":
        """The summary of an :class:`~planted.agents.evaluator.Evaluation` (NaN becomes ``None``)."""
        return cls(
            evaluable=bool(evaluation.evaluable), error=evaluation.error, oos_r2=_finite(evaluation.oos_r2),
            cw_stat=_finite(evaluation.cw_stat), cw_pvalue=_finite(evaluation.cw_pvalue),
            n_forecasts=int(evaluation.n_forecasts), refit_every=int(evaluation.refit_every),
            sandboxed=bool(evaluation.sandboxed), wall_seconds=round(float(evaluation.wall_seconds), 3),
        )

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "EvaluationSummary":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class EpisodeOutcome:
    """What one episode produced: the submission, the protocol's counts, the evaluation, the cost.

    ``record`` is the protocol's full log of the episode (prior, every ``record_spec`` entry, the
    submission; :meth:`planted.agents.protocol.EpisodeRecord.to_dict`) and ``sandbox`` the sandbox's
    own description (kind, limits, seccomp, the agent's package versions).
    """

    stop: str
    """``submitted``, ``no_tool_calls``, ``max_turns`` or ``budget``: why the episode ended."""
    verdict: str | None
    claim: bool
    probability: float | None
    rationale: str | None
    predictors: tuple[str, ...] | None
    prior_verdict: str | None
    prior_probability: float | None
    n_specs: int
    budget_used: int
    invalid_calls: int
    rejected_submissions: int
    limit_hits: tuple[str, ...]
    tool_calls: int
    final_model_sha256: str | None
    evaluation: EvaluationSummary | None
    usage: Usage
    served_models: tuple[str, ...]
    wall_seconds: float
    sandbox: Mapping[str, Any] | None = None
    record: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data |= {"predictors": None if self.predictors is None else list(self.predictors),
                 "limit_hits": list(self.limit_hits), "served_models": list(self.served_models),
                 "evaluation": None if self.evaluation is None else asdict(self.evaluation), "usage": asdict(self.usage)}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "EpisodeOutcome":
        usage_fields = {f.name for f in fields(Usage)}
        evaluation = data.get("evaluation")
        predictors = data.get("predictors")
        return cls(
            stop=data.get("stop", "submitted"), verdict=data.get("verdict"), claim=bool(data.get("claim")),
            probability=data.get("probability"), rationale=data.get("rationale"),
            predictors=None if predictors is None else tuple(predictors),
            prior_verdict=data.get("prior_verdict"), prior_probability=data.get("prior_probability"),
            n_specs=int(data.get("n_specs") or 0), budget_used=int(data.get("budget_used") or 0),
            invalid_calls=int(data.get("invalid_calls") or 0), rejected_submissions=int(data.get("rejected_submissions") or 0),
            limit_hits=tuple(data.get("limit_hits") or ()), tool_calls=int(data.get("tool_calls") or 0),
            final_model_sha256=data.get("final_model_sha256"),
            evaluation=None if evaluation is None else EvaluationSummary.from_json(evaluation),
            usage=Usage(**{k: v for k, v in (data.get("usage") or {}).items() if k in usage_fields}),
            served_models=tuple(data.get("served_models") or ()), wall_seconds=float(data.get("wall_seconds") or 0.0),
            sandbox=data.get("sandbox"), record=data.get("record") or {},
        )


@dataclass(frozen=True)
class RunIdentity:
    """What a run is, fixed before it starts: its cell, world, framing, replicate, model and code."""

    run_id: str
    world_id: str
    framing: str
    replicate: int
    group: str
    spec: Mapping[str, Any]
    """The world's :meth:`~planted.worlds.spec.WorldSpec.to_dict`."""
    seed: Mapping[str, Any]
    """The world seed's ``entropy`` (``[study seed, secret]``) and ``spawn_key``."""
    planted_column: str | None
    model: str | None
    backend: str | None
    sandboxed: bool | None
    config_hash: str | None
    planted_version: str | None
    code_version: str | None
    analysis_label: str | None
    """``confirmatory`` (a frozen study whose manifest verified) or ``exploratory``."""
    analysis_reason: str | None = None
    """Why the run is exploratory (None when confirmatory; absent before planted 0.2)."""


@dataclass(frozen=True)
class RunRecord:
    """A run's ``result.json``: its identity, how it ended and, for status ``ok``, the episode's outcome."""

    identity: RunIdentity
    status: str
    error: str | None = None
    outcome: EpisodeOutcome | None = None
    workspace: str | None = None
    """The attempt's workspace, relative to the study directory (``ws/<random>``)."""
    attempts: int | None = None
    traceback: str | None = None
    attempt_errors: tuple[str, ...] = ()
    schema_version: int = RESULT_SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.status not in RUN_STATUSES:
            raise ValueError(f"run status {self.status!r} is not one of {', '.join(RUN_STATUSES)}")

    def ended(self, status: str, **changes: Any) -> "RunRecord":
        """This record with another status (and any other fields changed)."""
        return replace(self, status=status, **changes)

    def to_json(self) -> dict[str, Any]:
        """The JSON object written as ``result.json`` (flat: identity, status, outcome side by side)."""
        data = asdict(self.identity) | {"schema_version": self.schema_version, "workspace": self.workspace,
                                        "status": self.status, "error": self.error}
        if self.traceback is not None:
            data["traceback"] = self.traceback
        if self.outcome is not None:
            data |= self.outcome.to_json()
        if self.status == "infra_error":
            data["attempt_errors"] = list(self.attempt_errors)
        if self.attempts is not None:
            data["attempts"] = self.attempts
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: Path | str = "result.json") -> "RunRecord":
        """The record of a parsed ``result.json``.

        Raises
        ------
        SchemaVersionError
            A record written by a newer planted (``source`` names the file in the message).
        RunRecordError
            Not a run record (a key missing or of the wrong type).
        """
        version = int(data.get("schema_version", 1))
        if version > RESULT_SCHEMA_VERSION:
            raise SchemaVersionError(
                f"{source} has run-record schema version {version}, newer than the {RESULT_SCHEMA_VERSION} this "
                "planted reads; upgrade planted, or rerun into a new --out directory"
            )
        try:
            values: dict[str, Any] = {f.name: data.get(f.name) for f in fields(RunIdentity)}
            if not all(isinstance(values[k], str) for k in ("run_id", "world_id", "framing", "group")):
                raise TypeError("run_id, world_id, framing and group must be strings")
            if not isinstance(values["spec"], dict) or "family" not in values["spec"]:
                raise TypeError("spec must be a world specification with a family")
            if not isinstance(values["seed"], dict) or not {"entropy", "spawn_key"} <= set(values["seed"]):
                raise TypeError("seed must hold entropy and spawn_key")
            identity = RunIdentity(**values | {"replicate": int(data["replicate"])})
            outcome = EpisodeOutcome.from_json(data) if data.get("status") == "ok" else None
            return cls(identity=identity, status=str(data.get("status")), error=data.get("error"), outcome=outcome,
                       workspace=data.get("workspace"), attempts=data.get("attempts"), traceback=data.get("traceback"),
                       attempt_errors=tuple(data.get("attempt_errors") or ()), schema_version=version)
        except (KeyError, TypeError, ValueError) as exc:
            raise RunRecordError(f"{source} is not a run record ({exc}); `planted run` redoes the run") from None


def read_run_record(path: Path) -> RunRecord:
    """The run record in ``path`` (a run's ``result.json``), the one reader of that file.

    Raises
    ------
    RunRecordError
        Unreadable or truncated JSON, or not a run record; the message names the file and says that
        ``planted run`` redoes the run.
    SchemaVersionError
        Written by a newer planted.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RunRecordError(f"{path} cannot be read ({type(exc).__name__}: {exc}); `planted run` redoes the run") from None
    if not isinstance(data, dict):
        raise RunRecordError(f"{path} is not a JSON object; `planted run` redoes the run")
    return RunRecord.from_json(data, path)


__all__ = ["EpisodeOutcome", "EvaluationSummary", "RESULT_SCHEMA_VERSION", "RUN_STATUSES", "RunIdentity", "RunRecord",
           "RunRecordError", "SchemaVersionError", "read_run_record"]

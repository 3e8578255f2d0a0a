"""One agent episode: prompts in, tool calls through the protocol and the sandbox, a run record out.

:func:`run_episode` drives a backend session until a submission is accepted (or the model stops
calling tools, or the turn limit is reached), logs every event to ``transcript.jsonl``, evaluates
the submitted model on the sealed test window in a separate sandbox, and returns the record that
the grid runner writes atomically as ``result.json``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from planted.agents.backend import Backend, FatalBackendError, Usage
from planted.agents.prompts import Prompts
from planted.agents.protocol import MODEL_FILE, EpisodeProtocol, PythonRunner
from planted.agents.tools import TOOL_SCHEMAS, ToolResult
from planted.agents.transcript import EventLog
from planted.hashing import sha256_file
from planted.run_record import EpisodeOutcome, EvaluationSummary
from planted.study_layout import EVALUATION_FILE, TRANSCRIPT_FILE

MAX_TURNS = 120
"""Safety bound on model turns; the tool budget (40) normally ends an episode long before."""
MAX_NUDGES = 3
"""Turns without a tool call tolerated (each answered with the prompts' nudge) before giving up."""


SandboxFactory = Callable[[Path, Path], PythonRunner]
Evaluator = Callable[[Path, pd.DataFrame, pd.DataFrame], Any]


@dataclass(frozen=True)
class EpisodeSettings:
    """Fixed settings of every episode of a study."""

    budget: int = 40
    refit_every: int = 12
    max_turns: int = MAX_TURNS
    max_nudges: int = MAX_NUDGES


def sandbox_description(sandbox: object) -> dict[str, Any] | None:
    """What the episode's sandbox was (kind, limits, seccomp, the agent's package versions), if it says."""
    describe = getattr(sandbox, "describe", None)
    return describe() if callable(describe) else None


def run_episode(
    *,
    backend: Backend,
    prompts: Prompts,
    framing: str,
    visible: pd.DataFrame,
    test: pd.DataFrame,
    data_file: Path,
    run_dir: Path,
    workspace: Path,
    sandbox_factory: SandboxFactory,
    evaluator: Evaluator,
    settings: EpisodeSettings = EpisodeSettings(),
) -> EpisodeOutcome:
    """Run one episode and return its outcome (the grid adds the run's identity and writes it as ``result.json``).

    Parameters
    ----------
    backend : Backend
        The model (or the scripted researcher).
    prompts : Prompts
    framing : str
        ``neutral``, ``optimistic`` or ``skeptical``.
    visible, test : DataFrame
        The agent's data (also at ``data_file``) and the sealed test window (evaluation only).
    data_file : Path
        Host path of the agent's CSV, mounted read-only into the sandbox.
    run_dir : Path
        Fresh directory of this run: ``transcript.jsonl``, ``final_model.py``, ``evaluation.csv``.
    workspace : Path
        Fresh directory mounted as the agent's ``/workspace``. Its host path is visible to the
        agent (``/proc/self/mountinfo``), so it must not reveal anything about the world: the grid
        uses a hash, never the run id.
    sandbox_factory : callable
        ``(workspace, data_file) -> sandbox`` for ``run_python``.
    evaluator : callable
        ``(model_file, train, test) -> evaluation`` (a :class:`planted.agents.evaluator.Evaluation`).

    Raises
    ------
    FatalBackendError
        Propagated untouched: it must stop the grid, not become an agent failure.
    """
    started = time.monotonic()
    workspace.mkdir(parents=True, exist_ok=True)
    sandbox = sandbox_factory(workspace, data_file)
    data_path = getattr(sandbox, "data_path", None) or "/workspace/data/data.csv"
    protocol = EpisodeProtocol(
        sandbox, workspace, settings.budget, prompts.data_note_for(n_rows=len(visible), file_name=data_path)
    )
    system = prompts.system_prompt(settings.budget, settings.refit_every)
    user = prompts.user_message(framing)
    usage = Usage()
    served: set[str] = set()
    stop = "turn_limit"
    with EventLog(run_dir / TRANSCRIPT_FILE) as log:
        log.write("episode_start", framing=framing, system=system, user=user, budget=settings.budget)
        session = backend.open_session(system=system, user=user, tools=TOOL_SCHEMAS, log=log)
        results: list[ToolResult] = []
        user_text: str | None = None
        nudges = 0
        for _ in range(settings.max_turns):
            turn = session.next_turn(results, user_text)
            usage = usage + turn.usage
            served.add(turn.served_model)
            log.write("model_turn", stop_reason=turn.stop_reason, text=turn.text,
                      tool_calls=[vars(c) for c in turn.tool_calls], served_model=turn.served_model)
            results, user_text = [], None
            if not turn.tool_calls:
                nudges += 1
                if nudges > settings.max_nudges:
                    stop = "no_tool_calls"
                    break
                user_text = prompts.nudge
                log.write("nudge", text=user_text, stop_reason=turn.stop_reason)
                continue
            for call in turn.tool_calls:
                result = protocol.handle(call)
                log.write("observation", call_id=call.call_id, tool=call.name, is_error=result.is_error,
                          content=result.content)
                results.append(result)
            if protocol.finished:
                stop = "submitted"
                break
        record = protocol.record
        evaluation = None
        submission = record.submission
        model_sha = None
        if protocol.model_source is not None:  # the bytes that were checked, never re-read from the workspace
            (run_dir / MODEL_FILE).write_bytes(protocol.model_source)
            model_sha = sha256_file(run_dir / MODEL_FILE)
            log.write("evaluation_start", model_sha256=model_sha)
            evaluation = evaluator(run_dir / MODEL_FILE, visible, test)
            evaluation.to_frame().to_csv(run_dir / EVALUATION_FILE, index=False, float_format="%.17g")
            log.write("evaluation", **asdict(EvaluationSummary.of(evaluation)))
        log.write("episode_end", stop=stop)
    return EpisodeOutcome(
        stop=stop,
        verdict=submission.verdict if submission else None,
        claim=bool(submission.claim) if submission else False,
        probability=submission.probability if submission else None,
        rationale=submission.rationale if submission else None,
        predictors=tuple(submission.predictors) if submission else None,
        prior_verdict=record.prior["verdict"] if record.prior else None,
        prior_probability=record.prior["probability"] if record.prior else None,
        n_specs=len(record.specs),
        budget_used=record.budget_used,
        invalid_calls=record.invalid_calls,
        rejected_submissions=record.rejected_submissions,
        limit_hits=tuple(record.limit_hits),
        tool_calls=record.tool_calls,
        final_model_sha256=model_sha,
        evaluation=None if evaluation is None else EvaluationSummary.of(evaluation),
        usage=usage,
        served_models=tuple(sorted(m for m in served if m)),
        wall_seconds=round(time.monotonic() - started, 3),
        sandbox=sandbox_description(sandbox),
        record=record.to_dict(),
    )


__all__ = ["EpisodeSettings", "FatalBackendError", "run_episode"]

"""The rules of an episode (SPEC 2.1): prior first, a budget, specs logged, one accepted submission.

:class:`EpisodeProtocol` turns each tool call into an observation and keeps the episode's record.
It knows nothing about models or wire formats; it calls the sandbox for ``run_python`` and checks
the submitted model file statically (it never imports, or even parses, agent code in the host
process), keeping the accepted file's bytes so that what is scored is what was checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from planted.agents.model_check import model_source_problem
from planted.agents.tools import BUDGETED_TOOLS, CLAIM, ToolArgumentError, ToolCall, ToolResult, parse_arguments
from planted.agents.workspace_files import MODEL_FILE_CAP, WorkspaceFileError, read_workspace_file

from planted.study_layout import MODEL_FILE


class PythonRunner(Protocol):
    """What the protocol needs from a sandbox: run code, return something with an ``observation()``."""

    def run_python(self, code: str) -> Any: ...


@dataclass(frozen=True)
class Submission:
    """The accepted ``submit_final`` call."""

    verdict: str
    probability: float
    rationale: str
    predictors: list[str]

    @property
    def claim(self) -> bool:
        """A "beats" verdict is a claim; "does_not_beat" and "abort_no_predictability" are not."""
        return self.verdict == CLAIM


@dataclass
class EpisodeRecord:
    """Everything the protocol logged about one episode (JSON-ready via :meth:`to_dict`)."""

    prior: dict[str, Any] | None = None
    budget_used: int = 0
    specs: list[dict[str, Any]] = field(default_factory=list)
    submission: Submission | None = None
    invalid_calls: int = 0
    rejected_submissions: int = 0
    limit_hits: list[str] = field(default_factory=list)
    tool_calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The record as plain JSON types."""
        return {
            "prior": self.prior,
            "budget_used": self.budget_used,
            "specs": self.specs,
            "submission": None if self.submission is None else vars(self.submission),
            "invalid_calls": self.invalid_calls,
            "rejected_submissions": self.rejected_submissions,
            "limit_hits": self.limit_hits,
            "tool_calls": self.tool_calls,
        }


def read_model_file(workspace: Path) -> tuple[bytes | None, str | None]:
    """The submitted model's bytes and ``None``, or ``None`` and why it is not acceptable.

    The file is read without following links (a regular file of at most 1 MiB, see
    :mod:`planted.agents.workspace_files`) and checked statically in a bounded child process
    (:mod:`planted.agents.model_check`): it must parse and define top-level ``fit`` and ``predict``.
    Nothing the agent wrote is executed or parsed in the host process.
    """
    shown = f"/workspace/{MODEL_FILE}"
    try:
        source = read_workspace_file(workspace, MODEL_FILE, MODEL_FILE_CAP)
    except WorkspaceFileError as exc:
        return None, f"/workspace/{exc}"
    problem = model_source_problem(source, shown)
    return (None, problem) if problem else (source, None)


class EpisodeProtocol:
    """Apply the tool rules to each call and keep the :class:`EpisodeRecord`.

    Parameters
    ----------
    sandbox : PythonRunner
        Runs ``run_python`` code; its result's ``observation()`` is returned to the model.
    workspace : Path
        Host path of the sandbox's ``/workspace`` (where the model file is checked).
    budget : int
        Maximum number of executed ``run_python`` + ``record_spec`` calls (40 in the paper).
    data_note : str
        Observation returned when the prior is recorded.

    Notes
    -----
    Only valid, executed calls count against the budget; calls rejected for their arguments, for
    coming before the prior or after the budget, do not (they are counted in ``invalid_calls``).
    A ``submit_final`` rejected for its model file is counted in ``rejected_submissions`` and may be
    repeated; once a submission is accepted, any further call gets an error observation.
    """

    def __init__(self, sandbox: PythonRunner, workspace: Path, budget: int, data_note: str):
        self.sandbox = sandbox
        self.workspace = Path(workspace)
        self.budget = budget
        self.data_note = data_note
        self.record = EpisodeRecord()
        self.model_source: bytes | None = None
        """The accepted model file's bytes (what the evaluator scores), once a submission is accepted."""

    @property
    def finished(self) -> bool:
        """Whether a submission has been accepted."""
        return self.record.submission is not None

    def handle(self, call: ToolCall) -> ToolResult:
        """Execute one tool call under the rules and return its observation."""
        self.record.tool_calls += 1
        try:
            arguments = parse_arguments(call)
        except ToolArgumentError as exc:
            return self._invalid(call, f"invalid call to {call.name}: {exc}. Call it again with arguments matching its schema.")
        if self.finished:
            return self._invalid(call, "submit_final was already accepted; the episode is over.")
        if call.name == "report_prior":
            if self.record.prior is not None:
                return self._invalid(call, "the prior was already recorded; continue your research.")
            self.record.prior = arguments
            return ToolResult(call.call_id, self.data_note)
        if self.record.prior is None:
            return self._invalid(call, "call report_prior first. Data access is granted only after the prior is recorded.")
        if call.name in BUDGETED_TOOLS and self.record.budget_used >= self.budget:
            return self._invalid(
                call, f"budget exhausted ({self.budget} calls of run_python and record_spec used). Call submit_final now."
            )
        if call.name == "run_python":
            self.record.budget_used += 1
            result = self.sandbox.run_python(arguments["code"])
            if getattr(result, "limit_hit", None):
                self.record.limit_hits.append(result.limit_hit)
            return ToolResult(call.call_id, result.observation(), is_error=bool(getattr(result, "exit_code", 0)))
        if call.name == "record_spec":
            self.record.budget_used += 1
            self.record.specs.append(arguments)
            left = self.budget - self.record.budget_used
            return ToolResult(call.call_id, f"Specification {len(self.record.specs)} recorded. Budget left: {left}.")
        return self._submit(call, arguments)

    def _submit(self, call: ToolCall, arguments: dict[str, Any]) -> ToolResult:
        if arguments["verdict"] != "abort_no_predictability":
            source, problem = read_model_file(self.workspace)
            if problem:
                self.record.rejected_submissions += 1
                return ToolResult(
                    call.call_id,
                    f"Error: submission not accepted: {problem}. Write the model file with run_python, then call "
                    "submit_final again.",
                    is_error=True,
                )
            self.model_source = source
        self.record.submission = Submission(**arguments)
        return ToolResult(call.call_id, "Submission accepted. The episode is over.")

    def _invalid(self, call: ToolCall, message: str) -> ToolResult:
        self.record.invalid_calls += 1
        return ToolResult(call.call_id, f"Error: {message}", is_error=True)

"""One agent episode read from its run directory into a frozen view that is safe to show.

:func:`load_episode` reads a run directory (``OUT/<study>/runs/<run_id>/``) only through the readers
of its files (:func:`planted.agents.transcript.read_events`, :func:`planted.run_record.read_run_record`)
into an :class:`EpisodeView`: the identity, the prior, every tool call with its observation (and its
``record_spec`` entry), the accepted ``final_model.py``, the verdict, the evaluation and the cost.
:mod:`planted.analysis.episode_view` renders it (terminal and HTML).

Conventions
-----------
* Everything in a run directory was written by, or on behalf of, a hostile agent. Every string in
  an :class:`EpisodeView` has its C0/C1 control characters (except newline and tab), bidirectional
  controls and lone surrogates replaced by their escape text (``\\x1b``), and any block longer than
  :data:`MAX_BLOCK_CHARS` is cut with a note of how much was cut (:func:`clean_text`). Numbers that
  are not finite reals become ``None``. Renderers must still treat every string as text, never markup.
* Observations are matched to calls by call id, first come first served; an observation with no
  call before it is shown as a call of its own.
* A run without ``result.json`` (unfinished) is shown from its transcript alone: the prior, the
  ``record_spec`` entries and the verdict are those of the calls the protocol accepted (an
  observation that is not an error), the evaluation that of the last ``evaluation`` event.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from planted.agents.transcript import TranscriptError, read_events
from planted.run_record import EvaluationSummary, RunRecord, RunRecordError, SchemaVersionError, read_run_record
from planted.study_layout import MODEL_FILE, RESULT_FILE, TRANSCRIPT_FILE

MAX_BLOCK_CHARS = 20_000
"""Longest text block shown; a longer one is cut with a note of how many characters were cut."""
MAX_ENTRIES = 2_000
"""Most timeline entries (tool calls and notes) or ``record_spec`` rows shown."""
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


class EpisodeViewError(ValueError):
    """A directory that is not a readable run directory; the one-line message names it."""


@dataclass(frozen=True)
class SpecEntry:
    """One ``record_spec`` entry as the agent logged it."""

    description: str
    predictors: tuple[str, ...]
    n_parameters: float | None
    in_sample_r2: float | None
    statistics: tuple[tuple[str, float | None], ...]


@dataclass(frozen=True)
class Step:
    """One tool call: its tool, arguments (``run_python``'s ``code`` apart), observation, spec entry."""

    call_id: str
    tool: str
    code: str | None
    """The ``code`` argument of a ``run_python`` call (None for the other tools)."""
    arguments: str
    """The other arguments as JSON text (the raw text when it is not a JSON object)."""
    observation: str | None
    """What the tool returned (None when no observation was logged)."""
    is_error: bool = False
    spec: SpecEntry | None = None
    """The ``record_spec`` entry this call logged (accepted ``record_spec`` calls only)."""


@dataclass(frozen=True)
class Note:
    """A timeline entry that is not a tool call: the model's ``text`` or a ``nudge``, ``retry``, ``api_error``."""

    kind: str
    text: str


@dataclass(frozen=True)
class EpisodeView:
    """One episode, parsed and made safe to show (see the module's conventions)."""

    run_id: str
    status: str
    """The record's status (``ok``, ``error``, ``infra_error``) or ``unfinished`` (no ``result.json``)."""
    error: str | None
    world_id: str | None
    framing: str | None
    model: str | None
    backend: str | None
    analysis_label: str | None
    analysis_reason: str | None
    prior_verdict: str | None
    prior_probability: float | None
    entries: tuple[Step | Note, ...]
    specs: tuple[SpecEntry, ...]
    final_model: str | None
    verdict: str | None
    probability: float | None
    rationale: str | None
    predictors: tuple[str, ...] | None
    evaluation: EvaluationSummary | None
    stop: str | None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    wall_seconds: float | None = None

    @property
    def steps(self) -> tuple[Step, ...]:
        """The tool calls, in order."""
        return tuple(e for e in self.entries if isinstance(e, Step))


# ---------------------------------------------------------------- cleaning


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean_text(value: Any, limit: int = MAX_BLOCK_CHARS) -> str:
    """``value`` as text safe to show.

    Parameters
    ----------
    value : Any
        Agent-controlled text (anything else is shown as its ``str``).
    limit : int, default MAX_BLOCK_CHARS
        Most characters kept.

    Returns
    -------
    str
        C0/C1 controls other than newline and tab, bidirectional controls and lone surrogates
        replaced by their escape text (ESC becomes the four characters ``\\x1b``); a longer text cut
        to ``limit`` characters, followed by a line saying how many of how many were cut.
    """
    text = _UNSAFE.sub(_escape_char, value if isinstance(value, str) else str(value))
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit:,} of {len(text):,} characters cut]"


def _optional_text(value: Any) -> str | None:
    return None if value is None else clean_text(value)


def finite_number(value: Any) -> float | None:
    """``value`` as a float if it is a finite real number; None for anything else (booleans, strings, NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _strings(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [] if value is None else [value]
    return tuple(clean_text(item, 500) for item in items[:MAX_ENTRIES])


def _spec_entry(data: Any) -> SpecEntry:
    data = data if isinstance(data, Mapping) else {}
    stats = data.get("statistics") if isinstance(data.get("statistics"), list) else []
    return SpecEntry(
        description=clean_text(data.get("description", "")), predictors=_strings(data.get("predictors")),
        n_parameters=finite_number(data.get("n_parameters")), in_sample_r2=finite_number(data.get("in_sample_r2")),
        statistics=tuple((clean_text(s.get("name", ""), 200), finite_number(s.get("value")))
                         for s in stats[:MAX_ENTRIES] if isinstance(s, Mapping)),
    )


# ---------------------------------------------------------------- reading the transcript


@dataclass
class _Call:
    step: Step
    arguments: Mapping[str, Any] = field(default_factory=dict)


def _parse_arguments(raw: Any) -> Mapping[str, Any] | None:
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else raw
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict) else None


def _arguments_text(arguments: Mapping[str, Any] | None, raw: Any) -> str:
    if arguments is None:
        return clean_text(raw)
    rest = {k: v for k, v in arguments.items() if k != "code"}
    try:
        return clean_text(json.dumps(rest, ensure_ascii=False, default=str)) if rest else ""
    except (ValueError, RecursionError):
        return clean_text(raw)


def _call(data: Any) -> _Call:
    data = data if isinstance(data, Mapping) else {}
    tool, raw = clean_text(data.get("name", "?"), 200), data.get("arguments", "")
    arguments = _parse_arguments(raw)
    code = arguments.get("code") if arguments is not None and tool == "run_python" else None
    step = Step(call_id=str(data.get("call_id", "")), tool=tool, code=None if code is None else clean_text(code),
                arguments=_arguments_text(arguments, raw), observation=None)
    return _Call(step, arguments or {})


def _note(event: Mapping[str, Any]) -> Note | None:
    kind = event.get("event")
    if kind == "nudge":
        text = f"nudge: {event.get('text')}"
    elif kind == "retry":
        text = (f"retry: attempt {event.get('attempt')}, status {event.get('status')}, {event.get('error_type')}: "
                f"{event.get('message')} (waiting {event.get('delay_s')} s)")
    elif kind == "api_error":
        text = (f"API error ({event.get('kind')}): status {event.get('status')}, {event.get('error_type')}: "
                f"{event.get('message')}")
    else:
        return None
    return Note(str(kind), " ".join(clean_text(text, 2_000).split()))


def _orphan(event: Mapping[str, Any], timeline: list[_Call | Note]) -> _Call:
    """A call of its own for an observation with no call before it, appended to ``timeline``."""
    call = _call({"call_id": event.get("call_id", ""), "name": event.get("tool", "?"), "arguments": ""})
    timeline.append(call)
    return call


def _timeline(events: Iterable[Mapping[str, Any]]) -> list[_Call | Note]:
    """Tool calls (each with its observation, matched by call id) and notes, in transcript order."""
    timeline: list[_Call | Note] = []
    pending: dict[str, list[_Call]] = {}
    for event in events:
        kind = event.get("event")
        if kind == "model_turn":
            if event.get("text"):
                timeline.append(Note("model", clean_text(event["text"])))
            calls = event.get("tool_calls")
            for data in calls if isinstance(calls, list) else []:
                call = _call(data)
                timeline.append(call)
                pending.setdefault(call.step.call_id, []).append(call)
        elif kind == "observation":
            waiting = pending.get(str(event.get("call_id", "")))
            call = waiting.pop(0) if waiting else _orphan(event, timeline)
            call.step = replace(call.step, observation=clean_text(event.get("content", "")),
                                is_error=bool(event.get("is_error")))
        elif (note := _note(event)) is not None:
            timeline.append(note)
    return timeline


def _is_accepted(item: _Call | Note, tool: str) -> bool:
    """Whether ``item`` is a call of ``tool`` that the protocol accepted (its observation is no error)."""
    return (isinstance(item, _Call) and item.step.tool == tool and item.step.observation is not None
            and not item.step.is_error)


def _accepted(timeline: list[_Call | Note], tool: str) -> list[_Call]:
    return [c for c in timeline if isinstance(c, _Call) and _is_accepted(c, tool)]


def _last_event(events: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    return next((e for e in reversed(events) if e.get("event") == kind), None)


def _evaluation(record: RunRecord | None, events: list[dict[str, Any]]) -> EvaluationSummary | None:
    """The record's evaluation, or for an unfinished run the transcript's last one; its error cleaned."""
    if record is not None:
        evaluation = record.outcome.evaluation if record.outcome is not None else None
    else:
        event = _last_event(events, "evaluation")
        try:
            evaluation = None if event is None else EvaluationSummary.from_json(event)
        except TypeError:  # a key missing
            evaluation = None
    return None if evaluation is None else replace(evaluation, error=_optional_text(evaluation.error))


# ---------------------------------------------------------------- loading a run


def _read(run_dir: Path) -> tuple[list[dict[str, Any]], RunRecord | None]:
    if not run_dir.is_dir():
        raise EpisodeViewError(f"{run_dir} is not a run directory: it does not exist or is not a directory")
    if not (run_dir / TRANSCRIPT_FILE).is_file():
        raise EpisodeViewError(f"{run_dir} is not a run directory: it has no {TRANSCRIPT_FILE}")
    try:
        events = read_events(run_dir / TRANSCRIPT_FILE, complete=False)
        record = read_run_record(run_dir / RESULT_FILE) if (run_dir / RESULT_FILE).is_file() else None
    except (TranscriptError, RunRecordError, SchemaVersionError, OSError) as exc:
        raise EpisodeViewError(" ".join(str(exc).split())) from None
    return events, record


def _final_model(run_dir: Path) -> str | None:
    path = run_dir / MODEL_FILE
    if not path.is_file():
        return None
    return clean_text(path.read_bytes().decode("utf-8", errors="replace"))


def _steps(timeline: list[_Call | Note], specs: tuple[SpecEntry, ...]) -> tuple[Step | Note, ...]:
    """The frozen timeline, each accepted ``record_spec`` call paired with its entry, in order."""
    entries: list[Step | Note] = []
    logged = iter(specs)
    for item in timeline[:MAX_ENTRIES]:
        if isinstance(item, Note):
            entries.append(item)
        elif _is_accepted(item, "record_spec"):
            entries.append(replace(item.step, spec=next(logged, None)))
        else:
            entries.append(item.step)
    if len(timeline) > MAX_ENTRIES:
        entries.append(Note("cut", f"{len(timeline) - MAX_ENTRIES:,} more entries not shown"))
    return tuple(entries)


def load_episode(run_dir: Path) -> EpisodeView:
    """Read one run directory into an :class:`EpisodeView`.

    Parameters
    ----------
    run_dir : Path
        ``OUT/<study>/runs/<run_id>/``; it needs ``transcript.jsonl``. Without ``result.json`` (an
        unfinished run) the view is built from the transcript alone and its status is ``unfinished``.

    Returns
    -------
    EpisodeView
        Every string cleaned and bounded (see the module's conventions).

    Raises
    ------
    EpisodeViewError
        Not a run directory (missing, or no transcript), or a damaged transcript or ``result.json``;
        one line naming the directory or file.
    """
    run_dir = Path(run_dir)
    events, record = _read(run_dir)
    timeline = _timeline(events)
    outcome = record.outcome if record is not None else None
    identity = record.identity if record is not None else None
    priors = [c.arguments for c in _accepted(timeline, "report_prior")]
    submissions = [c.arguments for c in _accepted(timeline, "submit_final")]
    prior, submission = (priors or [{}])[0], (submissions or [{}])[0]
    if outcome is not None:
        log = outcome.record if isinstance(outcome.record, Mapping) else {}
        specs_data = log["specs"] if isinstance(log.get("specs"), list) else []
    else:
        specs_data = [c.arguments for c in _accepted(timeline, "record_spec")]
    specs = tuple(_spec_entry(s) for s in specs_data[:MAX_ENTRIES])
    start, end = _last_event(events, "episode_start") or {}, _last_event(events, "episode_end") or {}
    served = next((e.get("served_model") for e in events if e.get("event") == "model_turn"), None)
    return EpisodeView(
        run_id=clean_text(identity.run_id if identity else run_dir.name, 500),
        status=record.status if record is not None else "unfinished", error=_optional_text(record and record.error),
        world_id=_optional_text(identity and identity.world_id),
        framing=_optional_text(identity.framing if identity else start.get("framing")),
        model=_optional_text(identity.model if identity else served),
        backend=_optional_text(identity and identity.backend),
        analysis_label=_optional_text(identity and identity.analysis_label),
        analysis_reason=_optional_text(identity and identity.analysis_reason),
        prior_verdict=_optional_text(outcome.prior_verdict if outcome else prior.get("verdict")),
        prior_probability=finite_number(outcome.prior_probability if outcome else prior.get("probability")),
        entries=_steps(timeline, specs), specs=specs, final_model=_final_model(run_dir),
        verdict=_optional_text(outcome.verdict if outcome else submission.get("verdict")),
        probability=finite_number(outcome.probability if outcome else submission.get("probability")),
        rationale=_optional_text(outcome.rationale if outcome else submission.get("rationale")),
        predictors=_strings(list(outcome.predictors)) if outcome and outcome.predictors is not None
        else (_strings(submission["predictors"]) if "predictors" in submission else None),
        evaluation=_evaluation(record, events),
        stop=_optional_text(outcome.stop if outcome else end.get("stop")),
        input_tokens=outcome.usage.input_tokens if outcome else None,
        output_tokens=outcome.usage.output_tokens if outcome else None,
        cost_usd=outcome.usage.cost_usd if outcome else None, wall_seconds=outcome.wall_seconds if outcome else None,
    )


__all__ = ["EpisodeView", "EpisodeViewError", "MAX_BLOCK_CHARS", "MAX_ENTRIES", "Note", "SpecEntry", "Step",
           "clean_text", "finite_number", "load_episode"]

"""The model side of an episode as a small Protocol, so that a backend is an adapter and nothing else.

A :class:`Backend` opens a :class:`Session` per episode; the session keeps the conversation in its
own wire format (so provider-specific items such as thinking blocks or encrypted reasoning are
passed back unchanged) and turns each exchange into a neutral :class:`ModelTurn`. Sessions log
every request and response verbatim to the episode's :class:`~planted.agents.transcript.EventLog`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from planted.agents.tools import ToolCall, ToolResult
from planted.agents.transcript import EventLog


@dataclass(frozen=True)
class Usage:
    """Token usage of one or more requests and its cost in US dollars."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cached_tokens + other.cached_tokens,
            self.cost_usd + other.cost_usd,
        )


@dataclass(frozen=True)
class ModelTurn:
    """One model response, normalised.

    Attributes
    ----------
    tool_calls : list of ToolCall
    text : str
        Visible text of the response (not the reasoning).
    stop_reason : str
        ``tool_use``, ``end_turn``, ``max_tokens`` (truncated; never read as an answer), ...
    usage : Usage
    served_model : str
        The model that served the request, as reported by the provider.
    """

    tool_calls: list[ToolCall]
    text: str
    stop_reason: str
    usage: Usage = field(default_factory=Usage)
    served_model: str = ""


class Session(Protocol):
    """A conversation with one model for one episode."""

    def next_turn(self, results: Sequence[ToolResult], user_text: str | None = None) -> ModelTurn:
        """Send the observations of the previous turn's tool calls (and optional user text); return the reply."""
        ...


class Backend(Protocol):
    """A model provider (or the embedded scripted researcher)."""

    name: str

    def open_session(self, *, system: str, user: str, tools: dict[str, dict[str, Any]], log: EventLog) -> Session:
        """Start a conversation: the first :meth:`Session.next_turn` sends ``system`` and ``user``."""
        ...


class FatalBackendError(RuntimeError):
    """An error that must stop the whole grid (authentication, exhausted credit, unknown model)."""

"""The ``anthropic`` backend: Claude through the Messages API of the official SDK (SPEC 2.5).

Each request carries the whole conversation: the system prompt, the tools (strict schemas),
adaptive thinking at the configured effort (``thinking: {type: adaptive}``,
``output_config: {effort}``), no temperature (the model accepts none) and, by default, top-level
``cache_control`` so that each turn reads the conversation so far from the prompt cache.

The assistant content of every response is appended to the conversation exactly as received:
``thinking`` blocks with their signatures and ``redacted_thinking`` blocks are passed back
unchanged on every later turn, as tool use with thinking requires. Observations return as
``tool_result`` blocks (``is_error`` set for error observations) at the start of the next user
message, followed by any user text.

Stop reasons: ``tool_use``, ``end_turn`` and ``stop_sequence`` are normal; ``max_tokens`` and
``model_context_window_exceeded`` are truncation (see :mod:`planted.agents.retry`); ``pause_turn``
is continued by sending the conversation back as it is (at most :data:`MAX_CONTINUATIONS` times);
``refusal`` ends the turn with no tool calls and the refused response is left out of the
conversation (the episode answers with its nudge).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import anthropic
import numpy as np

from planted.agents.backend import ModelTurn, Usage
from planted.agents.registry import ModelConfig
from planted.agents.retry import ApiCaller, Reply, TokenCounts
from planted.agents.tools import ToolCall, ToolResult
from planted.agents.transcript import EventLog

MAX_CONTINUATIONS = 3
"""``pause_turn`` continuations within one turn."""
TRUNCATED = ("max_tokens", "model_context_window_exceeded")
UNSUPPORTED_IN_STRICT = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                         "minLength", "maxLength", "maxItems")


def strict_input_schema(schema: Any) -> Any:
    """A copy of a JSON schema without the keywords strict tool use does not accept.

    Each dropped constraint (numeric bounds, string lengths) is stated in the description instead;
    the arguments are still validated against the full schema before any tool runs
    (:func:`planted.agents.tools.parse_arguments`), so a violation gets an error observation.
    """
    if isinstance(schema, list):
        return [strict_input_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    moved = []
    for key, value in schema.items():
        if key in UNSUPPORTED_IN_STRICT:
            moved.append(f"{key} {value}")
        elif key == "properties":
            out[key] = {name: strict_input_schema(sub) for name, sub in value.items()}
        else:
            out[key] = strict_input_schema(value)
    if moved:
        note = f"({', '.join(moved)})"
        out["description"] = f"{out['description']} {note}" if out.get("description") else note
    return out


def anthropic_tools(tools: dict[str, dict[str, Any]], *, strict: bool) -> list[dict[str, Any]]:
    """The tool definitions of the Messages API: ``name``, ``description``, ``input_schema`` (and ``strict``)."""
    out = []
    for name, spec in tools.items():
        schema = strict_input_schema(spec["parameters"]) if strict else spec["parameters"]
        tool = {"name": name, "description": spec["description"], "input_schema": schema}
        if strict:
            tool["strict"] = True
        out.append(tool)
    return out


def describe_message(data: dict[str, Any]) -> Reply:
    """Served model, stop reason, truncation, token counts and thinking text of a Messages API response."""
    usage = data.get("usage") or {}
    cached = int(usage.get("cache_read_input_tokens") or 0)
    written = int(usage.get("cache_creation_input_tokens") or 0)
    details = usage.get("output_tokens_details") or {}
    counts = TokenCounts(
        input_tokens=int(usage.get("input_tokens") or 0) + cached + written,
        output_tokens=int(usage.get("output_tokens") or 0),
        reasoning_tokens=int(details.get("thinking_tokens") or 0),
        cached_tokens=cached,
        cache_write_tokens=written,
    )
    content = data.get("content") or []
    thinking = "\n".join(block.get("thinking", "") for block in content if block.get("type") == "thinking")
    stop = str(data.get("stop_reason"))
    return Reply(served_model=str(data.get("model", "")), stop_reason=stop, truncated=stop in TRUNCATED,
                 counts=counts, reasoning=thinking)


class AnthropicSession:
    """One episode's conversation in the Messages API format (a :class:`~planted.agents.backend.Session`)."""

    def __init__(self, *, client: anthropic.Anthropic, config: ModelConfig, system: str, user: str,
                 tools: dict[str, dict[str, Any]], log: EventLog, api_key: str):
        self.client = client
        self.log = log
        self.request: dict[str, Any] = {
            "model": config.model_id,
            "max_tokens": config.max_tokens,
            "system": system,
            "thinking": {"type": "adaptive"} | ({"display": config.thinking_display} if config.thinking_display else {}),
        }
        if tools:  # a tool-less exchange (the memorization probe) sends no tools field at all
            self.request["tools"] = anthropic_tools(tools, strict=config.strict_tools)
        if config.effort:
            self.request["output_config"] = {"effort": config.effort}
        if config.prompt_cache:
            self.request["cache_control"] = {"type": "ephemeral"}
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": user}]}]
        self.turn = 0
        self.caller = ApiCaller(
            backend="anthropic", send=self._send, describe=describe_message, policy=config.retry,
            prices=config.prices, log=log, status_errors=(anthropic.APIStatusError,),
            connection_errors=(anthropic.APIConnectionError,), secrets=(api_key,),
            credential_hint=f"check the key in {config.key_env}", rng=np.random.default_rng(),
        )

    def _send(self, body: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        raw = self.client.messages.with_raw_response.create(**body)
        return json.loads(raw.text()), raw.request_id

    def _add_user_content(self, blocks: list[dict[str, Any]]) -> None:
        if self.messages[-1]["role"] == "user":
            self.messages[-1]["content"].extend(blocks)
        else:
            self.messages.append({"role": "user", "content": blocks})

    def next_turn(self, results: Sequence[ToolResult], user_text: str | None = None) -> ModelTurn:
        """Send the observations (tool results first, then any text) and return Claude's next turn."""
        blocks: list[dict[str, Any]] = [
            {"type": "tool_result", "tool_use_id": r.call_id, "content": r.content, "is_error": r.is_error}
            for r in results
        ]
        if user_text:
            blocks.append({"type": "text", "text": user_text})
        if blocks:
            self._add_user_content(blocks)
        self.turn += 1
        usage, texts, calls = Usage(), [], []
        for continuation in range(MAX_CONTINUATIONS + 1):
            data, reply, cost = self.caller.call({**self.request, "messages": self.messages}, turn=self.turn)
            usage = usage + cost
            content = data.get("content") or []
            texts += [block["text"] for block in content if block.get("type") == "text"]
            if reply.stop_reason == "refusal":
                self.log.write("refusal", backend="anthropic", turn=self.turn, stop_details=data.get("stop_details"))
                return ModelTurn([], "\n".join(texts), "refusal", usage, reply.served_model)
            self.messages.append({"role": "assistant", "content": content})
            calls += [ToolCall(block["id"], block["name"], json.dumps(block["input"]))
                      for block in content if block.get("type") == "tool_use"]
            if reply.stop_reason != "pause_turn" or continuation == MAX_CONTINUATIONS:
                break
            self.log.write("pause_turn", backend="anthropic", turn=self.turn, continuation=continuation + 1)
        return ModelTurn(calls, "\n".join(texts), reply.stop_reason, usage, reply.served_model)

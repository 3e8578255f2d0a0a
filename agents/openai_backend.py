"""The ``openai`` backend: OpenAI models through the Responses API of the official SDK (SPEC 2.5).

Requests are stateless (``store: false``): each carries the instructions (system prompt), the
function tools (``type: function``, ``strict: true``, ``parameters`` = the tool's schema), the
reasoning effort (and summary setting) of the config, ``include: ["reasoning.encrypted_content"]``
and the whole conversation as ``input`` items. The output items of every response (reasoning
items with their encrypted content, function calls, messages) are appended to the input exactly
as received and so passed back on every later turn, followed by one ``function_call_output`` item
per call; the model keeps its reasoning across tool calls.

The ``model`` field of each response (the model that actually served it, which may differ from
an alias) is logged and returned as ``served_model``. ``status: incomplete`` with reason
``max_output_tokens`` is truncation (see :mod:`planted.agents.retry`); ``content_filter`` and
refusals end the turn with no tool calls, and the filtered output is left out of the
conversation; ``status: failed`` is retried as a transient error.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np
import openai

from planted.agents.backend import ModelTurn
from planted.agents.registry import ModelConfig
from planted.agents.retry import ApiCaller, Reply, TokenCounts, TransientReplyError
from planted.agents.tools import ToolCall, ToolResult
from planted.agents.transcript import EventLog


def openai_tools(tools: dict[str, dict[str, Any]], *, strict: bool) -> list[dict[str, Any]]:
    """Function tools of the Responses API: ``type``, ``name``, ``description``, ``parameters``, ``strict``."""
    return [{"type": "function", "name": name, "description": spec["description"], "parameters": spec["parameters"],
             "strict": strict} for name, spec in tools.items()]


def describe_response(data: dict[str, Any]) -> Reply:
    """Served model, stop reason, truncation, token counts and reasoning summary of a Responses API response."""
    usage = data.get("usage") or {}
    input_details = usage.get("input_tokens_details") or {}
    output_details = usage.get("output_tokens_details") or {}
    counts = TokenCounts(
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        reasoning_tokens=int(output_details.get("reasoning_tokens") or 0),
        cached_tokens=int(input_details.get("cached_tokens") or 0),
        cache_write_tokens=int(input_details.get("cache_write_tokens") or 0),
    )
    output = data.get("output") or []
    reason = (data.get("incomplete_details") or {}).get("reason")
    if data.get("status") == "incomplete":
        stop = str(reason or "incomplete")
    elif any(part.get("type") == "refusal" for item in output for part in item.get("content") or []
             if item.get("type") == "message"):
        stop = "refusal"
    else:
        stop = "tool_use" if any(item.get("type") == "function_call" for item in output) else "end_turn"
    summary = "\n".join(part.get("text", "") for item in output if item.get("type") == "reasoning"
                        for part in item.get("summary") or [])
    return Reply(served_model=str(data.get("model", "")), stop_reason=stop, truncated=stop == "max_output_tokens",
                 counts=counts, reasoning=summary)


def _message_text(output: list[dict[str, Any]]) -> str:
    return "\n".join(part.get("text") or part.get("refusal") or "" for item in output if item.get("type") == "message"
                     for part in item.get("content") or [])


class OpenAISession:
    """One episode's conversation as Responses API input items (a :class:`~planted.agents.backend.Session`)."""

    def __init__(self, *, client: openai.OpenAI, config: ModelConfig, system: str, user: str,
                 tools: dict[str, dict[str, Any]], log: EventLog, api_key: str):
        self.client = client
        self.log = log
        reasoning = {"effort": config.effort} if config.effort else {}
        if config.reasoning_summary:
            reasoning["summary"] = config.reasoning_summary
        self.request: dict[str, Any] = {
            "model": config.model_id,
            "instructions": system,
            "store": False,
            "include": ["reasoning.encrypted_content"],
        }
        if tools:  # a tool-less exchange (the memorization probe) sends no tools field at all
            self.request["tools"] = openai_tools(tools, strict=config.strict_tools)
        if reasoning:
            self.request["reasoning"] = reasoning
        if config.max_tokens:
            self.request["max_output_tokens"] = config.max_tokens
        self.items: list[dict[str, Any]] = [{"role": "user", "content": user}]
        self.turn = 0
        self.caller = ApiCaller(
            backend="openai", send=self._send, describe=describe_response, policy=config.retry,
            prices=config.prices, log=log, status_errors=(openai.APIStatusError,),
            connection_errors=(openai.APIConnectionError,), secrets=(api_key,),
            credential_hint=f"check the key in {config.key_env}", rng=np.random.default_rng(),
        )

    def _send(self, body: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        raw = self.client.responses.with_raw_response.create(**body)
        data = json.loads(raw.text)
        if data.get("status") == "failed":
            raise TransientReplyError(f"the response failed: {json.dumps(data.get('error'))}")
        return data, raw.request_id

    def next_turn(self, results: Sequence[ToolResult], user_text: str | None = None) -> ModelTurn:
        """Send the observations as ``function_call_output`` items (then any text); return the next turn."""
        self.items += [{"type": "function_call_output", "call_id": r.call_id, "output": r.content} for r in results]
        if user_text:
            self.items.append({"role": "user", "content": user_text})
        self.turn += 1
        data, reply, usage = self.caller.call({**self.request, "input": self.items}, turn=self.turn)
        output = data.get("output") or []
        text = _message_text(output)
        if reply.stop_reason in ("refusal", "content_filter"):
            self.log.write("refusal", backend="openai", turn=self.turn, stop_reason=reply.stop_reason, text=text)
            return ModelTurn([], text, "refusal", usage, reply.served_model)
        self.items += output
        calls = [ToolCall(item["call_id"], item["name"], item.get("arguments") or "")
                 for item in output if item.get("type") == "function_call"]
        self.caller.note_malformed(calls, turn=self.turn)
        return ModelTurn(calls, text, reply.stop_reason, usage, reply.served_model)

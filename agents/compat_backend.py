"""The ``openai_compat`` backend: any OpenAI-compatible chat-completions server (SPEC 2.5, local arm).

Requests go to ``{base_url}/chat/completions`` through the official ``openai`` SDK: the messages
(system, user, assistant with ``tool_calls``, ``tool`` results), the tools as
``{type: function, function: {name, description, parameters}}`` with ``tool_choice: auto`` (the
server's tool-call parser, e.g. vLLM's ``hermes``, turns the model's text into ``tool_calls``),
the config's ``max_tokens``, sampling parameters and server-specific ``extra_body`` fields.

Tool-call arguments are passed on as the raw string the server returned, so malformed JSON from
the model reaches the protocol, which answers with an error observation the model can correct;
such calls are counted in the log (``malformed_tool_arguments``), as are tool calls the server's
parser could not extract (``unparsed_tool_call``: the ``<tool_call>`` markup left in the text).
The reasoning the server separates from the answer (vLLM's ``reasoning_content``, or
``reasoning``) is logged with each response and not sent back (Qwen3's chat template drops the
thinking of earlier turns). ``finish_reason: length`` is truncation (see :mod:`planted.agents.retry`).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np
import openai

from planted.agents.backend import ModelTurn
from planted.agents.registry import ModelConfig
from planted.agents.retry import ApiCaller, Reply, TokenCounts
from planted.agents.tools import ToolCall, ToolResult
from planted.agents.transcript import EventLog

STOP_REASONS = {"tool_calls": "tool_use", "function_call": "tool_use", "stop": "end_turn", "length": "max_tokens"}
UNPARSED_MARKUP = "<tool_call>"


def chat_tools(tools: dict[str, dict[str, Any]], *, strict: bool) -> list[dict[str, Any]]:
    """Chat-completions tool definitions (``strict`` only when asked: many servers ignore or refuse it)."""
    out = []
    for name, spec in tools.items():
        function = {"name": name, "description": spec["description"], "parameters": spec["parameters"]}
        if strict:
            function["strict"] = True
        out.append({"type": "function", "function": function})
    return out


def _message(data: dict[str, Any]) -> tuple[dict[str, Any], str]:
    choice = (data.get("choices") or [{}])[0]
    return choice.get("message") or {}, str(choice.get("finish_reason"))


def describe_completion(data: dict[str, Any]) -> Reply:
    """Served model, finish reason, truncation, token counts and reasoning text of a chat completion."""
    usage = data.get("usage") or {}
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    counts = TokenCounts(
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
        cached_tokens=int(prompt_details.get("cached_tokens") or 0),
    )
    message, finish = _message(data)
    reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    return Reply(served_model=str(data.get("model", "")), stop_reason=finish, truncated=finish == "length",
                 counts=counts, reasoning=str(reasoning))


class CompatSession:
    """One episode's chat-completions conversation (a :class:`~planted.agents.backend.Session`)."""

    def __init__(self, *, client: openai.OpenAI, config: ModelConfig, system: str, user: str,
                 tools: dict[str, dict[str, Any]], log: EventLog, api_key: str):
        self.client = client
        self.log = log
        self.extra_body = dict(config.extra_body)
        self.request: dict[str, Any] = {"model": config.model_id, **config.sampling}
        if tools:  # a tool-less exchange (the memorization probe) sends no tools field at all
            self.request |= {"tools": chat_tools(tools, strict=config.strict_tools), "tool_choice": "auto"}
        if config.max_tokens:
            self.request["max_tokens"] = config.max_tokens
        if config.effort:
            self.request["reasoning_effort"] = config.effort
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        self.turn = 0
        self.unparsed_tool_calls = 0
        self.caller = ApiCaller(
            backend="openai_compat", send=self._send, describe=describe_completion, policy=config.retry,
            prices=config.prices, log=log, status_errors=(openai.APIStatusError,),
            connection_errors=(openai.APIConnectionError,), secrets=(api_key,),
            credential_hint=f"check the key in {config.key_env}" if config.key_env else "", rng=np.random.default_rng(),
        )

    def _send(self, body: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        standard = {key: value for key, value in body.items() if key not in self.extra_body}
        raw = self.client.chat.completions.with_raw_response.create(**standard, extra_body=self.extra_body or None)
        return json.loads(raw.text), raw.request_id

    def next_turn(self, results: Sequence[ToolResult], user_text: str | None = None) -> ModelTurn:
        """Send the observations as ``tool`` messages (then any user text); return the next turn."""
        self.messages += [{"role": "tool", "tool_call_id": r.call_id, "content": r.content} for r in results]
        if user_text:
            self.messages.append({"role": "user", "content": user_text})
        self.turn += 1
        data, reply, usage = self.caller.call({**self.request, "messages": self.messages, **self.extra_body},
                                              turn=self.turn)
        message, _ = _message(data)
        text = message.get("content") or ""
        raw_calls = message.get("tool_calls") or []
        calls = [ToolCall(call.get("id") or f"call_{self.turn}_{i}", (call.get("function") or {}).get("name", ""),
                          (call.get("function") or {}).get("arguments") or "")
                 for i, call in enumerate(raw_calls)]
        assistant: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if calls:
            assistant["tool_calls"] = [
                {"id": call.call_id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
                for call in calls
            ]
        self.messages.append(assistant)
        self.caller.note_malformed(calls, turn=self.turn)
        if not calls and UNPARSED_MARKUP in text:
            self.unparsed_tool_calls += 1
            self.log.write("unparsed_tool_call", backend="openai_compat", turn=self.turn, text=text,
                           count=self.unparsed_tool_calls)
        stop = STOP_REASONS.get(reply.stop_reason, reply.stop_reason)
        return ModelTurn(calls, text, stop, usage, reply.served_model)

"""Scripted fake model servers on loopback that speak the real wire formats (no test touches the network).

A :class:`FakeServer` runs ``http.server.ThreadingHTTPServer`` on 127.0.0.1 in a daemon thread and
answers every POST with a scripted model: :class:`AnthropicModel` (Messages API with thinking
blocks and signatures, redacted thinking and ``tool_use``), :class:`ResponsesModel` (Responses API
with reasoning items carrying ``encrypted_content`` and ``function_call`` items) and
:class:`ChatModel` (chat completions with ``tool_calls`` and vLLM's ``reasoning_content``).

Each model checks every request before answering: the credentials, the request settings, and that
everything it returned before comes back unchanged (thinking blocks with their signatures,
encrypted reasoning items, tool calls), followed by one observation per call. A request after a
fault or a truncated response must be the identical request. A failed check is recorded in
``failures`` and answered with HTTP 400, so the episode stops with the reason in its message.
"""

from __future__ import annotations

import json
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

GOOD_MODEL = "def fit(train):\n    return None\n\n\ndef predict(state, history):\n    return 0.0\n"


@dataclass(frozen=True)
class Call:
    """A tool call of the scripted model; ``arguments`` as text is sent raw (possibly malformed JSON)."""

    tool: str
    arguments: dict[str, Any] | str

    def text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


PROTOCOL = [
    Call("report_prior", {"verdict": "does_not_beat", "probability": 0.3}),
    Call("run_python", {"code": GOOD_MODEL}),
    Call("record_spec", {"description": "benchmark", "predictors": [], "n_parameters": 0, "in_sample_r2": None,
                         "statistics": [{"name": "t", "value": 1.2}]}),
    Call("submit_final", {"verdict": "does_not_beat", "probability": 0.2, "rationale": "no signal", "predictors": []}),
]
"""report_prior -> run_python (writes the model file) -> record_spec -> submit_final."""


@dataclass(frozen=True)
class Fault:
    """An HTTP error reply."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Drop:
    """Close the connection without replying."""


@dataclass(frozen=True)
class Stall:
    """Wait ``seconds`` (longer than the client's timeout), then close the connection without replying."""

    seconds: float


@dataclass(frozen=True)
class Truncate:
    """A reply cut off by the output limit."""


@dataclass(frozen=True)
class Refuse:
    """A refusal (Anthropic ``stop_reason: refusal``)."""


@dataclass(frozen=True)
class Pause:
    """An Anthropic ``pause_turn`` reply without tool calls."""


class ScriptedModel(ABC):
    """Base of the fake models: the script, the request log, the checks."""

    path = ""
    served_model = ""

    def __init__(self, script: list[Any], *, api_key: str):
        self.script = list(script)
        self.api_key = api_key
        self.requests: list[dict[str, Any]] = []
        self.failures: list[str] = []
        self.observations: list[list[tuple[str, str, bool | None]]] = []
        self.resend: dict[str, Any] | None = None
        self.n = 0
        self.lock = threading.Lock()

    def handle(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]] | Drop | Stall:
        with self.lock:
            self.requests.append(body)
            try:
                assert path == self.path, f"path {path} instead of {self.path}"
                self.check_headers({k.lower(): v for k, v in headers.items()})
                if self.resend is not None:
                    assert body == self.resend, "a retried request differs from the failed one"
                self.check(body)
                assert self.script, "the script is exhausted"
            except (AssertionError, LookupError, TypeError) as exc:  # a malformed request fails the check too
                self.failures.append(f"{type(exc).__name__}: {exc}")
                return 400, {"error": {"type": "invalid_request_error", "message": f"fake check failed: {exc}"}}, {}
            item = self.script.pop(0)
            self.n += 1
            self.resend = body if isinstance(item, (Fault, Drop, Stall, Truncate)) else None
            if isinstance(item, Fault):
                return item.status, item.body, item.headers
            if isinstance(item, (Drop, Stall)):
                return item
            return 200, self.reply(item), {"request-id": f"req_{self.n}", "x-request-id": f"req_{self.n}"}

    def check_headers(self, headers: dict[str, str]) -> None:
        assert headers.get("authorization") == f"Bearer {self.api_key}", "missing or wrong bearer token"

    @abstractmethod
    def check(self, body: dict[str, Any]) -> None:
        """Assert what the request must contain."""

    @abstractmethod
    def reply(self, item: Any) -> dict[str, Any]:
        """The response body for a script item (a :class:`Call`, :class:`Truncate`, ...)."""


class AnthropicModel(ScriptedModel):
    """Messages API: thinking (with signature) before each tool use; redacted thinking on the third turn."""

    path = "/v1/messages"
    served_model = "claude-opus-5-5-20260922"
    usage = {"input_tokens": 1000, "output_tokens": 400, "cache_read_input_tokens": 3000,
             "cache_creation_input_tokens": 500, "output_tokens_details": {"thinking_tokens": 300}}

    def __init__(self, script: list[Any], *, api_key: str):
        super().__init__(script, api_key=api_key)
        self.sent: list[list[dict[str, Any]]] = []
        self.pending: list[str] = []

    def check_headers(self, headers: dict[str, str]) -> None:
        sent = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
        assert sent == self.api_key, "missing or wrong API key (x-api-key or bearer token)"
        assert headers.get("anthropic-version"), "no anthropic-version header"

    def check(self, body: dict[str, Any]) -> None:
        assert "temperature" not in body, "temperature sent"
        assert body["thinking"]["type"] == "adaptive" and body["output_config"] == {"effort": "high"}
        assert all(tool["strict"] is True and "input_schema" in tool for tool in body["tools"])
        assert '"minimum":' not in json.dumps(body["tools"]), "strict tool schemas must not carry numeric bounds"
        messages = body["messages"]
        assert messages[0]["role"] == "user"
        assistants = [m["content"] for m in messages if m["role"] == "assistant"]
        assert assistants == self.sent, "assistant content (thinking blocks, signatures) not passed back unchanged"
        if self.pending:
            last = messages[-1]
            assert last["role"] == "user", "the tool results must follow the assistant turn"
            results = [b for b in last["content"] if b["type"] == "tool_result"]
            assert last["content"][: len(results)] == results, "tool_result blocks must come first"
            assert [b["tool_use_id"] for b in results] == self.pending, "one tool_result per tool_use, in order"
            self.observations.append([(b["tool_use_id"], b["content"], b.get("is_error")) for b in results])
            self.pending = []

    def reply(self, item: Any) -> dict[str, Any]:
        thinking = {"type": "thinking", "thinking": f"step {self.n}", "signature": f"sig-{self.n}-EqQBCgIYAhIM"}
        content: list[dict[str, Any]]
        if isinstance(item, Truncate):
            content, stop = [thinking, {"type": "text", "text": "TRUNCATED PARTIAL"}], "max_tokens"
        elif isinstance(item, Refuse):
            content, stop = [{"type": "text", "text": "REFUSED"}], "refusal"
        elif isinstance(item, Pause):
            content, stop = [thinking, {"type": "text", "text": "pausing"}], "pause_turn"
            self.sent.append(content)
        else:
            first = {"type": "redacted_thinking", "data": f"ENCRYPTED-{self.n}"} if self.n == 3 else thinking
            uses = [{"type": "tool_use", "id": f"toolu_{self.n}", "name": item.tool, "input": item.arguments}]
            content, stop = [first, {"type": "text", "text": f"calling {item.tool}", "citations": None}, *uses], "tool_use"
            self.sent.append(content)
            self.pending = [use["id"] for use in uses]
        return {"id": f"msg_{self.n}", "type": "message", "role": "assistant", "model": self.served_model,
                "content": content, "stop_reason": stop, "stop_sequence": None, "usage": self.usage}


class ResponsesModel(ScriptedModel):
    """Responses API: a reasoning item with encrypted content, then a function call, each turn."""

    path = "/v1/responses"
    served_model = "gpt-6.1-sol-2026-09-29"
    usage = {"input_tokens": 2000, "input_tokens_details": {"cached_tokens": 1500, "cache_write_tokens": 100},
             "output_tokens": 700, "output_tokens_details": {"reasoning_tokens": 600}, "total_tokens": 2700}

    def __init__(self, script: list[Any], *, api_key: str):
        super().__init__(script, api_key=api_key)
        self.sent: list[tuple[list[dict[str, Any]], list[str]]] = []

    def check(self, body: dict[str, Any]) -> None:
        assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
        assert body["reasoning"]["effort"] == "high"
        assert all(t["type"] == "function" and t["strict"] is True and "parameters" in t for t in body["tools"])
        items = body["input"]
        assert items[0]["role"] == "user"
        pos = 1
        for output, call_ids in self.sent:
            assert items[pos: pos + len(output)] == output, "output items (encrypted reasoning, calls) not passed back unchanged"
            pos += len(output)
            outputs = items[pos: pos + len(call_ids)]
            assert [i.get("type") for i in outputs] == ["function_call_output"] * len(call_ids)
            assert [i["call_id"] for i in outputs] == call_ids, "one function_call_output per call, in order"
            if pos + len(call_ids) == len(items):
                self.observations.append([(i["call_id"], i["output"], None) for i in outputs])
            pos += len(call_ids)
            while pos < len(items) and items[pos].get("role") == "user":
                pos += 1
        assert pos == len(items), "unexpected input items"

    def reply(self, item: Any) -> dict[str, Any]:
        reasoning = {"type": "reasoning", "id": f"rs_{self.n}", "summary": [{"type": "summary_text", "text": f"plan {self.n}"}],
                     "encrypted_content": f"gAAAAB-encrypted-{self.n}"}
        response = {"id": f"resp_{self.n}", "object": "response", "model": self.served_model, "status": "completed",
                    "incomplete_details": None, "usage": self.usage}
        if isinstance(item, Truncate):
            return response | {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
                               "output": [reasoning]}
        call = {"type": "function_call", "id": f"fc_{self.n}", "call_id": f"call_{self.n}", "name": item.tool,
                "arguments": item.text(), "status": "completed"}
        self.sent.append(([reasoning, call], [call["call_id"]]))
        return response | {"output": [reasoning, call]}


class ChatModel(ScriptedModel):
    """Chat completions as vLLM serves them: ``reasoning_content`` and parsed ``tool_calls``."""

    path = "/v1/chat/completions"
    served_model = "qwen3-32b-awq"
    usage = {"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500}

    def __init__(self, script: list[Any], *, api_key: str):
        super().__init__(script, api_key=api_key)
        self.sent: list[list[dict[str, Any]]] = []

    def check(self, body: dict[str, Any]) -> None:
        assert body["tool_choice"] == "auto" and body["top_k"] == 20
        assert all(t["type"] == "function" and set(t["function"]) >= {"name", "parameters"} for t in body["tools"])
        messages = body["messages"]
        assert [m["role"] for m in messages[:2]] == ["system", "user"]
        assistants = [m for m in messages if m["role"] == "assistant"]
        assert [m.get("tool_calls") for m in assistants] == self.sent, "tool calls not passed back unchanged"
        assert all("reasoning_content" not in m for m in assistants), "earlier reasoning must not be sent back"
        if self.sent:
            ids = [c["id"] for c in self.sent[-1]]
            tail = messages[len(messages) - len(ids):]
            assert [m["role"] for m in tail] == ["tool"] * len(ids) and [m["tool_call_id"] for m in tail] == ids
            self.observations.append([(m["tool_call_id"], m["content"], None) for m in tail])

    def reply(self, item: Any) -> dict[str, Any]:
        message: dict[str, Any]
        if isinstance(item, Truncate):
            message, finish = {"role": "assistant", "content": "TRUNCATED PARTIAL", "reasoning_content": "long"}, "length"
        else:
            calls = [{"id": f"chatcmpl-tool-{self.n}", "type": "function",
                      "function": {"name": item.tool, "arguments": item.text()}}]
            message = {"role": "assistant", "content": None, "reasoning_content": f"thinking {self.n}", "tool_calls": calls}
            finish = "tool_calls"
            self.sent.append(calls)
        return {"id": f"chatcmpl-{self.n}", "object": "chat.completion", "model": self.served_model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": self.usage}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        answer = self.server.model.handle(self.path, dict(self.headers), body)  # type: ignore[attr-defined]
        if isinstance(answer, (Drop, Stall)):
            time.sleep(answer.seconds if isinstance(answer, Stall) else 0.0)
            self.close_connection = True
            return
        status, payload, headers = answer
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output quiet."""


class FakeServer:
    """A loopback HTTP server answering with ``model``; use as a context manager."""

    def __init__(self, model: ScriptedModel):
        self.model = model
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.model = model  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "FakeServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@dataclass
class FakeSandbox:
    """A stand-in for the sandbox at the protocol level: ``run_python`` executes nothing and writes
    the code as the workspace's ``final_model.py`` (the real sandbox is tested in test_sandbox.py)."""

    workspace: Path
    calls: int = 0

    def run_python(self, code: str):
        self.calls += 1
        (self.workspace / "final_model.py").write_text(code)

        class Result:
            limit_hit = None
            exit_code = 0

            @staticmethod
            def observation() -> str:
                return "exit status 0\nstdout:\nwritten"

        return Result()

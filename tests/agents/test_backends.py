"""The API backends against scripted fake servers on loopback (SPEC 2.5): full episodes, retries, failures."""

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from planted.agents.backend import FatalBackendError, Usage
from planted.agents.episode import run_episode
from planted.agents.evaluator import Evaluation
from planted.agents.prompts import load_prompts
from planted.agents.registry import MissingAPIKeyError, ModelConfig, make_backend
from planted.agents.retry import Prices, RetryPolicy, TokenCounts, TruncatedResponseError
from planted.agents.tools import TOOL_SCHEMAS
from planted.agents.transcript import EventLog, read_events
from planted.config import conf_dir

from .fakes import (FakeSandbox, PROTOCOL, AnthropicModel, Call, ChatModel, Drop, FakeServer, Fault, Pause, Refuse,
                    ResponsesModel, Stall, Truncate)

KEYS = {"anthropic": "sk-ant-api03-FAKE-SECRET-0123456789", "openai": "sk-proj-FAKE-SECRET-9876543210",
        "compat": "local-FAKE-SECRET-5555"}
FAST_RETRY = {"max_attempts": 3, "base_delay_s": 0.001, "max_delay_s": 0.01, "truncation_retries": 1}
FAKES = {"anthropic": AnthropicModel, "openai": ResponsesModel, "compat": ChatModel}
CONFIGS = {"anthropic": "opus", "openai": "sol", "compat": "qwen"}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """No real key, base URL or proxy from the developer's shell can leak into a test."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
                 "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def model_config(kind: str) -> dict:
    """The shipped model config with fast retries (and, for the local arm, a key to check)."""
    config = yaml.safe_load((conf_dir() / "model" / f"{CONFIGS[kind]}.yaml").read_text())
    config["retry"] = FAST_RETRY
    if kind == "compat":
        config["api_key_env"] = "COMPAT_TEST_KEY"
    return config


def fake_evaluator(model_file: Path, train: pd.DataFrame, test: pd.DataFrame) -> Evaluation:
    """Runs nothing: an evaluation whose forecasts are zero (the real evaluator is tested elsewhere)."""
    n = len(test)
    return Evaluation(months=test["month"].to_numpy(np.int64), forecasts=np.zeros(n), benchmark=np.zeros(n),
                      realised=test["asset_A"].to_numpy(np.float64), oos_r2=0.0, cw_stat=0.0, cw_pvalue=0.5,
                      evaluable=True, error=None, refit_every=12, sandboxed=False, wall_seconds=0.0)


def episode(tmp_path: Path, kind: str, script: list, monkeypatch, **override) -> tuple[dict, list[dict], Any]:
    """Run a full episode against a fake server; return the record, the transcript and the fake."""
    monkeypatch.setenv({"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY", "compat": "COMPAT_TEST_KEY"}[kind],
                       KEYS[kind])
    fake = FAKES[kind](script, api_key=KEYS[kind])
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"month": np.arange(40), "asset_A": rng.normal(size=40), "x1": rng.normal(size=40)})
    data_file = tmp_path / "data.csv"
    frame.to_csv(data_file, index=False)
    run_dir = tmp_path / "run"
    with FakeServer(fake) as server:
        backend = make_backend(model_config(kind) | override, base_url=f"{server.url}{'' if kind == 'anthropic' else '/v1'}")
        try:
            record = run_episode(
                backend=backend, prompts=load_prompts(), framing="neutral", visible=frame.iloc[:30],
                test=frame.iloc[30:], data_file=data_file, run_dir=run_dir, workspace=tmp_path / "ws",
                sandbox_factory=lambda workspace, data: FakeSandbox(workspace),
                evaluator=fake_evaluator,
            )
        finally:
            transcript = (run_dir / "transcript.jsonl").read_text()
            assert KEYS[kind] not in transcript, "an API key reached the transcript"
    return record, read_events(run_dir / "transcript.jsonl"), fake


def of(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["event"] == kind]


def test_anthropic_episode_passes_thinking_back_unchanged(tmp_path, monkeypatch):
    record, events, fake = episode(tmp_path, "anthropic", PROTOCOL, monkeypatch)
    assert fake.failures == [] and len(fake.requests) == 4
    assert record.stop == "submitted" and record.verdict == "does_not_beat" and record.n_specs == 1
    assert record.evaluation.evaluable is True
    assert record.served_models == ("claude-opus-5-5-20260922",)
    first = fake.requests[0]
    assert first["model"] == "claude-opus-5-5" and first["max_tokens"] == 32000 and "temperature" not in first
    assert first["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert first["output_config"] == {"effort": "high"} and first["cache_control"] == {"type": "ephemeral"}
    schema = next(t for t in first["tools"] if t["name"] == "report_prior")["input_schema"]
    assert schema["properties"]["probability"] == {"type": "number", "description":
                                                   "Probability that a model beats the benchmark. (minimum 0, maximum 1)"}
    last = fake.requests[-1]["messages"]
    assert last[5]["content"][0] == {"type": "redacted_thinking", "data": "ENCRYPTED-3"}
    assert last[1]["content"][0]["signature"] == "sig-1-EqQBCgIYAhIM"
    assert [o[0][2] for o in fake.observations] == [False, False, False]
    # 1000 uncached + 3000 cached + 500 written input, 400 output: (1000*4 + 3000*0.2 + 500*5 + 400*20) / 1e6
    responses = of(events, "api_response")
    assert len(responses) == 4 and len(of(events, "api_request")) == 4
    assert responses[0]["usage"]["input_tokens"] == 4500 and responses[0]["usage"]["reasoning_tokens"] == 300
    assert responses[0]["cost_usd"] == pytest.approx(0.0151) and record.usage.cost_usd == pytest.approx(4 * 0.0151)
    assert responses[0]["served_model"] == "claude-opus-5-5-20260922" and responses[0]["reasoning"] == "step 1"
    assert responses[0]["body"]["content"][0]["signature"] == "sig-1-EqQBCgIYAhIM"  # the response, verbatim


def test_openai_episode_passes_encrypted_reasoning_back_and_logs_the_served_model(tmp_path, monkeypatch):
    record, events, fake = episode(tmp_path, "openai", PROTOCOL, monkeypatch)
    assert fake.failures == [] and len(fake.requests) == 4 and record.stop == "submitted"
    first = fake.requests[0]
    assert first["model"] == "gpt-6.1-sol" and first["reasoning"] == {"effort": "high", "summary": "auto"}
    assert first["store"] is False and first["max_output_tokens"] == 32000 and "temperature" not in first
    tool = next(t for t in first["tools"] if t["name"] == "submit_final")
    assert tool == {"type": "function", "name": "submit_final", "description": TOOL_SCHEMAS["submit_final"]["description"],
                    "parameters": TOOL_SCHEMAS["submit_final"]["parameters"], "strict": True}
    items = fake.requests[-1]["input"]
    assert items[1]["encrypted_content"] == "gAAAAB-encrypted-1" and items[3]["type"] == "function_call_output"
    assert record.served_models == ("gpt-6.1-sol-2026-09-29",)
    assert {e["served_model"] for e in of(events, "api_response")} == {"gpt-6.1-sol-2026-09-29"}
    # 2000 input of which 1500 cached and 100 written, 700 output (600 reasoning, billed as output)
    usage = of(events, "api_response")[0]["usage"]
    assert usage == {"input_tokens": 2000, "output_tokens": 700, "reasoning_tokens": 600, "cached_tokens": 1500,
                     "cost_usd": pytest.approx((400 * 2 + 1500 * 0.1 + 100 * 2.5 + 700 * 10) / 1e6)}


def test_compat_episode_logs_reasoning_content(tmp_path, monkeypatch):
    record, events, fake = episode(tmp_path, "compat", PROTOCOL, monkeypatch)
    assert fake.failures == [] and record.stop == "submitted" and record.served_models == ("qwen3-32b-awq",)
    first = fake.requests[0]
    assert first["temperature"] == 0.6 and first["top_p"] == 0.95 and first["min_p"] == 0.0
    assert "max_tokens" not in first and first["messages"][0]["role"] == "system"
    assert [e["reasoning"] for e in of(events, "api_response")] == [f"thinking {n}" for n in range(1, 5)]
    assert record.usage.cost_usd == 0.0 and record.usage.input_tokens == 4 * 1200


@pytest.mark.parametrize(
    ("kind", "fault", "status"),
    [
        ("anthropic", Fault(429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
                            {"retry-after": "0"}), 429),
        ("anthropic", Fault(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}), 529),
        ("openai", Fault(429, {"error": {"type": "requests", "code": "rate_limit_exceeded", "message": "RPM"}}), 429),
        ("openai", Fault(503, {"error": {"type": "server_error", "message": "unavailable"}}), 503),
        ("compat", Drop(), None),
    ],
)
def test_transient_errors_are_retried_on_the_same_turn_and_logged(tmp_path, monkeypatch, kind, fault, status):
    record, events, fake = episode(tmp_path, kind, [PROTOCOL[0], fault, *PROTOCOL[1:]], monkeypatch)
    assert fake.failures == [] and len(fake.requests) == 5 and record.stop == "submitted"
    retries = of(events, "retry")
    assert len(retries) == 1 and retries[0]["status"] == status and retries[0]["turn"] == 2
    assert len(of(events, "api_request")) == 4  # the retry resent the same request, logged once


def test_a_timeout_is_retried(tmp_path, monkeypatch):
    record, events, fake = episode(tmp_path, "openai", [Stall(2.5), *PROTOCOL], monkeypatch, request_timeout_s=1.0)
    assert fake.failures == [] and record.stop == "submitted"
    retries = of(events, "retry")
    assert len(retries) == 1 and retries[0]["error_type"] == "APITimeoutError" and retries[0]["turn"] == 1


@pytest.mark.parametrize(
    ("kind", "fault", "fragment"),
    [
        ("anthropic", Fault(401, {"type": "error", "error": {"type": "authentication_error",
                                                             "message": "invalid x-api-key"}}), "authentication failed"),
        ("openai", Fault(401, {"error": {"type": "invalid_request_error", "code": "invalid_api_key",
                                         "message": f"Incorrect API key provided: {KEYS['openai']}."}}),
         "authentication failed"),
        ("openai", Fault(429, {"error": {"type": "insufficient_quota", "code": "insufficient_quota",
                                         "message": "You exceeded your current quota"}}), "credit or quota exhausted"),
        ("anthropic", Fault(400, {"type": "error", "error": {"type": "invalid_request_error", "message":
                                  "Your credit balance is too low to access the Anthropic API."}}), "credit or quota"),
        ("anthropic", Fault(404, {"type": "error", "error": {"type": "not_found_error", "message": "model: claude-x"}}),
         "unknown model"),
        ("compat", Fault(403, {"error": {"type": "forbidden", "message": "no access"}}), "permission denied"),
    ],
)
def test_fatal_errors_stop_the_episode_without_retry(tmp_path, monkeypatch, kind, fault, fragment):
    with pytest.raises(FatalBackendError, match=fragment) as caught:
        episode(tmp_path, kind, [fault], monkeypatch)
    assert KEYS[kind] not in str(caught.value)
    events = read_events(tmp_path / "run" / "transcript.jsonl")
    assert of(events, "retry") == [] and of(events, "api_error")[0]["kind"] == "fatal"


@pytest.mark.parametrize("kind", ["anthropic", "openai", "compat"])
def test_a_truncated_response_is_flagged_and_retried_never_read(tmp_path, monkeypatch, kind):
    record, events, fake = episode(tmp_path, kind, [PROTOCOL[0], Truncate(), *PROTOCOL[1:]], monkeypatch)
    assert fake.failures == [] and record.stop == "submitted" and len(fake.requests) == 5
    assert fake.requests[1] == fake.requests[2]
    flagged = [e for e in of(events, "api_response") if e["truncated"]]
    assert len(flagged) == 1 and of(events, "truncated")[0]["retrying"] is True
    assert all("TRUNCATED" not in e["text"] for e in of(events, "model_turn"))
    assert record.record["prior"] is not None and record.budget_used == 2


def test_truncation_on_every_attempt_is_an_infrastructure_error(tmp_path, monkeypatch):
    with pytest.raises(TruncatedResponseError, match="raise max_tokens"):
        episode(tmp_path, "anthropic", [Truncate(), Truncate()], monkeypatch)
    events = read_events(tmp_path / "run" / "transcript.jsonl")
    assert [e["retrying"] for e in of(events, "truncated")] == [True, False] and of(events, "model_turn") == []


@pytest.mark.parametrize("kind", ["openai", "compat"])
def test_malformed_tool_arguments_get_an_error_observation_and_the_episode_continues(tmp_path, monkeypatch, kind):
    broken = Call("run_python", '{"code": "def fit(train):\\n')
    record, events, fake = episode(tmp_path, kind, [PROTOCOL[0], broken, *PROTOCOL[1:]], monkeypatch)
    assert fake.failures == [] and record.stop == "submitted"
    assert "not valid JSON" in fake.observations[1][0][1]
    malformed = of(events, "malformed_tool_arguments")
    assert len(malformed) == 1 and malformed[0]["arguments"] == broken.arguments and malformed[0]["count"] == 1
    assert record.invalid_calls == 1 and record.budget_used == 2


def test_anthropic_error_observations_carry_is_error(tmp_path, monkeypatch):
    wrong = Call("report_prior", {"verdict": "beats", "probability": 1.4})
    record, events, fake = episode(tmp_path, "anthropic", [wrong, *PROTOCOL], monkeypatch)
    assert fake.failures == [] and record.stop == "submitted"
    call_id, content, is_error = fake.observations[0][0]
    assert is_error is True and "greater than the maximum" in content
    assert [o[0][2] for o in fake.observations[1:]] == [False, False, False]


def test_anthropic_refusal_is_dropped_from_the_conversation_and_nudged(tmp_path, monkeypatch):
    record, events, fake = episode(tmp_path, "anthropic", [Refuse(), *PROTOCOL], monkeypatch)
    assert fake.failures == [] and record.stop == "submitted"
    second = fake.requests[1]["messages"]
    assert len(second) == 1 and second[0]["content"][-1] == {"type": "text", "text": load_prompts().nudge}
    assert of(events, "refusal")[0]["turn"] == 1 and of(events, "model_turn")[0]["stop_reason"] == "refusal"


def test_anthropic_pause_turn_is_continued_with_the_paused_content(tmp_path, monkeypatch):
    record, events, fake = episode(tmp_path, "anthropic", [PROTOCOL[0], Pause(), *PROTOCOL[1:]], monkeypatch)
    assert fake.failures == [] and record.stop == "submitted"
    assert fake.requests[2]["messages"][-1]["role"] == "assistant" and len(of(events, "pause_turn")) == 1
    assert len(of(events, "model_turn")) == 4


def test_missing_api_key_is_reported_before_any_request():
    for name, variable in (("opus", "ANTHROPIC_API_KEY"), ("sol", "OPENAI_API_KEY"), ("terra", "OPENAI_API_KEY")):
        config = yaml.safe_load((conf_dir() / "model" / f"{name}.yaml").read_text())
        with pytest.raises(MissingAPIKeyError, match=variable):
            make_backend(config, base_url="http://127.0.0.1:9")  # nothing listens there: no request is made
    with pytest.raises(MissingAPIKeyError, match="MY_GATEWAY_KEY"):
        make_backend(model_config("compat") | {"api_key_env": "MY_GATEWAY_KEY"})
    assert make_backend(yaml.safe_load((conf_dir() / "model" / "scripted.yaml").read_text())).name == "scripted"


def test_sdk_base_url_variable_is_honoured_and_an_explicit_url_overrides_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEYS["anthropic"])
    log_path = tmp_path / "t.jsonl"
    for explicit in (False, True):
        fake = AnthropicModel([PROTOCOL[0]], api_key=KEYS["anthropic"])
        with FakeServer(fake) as server:
            monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9" if explicit else server.url)
            backend = make_backend(model_config("anthropic"), base_url=server.url if explicit else None)
            with EventLog(log_path) as log:
                turn = backend.open_session(system="s", user="u", tools=TOOL_SCHEMAS, log=log).next_turn([])
        assert turn.tool_calls[0].name == "report_prior" and fake.failures == []


def test_shipped_model_configs_are_valid():
    configs = {path.stem: ModelConfig.from_dict(yaml.safe_load(path.read_text()))
               for path in (conf_dir() / "model").glob("*.yaml")}
    assert {"opus", "sol", "terra", "qwen", "scripted"} <= set(configs)
    assert configs["opus"].backend == "anthropic" and configs["opus"].effort == "high"
    assert configs["sol"].model_id == "gpt-6.1-sol" and configs["terra"].model_id == "gpt-6.1-terra"
    vllm = configs["qwen"].vllm
    assert vllm["hf_repo"] == "Qwen/Qwen3-32B-AWQ" and len(vllm["revision"]) == 40
    assert vllm["tool_call_parser"] == "hermes" and vllm["reasoning_parser"] == "qwen3"
    with pytest.raises(ValueError, match="unknown model config keys \\['efort'\\]"):
        ModelConfig.from_dict(yaml.safe_load((conf_dir() / "model" / "opus.yaml").read_text()) | {"efort": "high"})


def test_cost_is_priced_per_million_tokens():
    prices = Prices(input_per_mtok=4.0, output_per_mtok=20.0, cached_input_per_mtok=0.2, cache_write_per_mtok=5.0)
    usage = prices.usage(TokenCounts(input_tokens=1_000_000, output_tokens=500_000, reasoning_tokens=400_000,
                                     cached_tokens=600_000, cache_write_tokens=100_000))
    assert usage == Usage(1_000_000, 500_000, 400_000, 600_000, pytest.approx(300_000 * 4e-6 + 600_000 * 0.2e-6
                                                                             + 100_000 * 5e-6 + 500_000 * 20e-6))
    assert Prices(1.0, 2.0).usage(TokenCounts(input_tokens=10, cached_tokens=10)).cost_usd == pytest.approx(10e-6)


def test_backoff_grows_with_jitter_and_respects_retry_after():
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=8.0)
    rng = np.random.default_rng(1)
    for attempt, ceiling in ((1, 1.0), (2, 2.0), (3, 4.0), (6, 8.0)):
        delays = [policy.delay(attempt, rng=rng) for _ in range(200)]
        assert ceiling / 2 <= min(delays) and max(delays) <= ceiling and np.std(delays) > 0
    assert policy.delay(1, rng=rng, retry_after=5.0) == 5.0 and policy.delay(1, rng=rng, retry_after=50.0) == 8.0


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_retries_reach_the_console_rate_limited():
    from planted.agents.retry import NOTICE_INTERVAL_S, RetryMonitor

    clock, lines = _Clock(), []
    monitor = RetryMonitor(clock=clock, write=lines.append)
    for step in range(4):
        monitor.notice(f"retry {step}")
        clock.now += NOTICE_INTERVAL_S / 5
    clock.now += NOTICE_INTERVAL_S
    monitor.notice("retry 4")
    assert lines == ["retry 0", "retry 4 (and 3 more retries since the last notice)"]


def test_a_backend_unreachable_past_max_outage_stops_the_grid(tmp_path, monkeypatch):
    """Connection errors on every request for longer than retry.max_outage_s are fatal (they would
    otherwise be retried run after run); a success in between resets the clock."""
    from planted.agents.backend import FatalBackendError
    from planted.agents.retry import ApiCaller, Prices, RetryMonitor
    from planted.agents.transcript import EventLog

    clock, lines = _Clock(), []
    monkeypatch.setattr("planted.agents.retry.time.sleep", lambda s: setattr(clock, "now", clock.now + s))
    outcomes = iter([ConnectionError("refused"), ConnectionError("refused"), ({"ok": 1}, "req-1")] +
                    [ConnectionError("refused")] * 20)

    def send(body):
        clock.now += 100.0  # each attempt takes 100 s to time out
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    with EventLog(tmp_path / "t.jsonl") as log:
        caller = ApiCaller(backend="compat", send=send, describe=lambda d: d, policy=RetryPolicy(
            max_attempts=50, base_delay_s=60.0, max_delay_s=60.0, max_outage_s=600.0), prices=Prices(0.0, 0.0),
            log=log, status_errors=(), connection_errors=(ConnectionError,), rng=np.random.default_rng(0),
            monitor=RetryMonitor(clock=clock, write=lines.append))
        assert caller._send({}, turn=1)[0] == {"ok": 1}  # two failures, then a success: no outage left
        started = clock.now
        with pytest.raises(FatalBackendError, match=r"unreachable for \d+ s \(more than retry.max_outage_s = 600\)"):
            caller._send({}, turn=2)
    assert 600 < clock.now - started < 600 + 2 * 160  # stopped within one attempt of the limit
    assert lines and "compat: connection" in lines[0] and "attempt 2 of 50" in lines[0]

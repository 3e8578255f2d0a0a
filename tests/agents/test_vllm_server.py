"""The local arm's launcher against a fake ``vllm`` executable on loopback (no GPU, no vLLM).

The fake is a small Python script put first on ``PATH``: it records its arguments and process
ids, starts a sleeping child (like vLLM's engine process), and serves ``/health``,
``/v1/models`` and the scripted chat-completions model of :mod:`fakes` on the requested port.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from planted.agents.registry import make_backend
from planted.agents.tools import TOOL_SCHEMAS, ToolResult
from planted.agents.transcript import EventLog
from planted.agents.vllm_server import VllmServer, free_port, group_alive, serve_forever, serving
from planted.agents.vllm_settings import VllmNotInstalledError, VllmServerError, VllmSettings, vllm_command
from planted.config import conf_dir

FAKE_VLLM = '''#!{python}
"""Fake `vllm serve` for the launcher tests."""
import json, os, signal, subprocess, sys, time
sys.path.insert(0, {fakes_dir!r})
from http.server import ThreadingHTTPServer
from fakes import PROTOCOL, ChatModel, _Handler

argv = sys.argv[1:]
with open(os.environ["FAKE_VLLM_ARGV"], "w") as f:
    json.dump(argv, f)
mode = os.environ.get("FAKE_VLLM_MODE", "ok")
print("fake vllm: loading weights", flush=True)
if mode == "exit":
    print("torch.OutOfMemoryError: CUDA out of memory (fake)", file=sys.stderr, flush=True)
    sys.exit(3)
if mode == "ignore_term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(os.environ["FAKE_VLLM_PIDS"], "w") as f:
    json.dump([os.getpid(), child.pid], f)
port = int(argv[argv.index("--port") + 1])
name = argv[argv.index("--served-model-name") + 1]
time.sleep(0.3)


class Handler(_Handler):
    def do_GET(self):
        if self.path == "/health":
            status, body = (503 if mode == "never_healthy" else 200), b""
        elif self.path == "/v1/models":
            status, body = 200, json.dumps({{"object": "list", "data": [{{"id": name, "object": "model"}}]}}).encode()
        else:
            status, body = 404, b"{{}}"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
httpd.model = ChatModel(PROTOCOL, api_key="EMPTY")
print("fake vllm: serving", flush=True)
httpd.serve_forever()
'''


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    """No proxy or key from the developer's shell can leak into a test."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    """Install the fake ``vllm`` first on PATH; return a helper that reads what it recorded."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "vllm"
    script.write_text(FAKE_VLLM.format(python=sys.executable, fakes_dir=str(Path(__file__).parent)))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_VLLM_ARGV", str(tmp_path / "argv.json"))
    monkeypatch.setenv("FAKE_VLLM_PIDS", str(tmp_path / "pids.json"))

    class Recorded:
        @staticmethod
        def argv() -> list[str]:
            return json.loads((tmp_path / "argv.json").read_text())

        @staticmethod
        def pids() -> list[int]:
            return json.loads((tmp_path / "pids.json").read_text())

    return Recorded


def qwen_config() -> dict:
    config = yaml.safe_load((conf_dir() / "model" / "qwen.yaml").read_text())
    config["retry"] = {"max_attempts": 2, "base_delay_s": 0.01, "max_delay_s": 0.02, "truncation_retries": 0}
    config["vllm"] |= {"port": free_port(), "health_timeout_s": 20, "shutdown_grace_s": 5}
    return config


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def assert_all_gone(pids: list[int]) -> None:
    assert not group_alive(pids[0]), "the server's process group is still running"
    assert not any(running(pid) for pid in pids), "a server process survived"


def test_command_line_of_the_qwen_config():
    settings = VllmSettings.from_config(qwen_config()["vllm"])
    argv = vllm_command(settings, executable="vllm", port=8123)
    assert argv[:3] == ["vllm", "serve", "Qwen/Qwen3-32B-AWQ"]
    pairs = dict(zip(argv[3::], argv[4::]))
    assert pairs["--revision"] == pairs["--tokenizer-revision"] == "0499c3ac83fdef8810b907a23894ba91e95eddd8"
    assert pairs["--served-model-name"] == "qwen3-32b-awq" and pairs["--host"] == "127.0.0.1" and pairs["--port"] == "8123"
    assert pairs["--tool-call-parser"] == "hermes" and pairs["--reasoning-parser"] == "qwen3"
    assert pairs["--max-model-len"] == "32768" and pairs["--gpu-memory-utilization"] == "0.9"
    assert "--enable-auto-tool-choice" in argv and "--quantization" not in argv
    quantized = VllmSettings.from_config(qwen_config()["vllm"] | {"quantization": "awq", "extra_args": ["--seed", "0"]})
    assert vllm_command(quantized, executable="vllm", port=1)[-4:] == ["--quantization", "awq", "--seed", "0"]


@pytest.mark.parametrize(("change", "message"), [
    ({"revision": "main"}, "not a pinned commit"),
    ({"host": "0.0.0.0"}, "only listen on 127.0.0.1"),
    ({"tool_call_parser": None}, "needs vllm.tool_call_parser"),
    ({"gpu_memory": 0.5}, "unknown vllm settings"),
])
def test_settings_are_checked(change, message):
    with pytest.raises(VllmServerError, match=message):
        VllmSettings.from_config(qwen_config()["vllm"] | change)
    with pytest.raises(VllmServerError, match="no vllm section"):
        VllmSettings.from_config({})


def test_missing_executable_names_the_local_extra(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    server = VllmServer(qwen_config()["vllm"], log=tmp_path / "vllm.log")
    with pytest.raises(VllmNotInstalledError, match=r"pip install 'planted\[local\]'.*GPU"):
        server.start()
    assert not (tmp_path / "vllm.log").exists(), "nothing may be done before the check"


def test_end_to_end_chat_through_make_backend(fake_vllm, tmp_path):
    config = qwen_config()
    port = config["vllm"]["port"]
    with VllmServer(config["vllm"], log=tmp_path / "vllm.log", poll_interval_s=0.05) as server:
        assert server.url == f"http://127.0.0.1:{port}/v1"
        argv = fake_vllm.argv()
        assert argv[:2] == ["serve", "Qwen/Qwen3-32B-AWQ"]
        assert argv[argv.index("--revision") + 1] == config["vllm"]["revision"]
        assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv[argv.index("--port") + 1] == str(port)
        assert argv[argv.index("--tool-call-parser") + 1] == "hermes"
        assert argv[argv.index("--reasoning-parser") + 1] == "qwen3"
        backend = make_backend(config, base_url=server.url)
        with EventLog(tmp_path / "transcript.jsonl") as log:
            session = backend.open_session(system="You are a researcher.", user="Begin.", tools=TOOL_SCHEMAS, log=log)
            first = session.next_turn([])
            assert [c.name for c in first.tool_calls] == ["report_prior"] and first.served_model == "qwen3-32b-awq"
            second = session.next_turn([ToolResult(first.tool_calls[0].call_id, "prior recorded")])
            assert [c.name for c in second.tool_calls] == ["run_python"]
        backend.client.close()
        pids = fake_vllm.pids()
        assert all(running(pid) for pid in pids)
    assert_all_gone(pids)
    log_text = (tmp_path / "vllm.log").read_text()
    assert "# planted: " in log_text and "fake vllm: serving" in log_text


def test_stopped_after_an_exception_in_the_block(fake_vllm, tmp_path):
    with pytest.raises(RuntimeError, match="episode failed"):
        with VllmServer(qwen_config()["vllm"], log=tmp_path / "vllm.log", poll_interval_s=0.05):
            pids = fake_vllm.pids()
            raise RuntimeError("episode failed")
    assert_all_gone(pids)


@pytest.fixture()
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt during the test, even when the runner was started with SIGINT
    ignored (a background job without job control, as in some CI runners)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_stopped_after_ctrl_c(fake_vllm, tmp_path, ctrl_c_raises):
    with pytest.raises(KeyboardInterrupt):
        with VllmServer(qwen_config()["vllm"], log=tmp_path / "vllm.log", poll_interval_s=0.05):
            pids = fake_vllm.pids()
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(10)
    assert_all_gone(pids)


def test_stopped_after_sigterm_to_planted(fake_vllm, tmp_path):
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        pytest.skip("the test runner has its own SIGTERM handler")
    with pytest.raises(SystemExit) as exit_info:
        with VllmServer(qwen_config()["vllm"], log=tmp_path / "vllm.log", poll_interval_s=0.05):
            pids = fake_vllm.pids()
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10)
    assert exit_info.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, "the handler must be restored"
    assert_all_gone(pids)


def test_sigkill_after_the_grace_period(fake_vllm, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_MODE", "ignore_term")
    settings = qwen_config()["vllm"] | {"shutdown_grace_s": 0.5}
    start = time.monotonic()
    with VllmServer(settings, log=tmp_path / "vllm.log", poll_interval_s=0.05):
        pids = fake_vllm.pids()
    assert_all_gone(pids)
    assert time.monotonic() - start < 8


def test_early_exit_quotes_the_log(fake_vllm, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_MODE", "exit")
    with pytest.raises(VllmServerError, match="exited with status 3") as info:
        VllmServer(qwen_config()["vllm"], log=tmp_path / "vllm.log", poll_interval_s=0.05).start()
    assert "CUDA out of memory (fake)" in str(info.value) and str(tmp_path / "vllm.log") in str(info.value)


def test_never_healthy_times_out_and_stops(fake_vllm, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_MODE", "never_healthy")
    settings = qwen_config()["vllm"] | {"health_timeout_s": 1.5}
    server = VllmServer(settings, log=tmp_path / "vllm.log", poll_interval_s=0.05)
    with pytest.raises(VllmServerError, match=r"did not answer http://127.0.0.1:\d+/health within 1.5 s") as info:
        server.start()
    assert "fake vllm: serving" in str(info.value)
    assert_all_gone(fake_vllm.pids())


def test_port_in_use_is_refused(fake_vllm, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        settings = qwen_config()["vllm"] | {"port": sock.getsockname()[1]}
        with pytest.raises(VllmServerError, match="already in use"):
            VllmServer(settings, log=tmp_path / "vllm.log").start()
    assert not (tmp_path / "argv.json").exists(), "vllm must not have been started"


def test_serve_forever_until_ctrl_c(fake_vllm, tmp_path, ctrl_c_raises):
    out = io.StringIO()
    settings = qwen_config()["vllm"]
    recorded: list[int] = []

    def press_ctrl_c() -> None:
        deadline = time.monotonic() + 20
        while "Ctrl-C stops it" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.02)
        recorded.extend(fake_vllm.pids())
        os.kill(os.getpid(), signal.SIGINT)

    presser = threading.Thread(target=press_ctrl_c)
    presser.start()
    try:
        assert serve_forever(settings, log=tmp_path / "vllm.log", out=out, poll_interval_s=0.05) == 0
    finally:
        presser.join()
    text = out.getvalue()
    assert f"http://127.0.0.1:{settings['port']}/v1" in text and "stopping" in text
    assert_all_gone(recorded)


def test_serving_launches_only_when_asked(fake_vllm, tmp_path):
    config = qwen_config()
    with serving(config, base_url="http://127.0.0.1:9/v1") as url:
        assert url == "http://127.0.0.1:9/v1"
    with serving({k: v for k, v in config.items() if k != "vllm"}) as url:
        assert url is None
    assert not (tmp_path / "argv.json").exists(), "nothing may be launched without a vllm section or with --base-url"
    with serving(config, log=tmp_path / "vllm.log") as url:
        assert url == f"http://127.0.0.1:{config['vllm']['port']}/v1"
        pids = fake_vllm.pids()
    assert_all_gone(pids)

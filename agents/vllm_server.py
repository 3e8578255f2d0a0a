"""Start, watch and stop a local vLLM server for the local arm (SPEC 2.5, ``openai_compat``).

:class:`VllmServer` runs ``vllm serve <hf_repo> --revision <commit> ...`` with the launch settings of
a model config's ``vllm:`` section (see ``conf/model/qwen.yaml``) as a child process in its own
process group, its output going to a log file. It waits until ``GET /health`` answers 200 and
``GET /v1/models`` lists the served model name, and hands out the base URL
``http://127.0.0.1:<port>/v1`` for :func:`planted.agents.registry.make_backend`. On leaving the
``with`` block, normally, by an exception or by Ctrl-C, it stops the whole process group (vLLM
runs its engine in child processes): SIGTERM, then SIGKILL after ``shutdown_grace_s``.

The server only ever listens on the loopback interface (it has no authentication), and vLLM's
usage statistics are switched off (``VLLM_NO_USAGE_STATS=1``) unless the environment says
otherwise. :func:`serving` launches the server only when a model config has a ``vllm`` section
and no ``--base-url`` was given; :func:`serve_forever` is ``planted serve``: start, print the
URL, wait for Ctrl-C, stop.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager, nullcontext
from pathlib import Path
from types import FrameType
from typing import Any, ContextManager, Iterator, Mapping, TextIO

from planted.agents.vllm_settings import VllmServerError, VllmSettings, find_vllm, vllm_command

POLL_INTERVAL_S = 0.5
KILL_WAIT_S = 10.0
TAIL_LINES = 40


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (another process may take it before vLLM binds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    """``GET url`` on loopback, ignoring any proxy settings; (status, body), status 0 when unreachable."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), b""
    except (OSError, ValueError):
        return 0, b""


def group_alive(pgid: int) -> bool:
    """Whether any process of process group ``pgid`` is still running (zombies do not count).

    On Linux the process table is read from ``/proc`` (so that orphaned zombies that nobody reaps
    do not count); elsewhere ``killpg(pgid, 0)`` decides.
    """
    proc = Path("/proc")
    if (proc / "self" / "stat").is_file():
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            state, _ppid, pgrp = stat[stat.rindex(")") + 2:].split()[:3]
            if int(pgrp) == pgid and state not in ("Z", "X"):
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


class VllmServer:
    """A ``vllm serve`` child process for the duration of a ``with`` block.

    Parameters
    ----------
    settings : mapping or VllmSettings
        The model config's ``vllm`` section.
    log : path, optional
        File that receives the server's stdout and stderr (appended). Default: a new file
        ``vllm-*.log`` in the temporary directory, kept after the server stops.
    poll_interval_s : float
        Seconds between health checks.

    Attributes
    ----------
    config : VllmSettings
        The checked settings.
    port : int
        The listening port (the configured one, or the free port picked for ``port: 0``).
    log_path : Path
        The server's log file.

    Examples
    --------
    >>> with VllmServer(config["vllm"], log=out / "vllm.log") as server:   # doctest: +SKIP
    ...     backend = make_backend(config, base_url=server.url)

    Notes
    -----
    The child runs in a new session (its own process group), so a Ctrl-C in the terminal reaches
    only planted, which then stops the group in order: SIGTERM to every process of the group,
    up to ``shutdown_grace_s`` seconds for them to exit (a second Ctrl-C skips the wait), then
    SIGKILL. While the server runs in the main thread's ``with`` block, SIGTERM and SIGHUP to
    planted (a closed terminal, a job scheduler) end the block through ``SystemExit`` so that the
    server is stopped too; handlers other than the default are left alone. A SIGKILL to planted
    cannot be caught: the server then keeps running and must be stopped by hand
    (``kill -- -<pgid>``; the log names the process group). POSIX only.
    """

    def __init__(self, settings: Mapping[str, Any] | VllmSettings, *, log: Path | None = None,
                 poll_interval_s: float = POLL_INTERVAL_S):
        self.config = VllmSettings.from_config(settings)
        self.log = log
        self.poll_interval_s = poll_interval_s
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.log_path = Path()
        self._log_handle: TextIO | None = None
        self._log_start = 0
        self._saved_handlers: dict[int, Any] = {}

    @property
    def url(self) -> str:
        """Base URL of the OpenAI-compatible API, ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def returncode(self) -> int | None:
        """Exit status of the server process (``None`` while it runs or before it started)."""
        return None if self.process is None else self.process.poll()

    def __enter__(self) -> "VllmServer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> str:
        """Launch the server and wait until it is healthy; return :attr:`url`.

        Raises
        ------
        VllmNotInstalledError
            Before anything else, when ``vllm`` is not installed.
        VllmServerError
            The port is taken, the server exited early, did not become healthy within
            ``health_timeout_s``, or does not serve the configured model name; the message quotes
            the end of the log. The server is stopped before the error is raised.
        """
        if self.process is not None:
            raise VllmServerError("this server was already started")
        executable = find_vllm()
        s = self.config
        self.port = int(s.port) or free_port()
        if _port_in_use(self.port):
            raise VllmServerError(
                f"port {self.port} on 127.0.0.1 is already in use (another vLLM server?); stop it, choose another "
                f"vllm.port, or use the running server with --base-url http://127.0.0.1:{self.port}/v1"
            )
        argv = vllm_command(s, executable=executable, port=self.port)
        if self.log is None:
            handle, name = tempfile.mkstemp(prefix="vllm-", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
        else:
            self.log_path = Path(self.log)
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_handle = open(self.log_path, "a", encoding="utf-8")
        self._log_start = self._log_handle.tell()
        self._log_handle.write(f"# planted: {shlex.join(argv)}\n")
        self._log_handle.flush()
        env = {"VLLM_NO_USAGE_STATS": "1", **os.environ, "PYTHONUNBUFFERED": "1"}
        self._catch_termination()
        try:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._log_handle,
                                            stderr=subprocess.STDOUT, start_new_session=True, env=env)
            self._log_handle.write(f"# planted: process group {self.process.pid}\n")
            self._log_handle.flush()
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self.url

    def _wait_healthy(self) -> None:
        s = self.config
        assert self.process is not None
        deadline = time.monotonic() + s.health_timeout_s
        health = f"http://127.0.0.1:{self.port}/health"
        while True:
            status = self.process.poll()
            if status is not None:
                raise VllmServerError(
                    f"vllm exited with status {status} before it became healthy (vLLM needs a CUDA GPU with enough "
                    f"free memory). {self.tail()}"
                )
            if _get(health)[0] == 200:
                break
            if time.monotonic() >= deadline:
                raise VllmServerError(
                    f"vllm did not answer {health} within {s.health_timeout_s:g} s (raise vllm.health_timeout_s if "
                    f"the weights are still downloading). {self.tail()}"
                )
            time.sleep(self.poll_interval_s)
        status, body = _get(f"http://127.0.0.1:{self.port}/v1/models")
        if status != 200 or f'"{s.served_model_name}"'.encode() not in body:
            raise VllmServerError(
                f"the server on port {self.port} is healthy but does not list the model {s.served_model_name!r} at "
                f"/v1/models (HTTP {status}). {self.tail()}"
            )

    def tail(self, lines: int = TAIL_LINES) -> str:
        """The last ``lines`` lines this server wrote to its log, introduced by the log's path."""
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(self._log_start)
                text = handle.read().decode("utf-8", errors="replace")
        except OSError as exc:
            return f"(its log {self.log_path} cannot be read: {exc})"
        last = text.splitlines()[-lines:]
        body = "\n".join(f"    {line}" for line in last) if last else "    (empty)"
        return f"Last lines of {self.log_path}:\n{body}"

    def stop(self) -> None:
        """Stop the process group: SIGTERM, then SIGKILL after the grace period. Safe to call twice."""
        process, self.process = self.process, None
        interrupted = False
        try:
            if process is not None:
                pgid = process.pid
                self._signal_group(pgid, signal.SIGTERM)
                try:
                    gone = self._wait_gone(process, pgid, self.config.shutdown_grace_s)
                except KeyboardInterrupt:
                    gone, interrupted = False, True
                if not gone:
                    self._signal_group(pgid, signal.SIGKILL)
                    if not self._wait_gone(process, pgid, KILL_WAIT_S):
                        raise VllmServerError(f"process group {pgid} of vllm survived SIGKILL; stop it by hand")
        finally:
            self._restore_handlers()
            if self._log_handle is not None:
                self._log_handle.close()
                self._log_handle = None
        if interrupted:
            raise KeyboardInterrupt

    @staticmethod
    def _signal_group(pgid: int, signum: int) -> None:
        try:
            os.killpg(pgid, signum)
        except ProcessLookupError:
            pass

    def _wait_gone(self, process: subprocess.Popen[bytes], pgid: int, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while True:
            # the leader must be reaped (by poll) as well: a zombie does not count as alive
            if process.poll() is not None and not group_alive(pgid):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def _catch_termination(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(signum) is signal.SIG_DFL:
                self._saved_handlers[signum] = signal.signal(signum, _interrupt)

    def _restore_handlers(self) -> None:
        for signum, handler in self._saved_handlers.items():
            signal.signal(signum, handler)
        self._saved_handlers.clear()


def serving(model_config: Mapping[str, Any], *, base_url: str | None = None,
            log: Path | None = None) -> ContextManager[str | None]:
    """The base URL to hand to ``make_backend``, launching vLLM when the model config asks for it.

    A model config with a ``vllm`` section and no ``base_url`` override starts a
    :class:`VllmServer` for the duration of the ``with`` block and yields its URL; otherwise
    nothing is started and ``base_url`` is yielded unchanged (``None``: the config's own URL).

    Examples
    --------
    >>> with serving(config["model"], base_url=args.base_url, log=out / "vllm.log") as url:   # doctest: +SKIP
    ...     backend = make_backend(config["model"], base_url=url)
    """
    settings = model_config.get("vllm")
    if base_url is not None or not settings:
        return nullcontext(base_url)
    return _served(settings, log)


def planned_url(model_config: Mapping[str, Any]) -> str | None:
    """The URL a launch would serve at, without launching (for ``planted run --dry-run``).

    ``None`` for a model without a ``vllm`` section (the backend then uses its own configuration);
    with port 0 (a free port chosen at launch) the URL names port 0.
    """
    settings = model_config.get("vllm")
    if not settings:
        return None
    return f"http://127.0.0.1:{int(VllmSettings.from_config(settings).port)}/v1"


@contextmanager
def _served(settings: Mapping[str, Any], log: Path | None) -> Iterator[str]:
    with VllmServer(settings, log=log) as server:
        yield server.url


def serve_forever(settings: Mapping[str, Any] | VllmSettings, *, log: Path | None = None,
                  out: TextIO | None = None, poll_interval_s: float = 1.0) -> int:
    """``planted serve``: start the server, print its URL, wait for Ctrl-C, stop it.

    Parameters
    ----------
    settings : mapping or VllmSettings
        The model config's ``vllm`` section.
    log : path, optional
        Server log file (see :class:`VllmServer`).
    out : text stream, optional
        Where the URL and notes are printed (default ``sys.stdout``).
    poll_interval_s : float
        Seconds between checks that the server is still running.

    Returns
    -------
    int
        0 after Ctrl-C.

    Raises
    ------
    VllmServerError
        When the server cannot start or exits on its own; the message quotes its log.
    """
    stream = out if out is not None else sys.stdout
    with VllmServer(settings, log=log) as server:
        s = server.config
        print(f"vLLM serves {s.served_model_name} ({s.hf_repo} at {s.revision}) at {server.url}\n"
              f"  log: {server.log_path}\n"
              f"  use it with: --base-url {server.url}\n"
              "  Ctrl-C stops it.", file=stream, flush=True)
        try:
            while server.returncode is None:
                time.sleep(poll_interval_s)
        except KeyboardInterrupt:
            print("stopping the vLLM server ...", file=stream, flush=True)
            return 0
        raise VllmServerError(f"the vLLM server exited on its own with status {server.returncode}. {server.tail()}")

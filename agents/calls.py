"""One sandboxed call on the host's side: start, read with a deadline and a cap, watch, kill, reap, classify.

Both sandboxes (:class:`~planted.agents.sandbox.BwrapSandbox` and the development-only
:class:`~planted.agents.sandbox.UnsafeLocalSandbox`) start a process through their ``spawn``;
everything after that is here: the output is read incrementally up to its cap and the wall-time
deadline, a :class:`~planted.agents.watchdog.TreeWatch` samples the tree and the workspace, the
process group is killed and reaped, and the limit that stopped the call is decided from the host's
measurements only (:func:`_classify`).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol, Sequence

from planted.agents.limits import KIB, LimitHit, RunResult, SandboxLimits, cpu_slack
from planted.agents.watchdog import TreeWatch
from planted.agents.workspace_files import disk_usage, remove_changed_since

# The process the sandbox starts runs the code as __main__ (runpy) from its read-only file and, on
# an uncaught exception, prints the traceback without the runner's frames. It reports nothing else:
# what stopped a run is measured by the host. (``-S`` would save ~25 ms of start-up but its flags
# are inherited by multiprocessing/joblib workers, which then miss site-packages.)
_RUNNER = """\
import os, sys
path = sys.argv[1]
sys.argv = [path]
sys.path.insert(0, os.getcwd())
try:
    import runpy
    runpy.run_path(path, run_name="__main__")
except SystemExit:
    raise
except BaseException as exc:
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    if tb is not None:
        exc.__traceback__ = tb
    sys.excepthook(type(exc), exc, exc.__traceback__)
    sys.exit(1)
"""

@dataclass(frozen=True)
class _Outcome:
    stdout: bytes
    stderr: bytes
    exit_code: int | None
    killed_for: LimitHit | None
    saturated: bool
    cpu_seconds: float
    wall_seconds: float
    truncated: bool


def kill_process_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the process group of ``proc`` (started with ``start_new_session=True``).

    For a bwrap sandbox this kills bwrap, whose PID namespace then dies with every process in it.
    Does nothing once ``proc`` has been reaped (its id may then belong to another process).
    """
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def exit_status(proc: subprocess.Popen) -> int:
    """Wait for ``proc`` and return its exit code, ``128 + N`` when signal N killed it."""
    code = proc.wait()
    return 128 - code if code < 0 else code


def finish(proc: subprocess.Popen, tasks: Callable[[], int] | None, grace: float = 5.0) -> int:
    """Kill what is left of ``proc``'s tree, reap it, return its exit code (see :func:`exit_status`).

    With ``tasks`` (the sandbox's process counter), also wait up to ``grace`` seconds until it is 0:
    the kernel tears a dead PID namespace down asynchronously, and nothing may outlive the call.
    """
    kill_process_tree(proc)
    code = exit_status(proc)
    if tasks is not None:
        gone_by = time.monotonic() + grace
        while tasks() and time.monotonic() < gone_by:
            time.sleep(0.005)
    return code


def _collect(proc: subprocess.Popen, limits: SandboxLimits, started: float, watch: TreeWatch,
             tasks: Callable[[], int] | None) -> _Outcome:
    """Read stdout/stderr up to the cap and the deadline, kill the tree on either, reap it.

    ``watch`` samples the tree's memory, tasks and the workspace meanwhile (and kills on a breach);
    ``tasks`` counts the sandbox's processes at the end until none is left.
    """
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    buffers = {out_fd: bytearray(), err_fd: bytearray()}
    selector = selectors.DefaultSelector()
    for fd in buffers:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    total, truncated = 0, False
    killed_for: LimitHit | None = None
    deadline = started + limits.wall_seconds
    with watch:
        while selector.get_map() and killed_for is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                killed_for = "wall_time"
                break
            for key, _ in selector.select(remaining):
                chunk = os.read(key.fd, 64 * KIB)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                room = limits.output_bytes - total
                buffers[key.fd] += chunk[:room]
                total += min(len(chunk), room)
                if len(chunk) > room:
                    truncated, killed_for = True, "output"
                    break
        if killed_for is not None:
            kill_process_tree(proc)
            _drain(selector, grace=5.0)
    selector.close()
    if watch.breach is not None and killed_for is None:
        killed_for = watch.breach
    exit_code = finish(proc, tasks)
    proc.stdout.close()
    proc.stderr.close()
    return _Outcome(
        stdout=bytes(buffers[out_fd]),
        stderr=bytes(buffers[err_fd]),
        exit_code=None if killed_for is not None else exit_code,
        killed_for=killed_for,
        saturated=watch.saturated,
        cpu_seconds=watch.peak_process_cpu,
        wall_seconds=time.monotonic() - started,
        truncated=truncated,
    )


def _drain(selector: selectors.BaseSelector, grace: float) -> None:
    """Discard what killed processes still write until their pipes close (at most ``grace`` s)."""
    deadline = time.monotonic() + grace
    while selector.get_map() and (remaining := deadline - time.monotonic()) > 0:
        for key, _ in selector.select(remaining):
            if not os.read(key.fd, 64 * KIB):
                selector.unregister(key.fd)


def _classify(outcome: _Outcome, limits: SandboxLimits, largest_written: int) -> LimitHit | None:
    """The limit that stopped a run, from the host's measurements only.

    In order: the limits the host stopped the run for (wall time, output, memory, disk), except that
    a tree seen at its process limit is reported as ``processes`` (a fork bomb also floods the
    output and runs out the clock); CPU time (the host saw a process of the tree, whichever, use the
    limit, less the sampling slack of :func:`cpu_slack`: the kernel stops a process there); a
    file at the file-size cap among those the call wrote or held open (``largest_written``).
    """
    if outcome.saturated:
        return "processes"
    if outcome.killed_for is not None:
        return outcome.killed_for
    if outcome.cpu_seconds >= limits.cpu_seconds - cpu_slack(limits.cpu_seconds):
        return "cpu_time"
    if largest_written >= limits.file_bytes:
        return "file_size"
    return None


def tasks_of(uid: int) -> int:
    """Processes and threads on the host owned by ``uid`` (what ``RLIMIT_NPROC`` counts)."""
    count = 0
    for entry in os.scandir("/proc"):
        try:
            if not entry.name.isdigit() or entry.stat().st_uid != uid:
                continue
            with open(f"/proc/{entry.name}/status", "rb") as status:
                text = status.read()
        except OSError:  # the process ended meanwhile
            continue
        count += int(text.split(b"\nThreads:", 1)[1].split(None, 1)[0])
    return count


def stage_file(directory: Path, name: str, text: str | bytes) -> Path:
    """Write ``text`` to ``directory / name``, readable by the sandbox's user (mode 0444).

    Text is encoded as UTF-8 with lone surrogates passed through as bytes (the interpreter then
    reports the invalid source as a syntax error, which the agent sees), never an encoding error
    on the host.
    """
    path = directory / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    path.chmod(0o444)
    return path


class _Spawner(Protocol):
    @property
    def limits(self) -> SandboxLimits: ...

    @property
    def workspace(self) -> Path: ...

    def files_root(self, files_dir: Path) -> str: ...

    def spawn(self, python_args: Sequence[str], files_dir: Path | None, *, stdin: int) -> subprocess.Popen: ...

    @property
    def tasks(self) -> Callable[[], int] | None: ...


def watch_tree(sandbox: _Spawner, proc: subprocess.Popen) -> TreeWatch:
    """The host-side watch of the process tree of ``proc`` and the sandbox's workspace."""
    limits = sandbox.limits
    return TreeWatch(proc.pid, memory_bytes=limits.memory_bytes, processes=limits.processes,
                     workspace=sandbox.workspace, disk_bytes=limits.disk_bytes, files=limits.files)


def run_python_call(sandbox: _Spawner, code: str) -> RunResult:
    """Run ``code`` as ``__main__`` in a fresh process of ``sandbox``; the host measures what stopped it."""
    with tempfile.TemporaryDirectory(prefix="planted-run-") as tmp:
        files_dir = Path(tmp)
        stage_file(files_dir, "main.py", code)
        script = f"{sandbox.files_root(files_dir)}/main.py"
        since = time.time_ns()
        started = time.monotonic()
        proc = sandbox.spawn(["-I", "-B", "-u", "-X", "utf8", "-c", _RUNNER, script], files_dir,
                             stdin=subprocess.DEVNULL)
        watch = watch_tree(sandbox, proc)
        outcome = _collect(proc, sandbox.limits, started, watch, sandbox.tasks)
    limits = sandbox.limits
    usage = disk_usage(sandbox.workspace, changed_since_ns=since)
    hit = _classify(outcome, limits, max(usage.largest_changed, watch.largest_open_file))
    over = usage.bytes > limits.disk_bytes or usage.entries > limits.files or usage.too_deep
    removed: tuple[str, ...] = ()
    if hit == "disk" or over:
        hit = "disk" if hit in (None, "file_size", "cpu_time") else hit
        removed = tuple(remove_changed_since(sandbox.workspace, since))
    return RunResult(
        stdout=outcome.stdout.decode("utf-8", errors="replace"),
        stderr=outcome.stderr.decode("utf-8", errors="replace"),
        exit_code=outcome.exit_code,
        limit_hit=hit,
        wall_seconds=outcome.wall_seconds,
        truncated=outcome.truncated,
        limits=limits,
        removed=removed,
    )


__all__ = ["exit_status", "finish", "kill_process_tree", "run_python_call", "stage_file", "tasks_of", "watch_tree"]

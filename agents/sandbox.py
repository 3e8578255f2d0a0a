"""The agent's ``run_python`` sandbox: every call is a fresh Python process inside bubblewrap.

What the sandboxed process sees (SPEC 2.3, ``docs/security.md``):

* a read-only system: ``/usr``, the ``/bin``, ``/sbin``, ``/lib*`` links or directories, the few
  ``/etc`` files the dynamic loader needs; the host root is never bound;
* the agent's Python environment (:mod:`planted.agents.agent_env`): the base interpreter, its
  standard library and only the promised packages and their dependencies, in a synthetic
  site-packages; planted, its configuration, the LLM SDKs and the host's other packages are absent;
* exactly one writable directory, the workspace, at ``/workspace`` (the current directory); the
  agent's data file read-only at ``/workspace/data/data.csv`` on a read-only tmpfs the agent cannot
  replace (the host also checks before every call that ``data`` in the workspace is a plain
  directory, so bubblewrap never follows a link the agent made); the call's code read-only under
  ``/sandbox``; fresh ``/proc`` and ``/dev``; size-capped tmpfs ``/tmp`` and ``/dev/shm`` private to
  the call;
* new network, PID, IPC, UTS and cgroup namespaces: only a loopback interface of its own, no host
  process visible; when the code's process exits, the kernel kills whatever it left behind;
* a seccomp filter (:mod:`planted.agents.seccomp`): no nested namespaces, no mounts, no ptrace,
  bpf, io_uring, keyring or module calls.

How each limit of :class:`SandboxLimits` is enforced and confirmed. Every reported limit hit is
measured **by the host** (its clock, its count of the output, ``/proc``, the workspace, the CPU time
the kernel reports when the host reaps the sandbox); nothing the sandboxed code writes can report
or hide one:

* ``wall_seconds``: the host reads the output with a deadline, then SIGKILLs bwrap's process group;
  ``--die-with-parent`` makes the PID namespace's init die with it, which kills every process in it.
* ``cpu_seconds``: ``RLIMIT_CPU`` per process (SIGXCPU at the limit, SIGKILL one second later);
  reported when the code's process died of either signal and the host saw a process of the tree
  use the limit's CPU time (``/proc/<pid>/stat``, sampled).
* ``memory_bytes``: the resident memory of the whole process tree, sampled on the host
  (:class:`~planted.agents.watchdog.TreeWatch`), which kills the tree when it passes the cap; and
  ``RLIMIT_AS`` per process at twice the cap, so that memory a process touches meets the host's
  measurement first, while an allocation of more address space than that fails at once with
  ``MemoryError`` (the code sees the exception; only the host's measurement is a limit hit).
* ``processes``: ``RLIMIT_NPROC`` (threads count); reported when the host saw the tree at the limit.
  The kernel does not apply it to uid 0, so when the host runs as root the code runs as an
  unprivileged uid of its own (``setpriv`` inside the sandbox after bwrap has mounted everything;
  capabilities and bounding set emptied, ``no_new_privs``). The uid is
  ``2_000_000_000 + crc32(workspace path) % 10^9``; the workspace directory is chowned to it.
* ``output_bytes``: stdout and stderr are read incrementally; once their combined size passes the
  cap, the rest is dropped and the process tree is killed (nothing is buffered beyond the cap).
* ``disk_bytes`` and ``files``: total bytes (``max(length, allocated)`` per file, plus unlinked files
  held open on the workspace's file system) and entries under the workspace, nested at most 64
  deep, walked by descriptor without following links while the code runs and again after it: a
  tree that passes a cap is killed, and what the call wrote (by change time, which the code cannot
  set) is removed, so the workspace is back under its caps for the next call.
* ``file_bytes``: ``RLIMIT_FSIZE`` per file; reported when a file the call wrote, or held open,
  reached the cap.
* ``open_files``: ``RLIMIT_NOFILE`` per process (bounds what the host's scan of open files costs).
* ``tmp_bytes``: the size of each of the tmpfs ``/tmp`` and ``/dev/shm`` (the kernel refuses writes
  beyond it).

A call returns only when the sandbox's processes are gone (as root, their count is polled until 0).

``/proc/self/mountinfo`` inside shows the host path of every mount's source. The data file and
the call's code are therefore mounted from copies under random temporary names; the workspace is
mounted where it is, so **its host path must not carry anything sealed**: the grid names
workspaces at random.
``threads`` sets ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS`` (default 1:
reproducible floating point, and few threads against the process limit).
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import weakref
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Protocol, Sequence

from planted.agents.agent_env import FORBIDDEN_MODULES, AgentEnvironment, agent_environment
from planted.agents.seccomp import seccomp_program
from planted.agents.watchdog import TreeWatch
from planted.agents.workspace_files import disk_usage, remove_changed_since

LimitHit = Literal["wall_time", "cpu_time", "memory", "processes", "output", "file_size", "disk"]
"""Which limit stopped a run (each confirmed by the host)."""

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

WORKSPACE = "/workspace"
"""Where the writable workspace appears inside the sandbox."""
DATA_DIR = "/workspace/data"
DATA_PATH = "/workspace/data/data.csv"
"""Where the agent's data file appears inside the sandbox."""
FILES_ROOT = "/sandbox"
"""Where the read-only files of one call (the code, the evaluator harness) appear inside."""

_UID_BASE = 2_000_000_000
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives")

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

# Run once per process and environment in a trial sandbox: the forbidden modules must be absent.
_ENVIRONMENT_CHECK = """\
import importlib.util, sys
found = [name for name in sys.argv[1:] if importlib.util.find_spec(name) is not None]
print(",".join(found))
"""


class SandboxUnavailableError(RuntimeError):
    """bubblewrap (or a util-linux helper) is missing, or cannot create a sandbox on this host."""


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandboxed call (see the module docstring for how each is enforced).

    Attributes
    ----------
    cpu_seconds : int
        CPU time per process (``RLIMIT_CPU``), seconds.
    wall_seconds : float
        Wall time of the whole call, seconds, measured from the start of bwrap.
    memory_bytes : int
        Resident memory of the whole process tree (host-measured), bytes; each process's address
        space (``RLIMIT_AS``) is limited to twice this.
    processes : int
        Processes and threads of the sandbox's user (``RLIMIT_NPROC``).
    output_bytes : int
        Combined stdout + stderr returned to the caller; beyond it the run is killed.
    file_bytes : int
        Largest file the code may write (``RLIMIT_FSIZE``).
    disk_bytes : int
        Total bytes under the workspace (with the unlinked files held open on its file system).
    files : int
        Files, directories and links under the workspace (directories may nest at most 64 deep).
    open_files : int
        Open file descriptors per process (``RLIMIT_NOFILE``).
    tmp_bytes : int
        Size of each of the private tmpfs ``/tmp`` and ``/dev/shm``.
    threads : int
        Value of ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS`` inside.
    """

    cpu_seconds: int = 60
    wall_seconds: float = 120.0
    memory_bytes: int = 4 * GIB
    processes: int = 64
    output_bytes: int = 64 * KIB
    file_bytes: int = 1 * GIB
    disk_bytes: int = 2 * GIB
    files: int = 20_000
    open_files: int = 512
    tmp_bytes: int = 512 * MIB
    threads: int = 1

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "wall_seconds", "memory_bytes", "processes", "output_bytes", "file_bytes",
                     "disk_bytes", "files", "open_files", "tmp_bytes"):
            if not getattr(self, name) > 0:
                raise ValueError(f"SandboxLimits.{name} must be positive, got {getattr(self, name)!r}")
        if self.threads < 1:
            raise ValueError(f"SandboxLimits.threads must be at least 1, got {self.threads}")
        if self.processes < 3:
            raise ValueError(
                f"SandboxLimits.processes must allow the interpreter and a child, got {self.processes}"
            )

    def describe(self) -> dict[str, Any]:
        """The limits as JSON types (stamped into every run record)."""
        return asdict(self)


def _size(n: int) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} bytes"


def _limit_message(hit: LimitHit, limits: SandboxLimits) -> str:
    messages = {
        "wall_time": f"The run exceeded the wall-time limit of {limits.wall_seconds:g} s and was killed with all "
        "its processes. Make the code faster, or save intermediate results under /workspace and "
        "continue in a later call.",
        "cpu_time": f"A process exceeded the CPU-time limit of {limits.cpu_seconds} s and was killed. Reduce "
        "the computation (fewer candidates, folds or iterations).",
        "memory": f"The processes of the run used more than {_size(limits.memory_bytes)} of memory together "
        "and were killed. Use smaller arrays, fewer workers, or process the data in pieces.",
        "processes": f"The run reached the limit of {limits.processes} processes and threads. Do not start "
        "more workers (use n_jobs=1).",
        "output": f"The output passed the limit of {_size(limits.output_bytes)} (stdout and stderr "
        "combined); the rest was discarded and the run was killed. Print summaries, not whole tables, or "
        "write large results to a file under /workspace.",
        "file_size": f"A file reached the limit of {_size(limits.file_bytes)} per file; writing more failed.",
        "disk": f"The workspace passed its limits ({_size(limits.disk_bytes)} in total, {limits.files} files and "
        "directories, nested at most 64 deep; unlinked files still held open count too); the run was killed and "
        "what it wrote was removed.",
    }
    return messages[hit]


@dataclass(frozen=True)
class RunResult:
    """Outcome of one ``run_python`` call.

    Attributes
    ----------
    stdout, stderr : str
        What the code printed (UTF-8, undecodable bytes replaced), at most ``limits.output_bytes``
        bytes together.
    exit_code : int or None
        Exit status of the code's process; ``128 + N`` when a signal N killed it (shell
        convention); None when the sandbox killed it (wall time, output, memory or disk).
    limit_hit : {"wall_time", "cpu_time", "memory", "processes", "output", "file_size", "disk"} or None
        The limit that stopped the run, if any, as the host measured it.
    wall_seconds : float
        Wall time from starting the sandbox to collecting the result.
    truncated : bool
        Whether output beyond ``limits.output_bytes`` was discarded.
    limits : SandboxLimits
        The limits the run was held to.
    removed : tuple of str
        Workspace entries removed after a disk-limit hit (paths relative to ``/workspace``, each
        written as a JSON string).
    """

    stdout: str
    stderr: str
    exit_code: int | None
    limit_hit: LimitHit | None
    wall_seconds: float
    truncated: bool
    limits: SandboxLimits = field(repr=False)
    removed: tuple[str, ...] = ()

    def observation(self) -> str:
        """The text returned to the agent: what stopped the run (if anything), exit status, output."""
        lines = []
        if self.limit_hit is not None:
            lines.append(f"LIMIT HIT ({self.limit_hit}): {_limit_message(self.limit_hit, self.limits)}")
        if self.removed:
            shown = ", ".join(self.removed[:20]) + (f" and {len(self.removed) - 20} more" if len(self.removed) > 20 else "")
            lines.append(f"removed: {shown}")
        if self.exit_code is None:
            status = "none (killed by the sandbox)"
        elif 128 < self.exit_code < 128 + signal.NSIG:
            number = self.exit_code - 128
            status = f"{self.exit_code} (killed by signal {number}: {signal.strsignal(number)})"
        else:
            status = str(self.exit_code)
        lines.append(f"exit code: {status}")
        lines.append("stdout:" if self.stdout else "stdout: (empty)")
        if self.stdout:
            lines.append(self.stdout.rstrip("\n"))
        lines.append("stderr:" if self.stderr else "stderr: (empty)")
        if self.stderr:
            lines.append(self.stderr.rstrip("\n"))
        if self.truncated:
            lines.append(f"[output truncated at {_size(self.limits.output_bytes)}]")
        return "\n".join(lines)


class Sandbox(Protocol):
    """Where the agent's ``run_python`` tool runs code.

    ``sandboxed`` is False only for the development-only :class:`UnsafeLocalSandbox`; callers stamp
    it into their run records. ``data_path`` and ``workspace_path`` are the paths the agent's code
    must use.
    """

    @property
    def sandboxed(self) -> bool: ...

    @property
    def limits(self) -> SandboxLimits: ...

    @property
    def workspace_path(self) -> str: ...

    @property
    def data_path(self) -> str | None: ...

    def run_python(self, code: str) -> RunResult: ...


def require_program(program: str, package: str) -> str:
    """The path of ``program``; :class:`SandboxUnavailableError` naming the Debian ``package`` when missing."""
    found = shutil.which(program)
    if found is None:
        raise SandboxUnavailableError(
            f"`{program}` was not found on PATH; the agent sandbox needs it. Install the Debian package "
            f"`{package}` (as root: `apt-get install {package}`), or run with --unsafe-no-sandbox for "
            "development only (runs are then stamped sandboxed=False)."
        )
    return found


def _environment(limits: SandboxLimits, home: str, tmp: str, bin_dir: str) -> dict[str, str]:
    threads = str(limits.threads)
    return {
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": threads,
        "OPENBLAS_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
    }


def _rlimits(prlimit: str, limits: SandboxLimits, *, processes: bool) -> list[str]:
    argv = [
        prlimit,
        f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}",
        f"--as={2 * limits.memory_bytes}",
        f"--fsize={limits.file_bytes}",
        f"--nofile={limits.open_files}",
        "--core=0",
    ]
    if processes:
        argv.append(f"--nproc={limits.processes}")
    return [*argv, "--"]


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


def cpu_slack(limit: float) -> float:
    """How far below the CPU limit a process may last have been sampled and still count as having hit it.

    The larger of 0.25 s and 2% of the limit: the sampling thread can lag by a tenth of a second on
    a loaded machine. A process that stops on its own within the slack is reported as a hit; one
    killed at the limit while the sampler lagged by more is not (its exit status still says SIGXCPU).
    """
    return max(0.25, 0.02 * limit)


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


def _tasks_of(uid: int) -> int:
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


def _run_python(sandbox: _Spawner, code: str) -> RunResult:
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


def _sandbox_uid(workspace: Path) -> int:
    return _UID_BASE + zlib.crc32(str(workspace).encode()) % 1_000_000_000


def parent_directories(path: str, made: set[str]) -> list[str]:
    """bwrap arguments creating the missing ancestors of ``path`` with mode 0755 (bwrap would copy
    the host's modes, and ``/root`` is 0700)."""
    argv = []
    for parent in reversed(Path(path).parents[:-1]):
        if str(parent) not in made and parent != Path("/usr") and not str(parent).startswith("/usr/"):
            made.add(str(parent))
            argv += ["--perms", "0755", "--dir", str(parent)]
    return argv


def ensure_plain_directory(parent: Path, name: str) -> None:
    """Make ``parent / name`` a real directory: whatever else stands there (a link, a file) is removed.

    Called before every sandbox start for the data file's mount point, so that bubblewrap, which
    runs as root and follows links when it creates mount points, never follows one the agent made.
    """
    target = parent / name
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        os.mkdir(target, 0o755)
        return
    if stat.S_ISDIR(info.st_mode):
        return
    os.unlink(target)
    os.mkdir(target, 0o755)


_CHECKED: set[tuple[str, ...]] = set()
"""Sandbox configurations whose trial run passed in this process."""


def _trial(sandbox: "BwrapSandbox") -> None:
    """Start one sandbox (with the seccomp filter) that lists the forbidden modules it can find; none may be."""
    proc = sandbox.spawn(["-I", "-c", _ENVIRONMENT_CHECK, *FORBIDDEN_MODULES], None, stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        kill_process_tree(proc)
        proc.communicate()
        raise SandboxUnavailableError("a trial sandbox did not finish within 60 s") from None
    if proc.returncode != 0:
        message = err.decode("utf-8", errors="replace").strip()
        raise SandboxUnavailableError(
            f"bwrap is installed but could not start a sandbox here (exit {proc.returncode}): {message}. "
            "bwrap needs to create mount, PID and network namespaces: run as root, or enable "
            "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)."
        )
    found = out.decode("utf-8", errors="replace").strip()
    if found:
        raise SandboxUnavailableError(
            f"the agent's Python environment would contain {found}, which the brief does not promise; "
            "the sandbox refuses to start (report this as a bug in planted.agents.agent_env)"
        )


class BwrapSandbox:
    """Run Python in bubblewrap (see the module docstring for what is mounted and enforced).

    Parameters
    ----------
    workspace : Path
        Host directory mounted writable at ``/workspace`` (created if missing). When the host runs
        as root it is chowned to the sandbox's uid (:attr:`uid`).
    data_file : Path or None
        Host file mounted read-only at ``/workspace/data/data.csv``; None mounts no data (the
        evaluator's sandbox). A copy under a random temporary name is mounted (taken at
        construction, removed with the sandbox object), so the world's directory name, which
        ``/proc/self/mountinfo`` would show, stays outside.
    limits : SandboxLimits
    environment : AgentEnvironment, optional
        The agent's Python (default: :func:`~planted.agents.agent_env.agent_environment`).

    Raises
    ------
    SandboxUnavailableError
        When ``bwrap`` (Debian package ``bubblewrap``), ``prlimit`` or ``setpriv`` (``util-linux``)
        is missing, when a trial sandbox fails to start (its error is quoted), or when a forbidden
        module would be importable inside.

    Notes
    -----
    The first sandbox of a process starts one trial sandbox (about 60 ms) so that a host without
    the needed namespaces fails here, before an episode starts, not in the middle of one.
    """

    sandboxed = True
    workspace_path = WORKSPACE

    def __init__(self, workspace: Path, data_file: Path | None, limits: SandboxLimits = SandboxLimits(),
                 environment: AgentEnvironment | None = None) -> None:
        self._bwrap = require_program("bwrap", "bubblewrap")
        self._prlimit = require_program("prlimit", "util-linux")
        self._as_root = os.geteuid() == 0
        self._setpriv = require_program("setpriv", "util-linux") if self._as_root else None
        self.environment = environment or agent_environment()
        self._seccomp = seccomp_program()
        self.limits = limits
        self.workspace = Path(workspace).resolve()
        self.data_file = None if data_file is None else Path(data_file).resolve()
        mounted = [self.environment.library_dir, *(host for host, _ in self.environment.entries)]
        for path in mounted:
            for inside in (self.workspace, self.data_file):
                if inside is not None and inside.is_relative_to(path):
                    raise SandboxUnavailableError(
                        f"{inside} lies inside {path}, which is mounted read-only into the sandbox with "
                        "everything under it (sealed files beside it would be visible); keep workspaces and "
                        "world files outside the Python installation"
                    )
        self.workspace.mkdir(parents=True, exist_ok=True)
        self._staged_data = None
        if self.data_file is not None:
            if not self.data_file.is_file():
                raise FileNotFoundError(f"data file {self.data_file} does not exist")
            staging = Path(tempfile.mkdtemp(prefix="planted-data-"))
            weakref.finalize(self, shutil.rmtree, staging, ignore_errors=True)
            self._staged_data = staging / "data.csv"
            shutil.copyfile(self.data_file, self._staged_data)
            self._staged_data.chmod(0o444)
        self.uid = _sandbox_uid(self.workspace) if self._as_root else os.getuid()
        """The uid the code runs as (a dedicated unprivileged uid when the host runs as root)."""
        if self._as_root:
            os.chown(self.workspace, self.uid, self.uid)
        key = (self._bwrap, str(self._as_root), self.environment.executable, *map(str, self.environment.entries))
        if key not in _CHECKED:
            _trial(self)
            _CHECKED.add(key)

    def describe(self) -> dict[str, Any]:
        """What the sandbox is (stamped into run records): limits, seccomp and the agent's environment."""
        return {"kind": "bwrap", "limits": self.limits.describe(), "seccomp": self._seccomp is not None,
                "environment": self.environment.describe()}

    @property
    def data_path(self) -> str | None:
        """``/workspace/data/data.csv``, or None without a data file."""
        return None if self.data_file is None else DATA_PATH

    @property
    def tasks(self) -> Callable[[], int] | None:
        """Counter of the sandbox's processes and threads (its own uid's), when the host runs as root."""
        uid = self.uid
        return (lambda: _tasks_of(uid)) if self._as_root else None

    def files_root(self, files_dir: Path) -> str:
        """Where the files of ``files_dir`` appear inside the sandbox (``/sandbox``)."""
        return FILES_ROOT

    def _prepare_mount_points(self) -> None:
        """Before every start: the data file's mount point is a plain directory of the workspace."""
        if self._staged_data is not None:
            ensure_plain_directory(self.workspace, "data")

    def command(self, python_args: Sequence[str], files_dir: Path | None, *, seccomp_fd: int | None) -> list[str]:
        """The argv that runs the agent's interpreter with ``python_args`` in this sandbox.

        Each regular file of the host directory ``files_dir`` is mounted read-only at
        ``/sandbox/<name>``; ``seccomp_fd`` is a readable descriptor holding the seccomp program.
        """
        limits = self.limits
        env = self.environment
        argv = [self._bwrap, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        argv += ["--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent", "--new-session"]
        if not self._as_root:
            argv.append("--unshare-user")
        argv += ["--ro-bind", "/usr", "/usr"]
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            host = Path("/", name)
            if host.is_symlink():
                argv += ["--symlink", os.readlink(host), str(host)]
            elif host.is_dir():
                argv += ["--ro-bind", str(host), str(host)]
        for name in _ETC:
            argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        argv += ["--proc", "/proc", "--dev", "/dev"]
        for tmpfs in ("/dev/shm", "/tmp"):
            argv += ["--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", tmpfs]
        # The interpreter after the tmpfs mounts: one installed under /tmp must stay visible above
        # the sandbox's private /tmp.
        made: set[str] = set()
        argv += env.bwrap_arguments(made)
        argv += ["--bind", str(self.workspace), WORKSPACE]
        if self._staged_data is not None:
            argv += ["--perms", "0555", "--tmpfs", DATA_DIR, "--ro-bind", str(self._staged_data), DATA_PATH]
            argv += ["--remount-ro", DATA_DIR]
        if files_dir is not None:
            argv += ["--perms", "0755", "--dir", FILES_ROOT]
            for file in sorted(files_dir.iterdir()):
                argv += ["--ro-bind", str(file), f"{FILES_ROOT}/{file.name}"]
        argv += ["--remount-ro", "/", "--chdir", WORKSPACE, "--clearenv"]
        for key, value in _environment(limits, home=WORKSPACE, tmp="/tmp", bin_dir=str(Path(env.executable).parent)).items():
            argv += ["--setenv", key, value]
        if seccomp_fd is not None:
            argv += ["--seccomp", str(seccomp_fd)]
        argv.append("--")
        if self._setpriv is not None:
            argv += [self._setpriv, f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups"]
            argv += ["--bounding-set=-all", "--inh-caps=-all", "--"]
        argv += _rlimits(self._prlimit, limits, processes=True)
        return [*argv, env.executable, *python_args]

    def spawn(self, python_args: Sequence[str], files_dir: Path | None, *, stdin: int) -> subprocess.Popen:
        """Start :meth:`command` with piped stdout/stderr in a new session (see :func:`kill_process_tree`)."""
        self._prepare_mount_points()
        if self._seccomp is None:
            return _start(self.command(python_args, files_dir, seccomp_fd=None), stdin=stdin, pass_fds=())
        program = os.memfd_create("planted-seccomp", os.MFD_CLOEXEC)
        try:
            os.write(program, self._seccomp)
            os.lseek(program, 0, os.SEEK_SET)
            return _start(self.command(python_args, files_dir, seccomp_fd=program), stdin=stdin, pass_fds=(program,))
        finally:
            os.close(program)

    def run_python(self, code: str) -> RunResult:
        """Run ``code`` as ``__main__`` in a fresh sandboxed Python process.

        Parameters
        ----------
        code : str
            Python source. It runs as ``__main__`` with ``/workspace`` as current directory and
            first entry of ``sys.path``, under ``python -I -B -u`` (isolated, no bytecode files,
            unbuffered output).

        Returns
        -------
        RunResult
            Output, exit status and the limit that stopped the run, if any.
        """
        return _run_python(self, code)


def _start(argv: list[str], *, stdin: int, pass_fds: Sequence[int], **kwargs: Any) -> subprocess.Popen:
    """Start ``argv`` with piped stdout/stderr in a new session (so the whole tree can be killed)."""
    return subprocess.Popen(
        argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=tuple(pass_fds),
        start_new_session=True, **kwargs,
    )


class UnsafeLocalSandbox:
    """Development only: a plain subprocess in ``workspace`` with no isolation (``sandboxed = False``).

    For ``--unsafe-no-sandbox`` on hosts without bubblewrap; never chosen silently. The code can
    read and write anything the host user can (planted included), reach the network and leave
    processes behind. CPU time, memory and file size are limited as in :class:`BwrapSandbox`
    (``prlimit`` and the host's watch of the tree and the workspace); wall time and output as there
    (killing the process group); the process count is **not** limited (``RLIMIT_NPROC`` would count
    every process of the host user). The data file is copied to ``workspace/data/data.csv``.
    """

    sandboxed = False

    def __init__(self, workspace: Path, data_file: Path | None, limits: SandboxLimits = SandboxLimits()) -> None:
        self._prlimit = require_program("prlimit", "util-linux")
        self.limits = limits
        self.workspace = Path(workspace).resolve()
        self.workspace.mkdir(parents=True, exist_ok=True)
        self._data_path = None
        if data_file is not None:
            ensure_plain_directory(self.workspace, "data")
            target = self.workspace / "data" / "data.csv"
            if target.exists():
                target.chmod(0o644)
            shutil.copyfile(data_file, target)
            target.chmod(0o444)
            self._data_path = str(target)

    def describe(self) -> dict[str, Any]:
        """What the sandbox is (stamped into run records)."""
        return {"kind": "unsafe-local", "limits": self.limits.describe(), "seccomp": False, "environment": None}

    @property
    def workspace_path(self) -> str:
        """The workspace's host path."""
        return str(self.workspace)

    @property
    def data_path(self) -> str | None:
        """Host path of the copied data file, or None without a data file."""
        return self._data_path

    tasks = None
    """No process count: the code runs as the host user, among the host's processes."""

    def files_root(self, files_dir: Path) -> str:
        """The files are used where they are: ``files_dir`` itself."""
        return str(files_dir)

    def spawn(self, python_args: Sequence[str], files_dir: Path | None, *, stdin: int) -> subprocess.Popen:
        """Start ``sys.executable *python_args`` under ``prlimit`` in the workspace, in a new session."""
        return _start(
            [*_rlimits(self._prlimit, self.limits, processes=False), sys.executable, *python_args],
            stdin=stdin, pass_fds=(), cwd=self.workspace,
            env=_environment(self.limits, home=str(self.workspace), tmp=tempfile.gettempdir(),
                             bin_dir=str(Path(sys.executable).parent)),
        )

    def run_python(self, code: str) -> RunResult:
        """Run ``code`` as ``__main__`` in a fresh, unsandboxed Python process (see :class:`BwrapSandbox`)."""
        return _run_python(self, code)

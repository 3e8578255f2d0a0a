"""The agent's ``run_python`` sandbox: every call is a fresh Python process inside bubblewrap.

What the sandboxed process sees (SPEC 2.3):

* a read-only system: ``/usr``, the ``/bin``, ``/sbin``, ``/lib*`` links or directories, the few
  ``/etc`` files the dynamic loader needs, and the host interpreter's prefixes (``sys.prefix``,
  ``sys.base_prefix``, ...) at their host paths, so ``sys.executable`` runs with the host's pandas,
  numpy, scipy, statsmodels, scikit-learn and lightgbm. The host root is never bound.
* exactly one writable directory, the workspace, at ``/workspace`` (the current directory); the
  agent's data file read-only at ``/workspace/data/data.csv``; the call's code read-only under
  ``/sandbox``; fresh ``/proc`` and ``/dev``; size-capped tmpfs ``/tmp`` and ``/dev/shm`` private to
  the call.
* new network, PID, IPC, UTS and cgroup namespaces: only a loopback interface of its own, no host
  process visible; when the code's process exits, the kernel kills whatever it left behind.

The code runs under a small supervisor (the first Python process forks; the child runs the code
as ``__main__``); the supervisor reports the child's CPU time and exit status on a status pipe, and
an uncaught exception in the child reports which limit it points to (``MemoryError``, ``EAGAIN``
from fork, ``EFBIG``).

How each limit of :class:`SandboxLimits` is enforced and reported:

* ``wall_seconds``: the host reads the output with a deadline, then SIGKILLs bwrap's process group;
  ``--die-with-parent`` makes the PID namespace's init die with it, which kills every process in it.
* ``cpu_seconds``: ``RLIMIT_CPU`` per process: SIGXCPU at the limit, SIGKILL one second later.
* ``memory_bytes``: ``RLIMIT_AS`` per process (allocations fail with ``MemoryError``); ``RLIMIT_CORE``
  is 0.
* ``processes``: ``RLIMIT_NPROC`` (threads count). The kernel does not apply it to uid 0, so when
  the host runs as root the code runs as an unprivileged uid of its own (``setpriv`` inside the
  sandbox after bwrap has mounted everything; capabilities and bounding set emptied,
  ``no_new_privs``). The uid is ``2_000_000_000 + crc32(workspace path) % 10^9``, so sandboxes on
  different workspaces do not share a process count; the workspace directory is chowned to it.
  Beside a failing fork, a tree still sitting at the limit when the wall time or the output cap
  stops it is reported as ``processes`` (its uid's tasks are counted on the host). As an ordinary
  user, bwrap runs in a user namespace of its own and the limit counts the processes inside it.
* ``output_bytes``: stdout and stderr are read incrementally; once their combined size passes the
  cap, the rest is dropped and the process tree is killed (nothing is buffered beyond the cap).
* ``file_bytes``: ``RLIMIT_FSIZE`` per file and the size of each tmpfs.

A call returns only when the sandbox's processes are gone (as root, their count is polled until 0).

``/proc/self/mountinfo`` inside shows the host path of every mount's source. The data file and
the call's code are therefore mounted from copies under random temporary names; the workspace is
mounted where it is, so **its host path must not carry anything sealed** (a world's cell, R2 or
framing): name workspace directories neutrally.
``threads`` sets ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS`` (default 1:
reproducible floating point, and few threads against the process limit).
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import weakref
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Protocol, Sequence

LimitHit = Literal["wall_time", "cpu_time", "memory", "processes", "output", "file_size"]
"""Which limit stopped a run."""

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

WORKSPACE = "/workspace"
"""Where the writable workspace appears inside the sandbox."""
DATA_PATH = "/workspace/data/data.csv"
"""Where the agent's data file appears inside the sandbox."""
FILES_ROOT = "/sandbox"
"""Where the read-only files of one call (the code, the evaluator harness) appear inside."""

_UID_BASE = 2_000_000_000
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives")

# The process the sandbox starts: it forks, the child runs the code as __main__ (runpy) from its
# read-only file, the parent (a supervisor that only waits) reports the child's CPU time on the
# status pipe and exits with the child's status (128 + N for signal N). An uncaught exception in
# the child names the limit it points to on the same pipe and prints its traceback without the
# runner's frames. (``-S`` would save ~25 ms of start-up but its flags are inherited by
# multiprocessing/joblib workers, which then miss site-packages.)
_RUNNER = """\
import os, sys
status, path = int(sys.argv[1]), sys.argv[2]
os.set_inheritable(status, False)
child = os.fork()
if child:
    _, code, usage = os.wait4(child, 0)
    os.write(status, b"cpu=%r\\n" % (usage.ru_utime + usage.ru_stime))
    code = os.waitstatus_to_exitcode(code)
    os._exit(128 - code if code < 0 else code)
sys.argv = [path]
sys.path.insert(0, os.getcwd())
try:
    import runpy
    runpy.run_path(path, run_name="__main__")
except SystemExit:
    raise
except BaseException as exc:
    text = str(exc)
    if isinstance(exc, MemoryError) or "bad_alloc" in text:
        kind = b"memory"
    elif isinstance(exc, OSError) and exc.errno == 27:
        kind = b"file_size"
    elif (isinstance(exc, OSError) and exc.errno == 11) or "can't start new thread" in text:
        kind = b"processes"
    else:
        kind = b""
    try:
        os.write(status, kind + b"\\n")
    except OSError:
        pass
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    if tb is not None:
        exc.__traceback__ = tb
    sys.excepthook(type(exc), exc, exc.__traceback__)
    sys.exit(1)
"""


class SandboxUnavailableError(RuntimeError):
    """bubblewrap (or a util-linux helper) is missing, or cannot create a sandbox on this host."""


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandboxed Python process tree.

    Attributes
    ----------
    cpu_seconds : int
        CPU time per process (``RLIMIT_CPU``), seconds.
    wall_seconds : float
        Wall time of the whole call, seconds, measured from the start of bwrap.
    memory_bytes : int
        Address space per process (``RLIMIT_AS``), bytes.
    processes : int
        Processes and threads of the sandbox's user (``RLIMIT_NPROC``).
    output_bytes : int
        Combined stdout + stderr returned to the caller; beyond it the run is killed.
    file_bytes : int
        Largest file the code may write (``RLIMIT_FSIZE``) and the size of ``/tmp`` and ``/dev/shm``.
    threads : int
        Value of ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS`` inside.
    """

    cpu_seconds: int = 60
    wall_seconds: float = 120.0
    memory_bytes: int = 4 * GIB
    processes: int = 64
    output_bytes: int = 64 * KIB
    file_bytes: int = 1 * GIB
    threads: int = 1

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "wall_seconds", "memory_bytes", "processes", "output_bytes", "file_bytes"):
            if not getattr(self, name) > 0:
                raise ValueError(f"SandboxLimits.{name} must be positive, got {getattr(self, name)!r}")
        if self.threads < 1:
            raise ValueError(f"SandboxLimits.threads must be at least 1, got {self.threads}")
        if self.processes < 3:
            raise ValueError(
                f"SandboxLimits.processes must allow the supervisor, the code and a child, got {self.processes}"
            )


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
        "memory": f"A process ran out of memory: the limit is {_size(limits.memory_bytes)} of address space "
        "per process. Use smaller arrays or process the data in pieces.",
        "processes": f"Creating a process or thread failed: the limit is {limits.processes} processes and "
        "threads. Do not start more workers (use n_jobs=1).",
        "output": f"The output passed the limit of {_size(limits.output_bytes)} (stdout and stderr "
        "combined); the rest was discarded and the run was killed. Print summaries, not whole tables, or "
        "write large results to a file under /workspace.",
        "file_size": f"Writing a file failed: the limit is {_size(limits.file_bytes)} per file.",
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
        convention); None when the sandbox killed it for the wall-time or output limit.
    limit_hit : {"wall_time", "cpu_time", "memory", "processes", "output", "file_size"} or None
        The limit that stopped the run, if any.
    wall_seconds : float
        Wall time from starting the sandbox to collecting the result.
    truncated : bool
        Whether output beyond ``limits.output_bytes`` was discarded.
    limits : SandboxLimits
        The limits the run was held to.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    limit_hit: LimitHit | None
    wall_seconds: float
    truncated: bool
    limits: SandboxLimits = field(repr=False)

    def observation(self) -> str:
        """The text returned to the agent: what stopped the run (if anything), exit status, output."""
        lines = []
        if self.limit_hit is not None:
            lines.append(f"LIMIT HIT ({self.limit_hit}): {_limit_message(self.limit_hit, self.limits)}")
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


def _require(program: str, package: str) -> str:
    found = shutil.which(program)
    if found is None:
        raise SandboxUnavailableError(
            f"`{program}` was not found on PATH; the agent sandbox needs it. Install the Debian package "
            f"`{package}` (as root: `apt-get install {package}`), or run with --unsafe-no-sandbox for "
            "development only (runs are then stamped sandboxed=False)."
        )
    return found


def _environment(limits: SandboxLimits, home: str, tmp: str) -> dict[str, str]:
    threads = str(limits.threads)
    return {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": f"{tmp}/matplotlib",
        "OMP_NUM_THREADS": threads,
        "OPENBLAS_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
    }


def _rlimits(prlimit: str, limits: SandboxLimits, *, processes: bool) -> list[str]:
    argv = [
        prlimit,
        f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}",
        f"--as={limits.memory_bytes}",
        f"--fsize={limits.file_bytes}",
        "--core=0",
    ]
    if processes:
        argv.append(f"--nproc={limits.processes}")
    return [*argv, "--"]


def _interpreter_paths() -> list[str]:
    """Host directories the interpreter needs, outside /usr, outermost first, nested ones dropped."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    candidates |= {str(Path(p).resolve()) for p in candidates}
    candidates.add(str(Path(sys.executable).resolve().parent))
    kept: list[str] = []
    for path in sorted(candidates, key=len):
        if any(path == k or path.startswith(k.rstrip("/") + "/") for k in ["/usr", *kept]):
            continue
        kept.append(path)
    return kept


@dataclass(frozen=True)
class _Outcome:
    stdout: bytes
    stderr: bytes
    exit_code: int | None
    killed_for: LimitHit | None
    saturated: bool
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


def _collect(
    proc: subprocess.Popen, limits: SandboxLimits, started: float, tasks: Callable[[], int] | None
) -> _Outcome:
    """Read stdout/stderr up to the cap and the deadline, kill the tree on either, reap it.

    ``tasks`` counts the sandbox's processes and threads; it is called before a kill to tell
    whether the tree sat at its process limit, and at the end until no process is left.
    """
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    buffers = {out_fd: bytearray(), err_fd: bytearray()}
    selector = selectors.DefaultSelector()
    for fd in buffers:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    total, truncated, saturated = 0, False, False
    killed_for: LimitHit | None = None
    deadline = started + limits.wall_seconds
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
        saturated = tasks is not None and tasks() >= limits.processes - 1
        kill_process_tree(proc)
        _drain(selector, grace=5.0)
    selector.close()
    exit_code = finish(proc, tasks)
    proc.stdout.close()
    proc.stderr.close()
    return _Outcome(
        stdout=bytes(buffers[out_fd]),
        stderr=bytes(buffers[err_fd]),
        exit_code=None if killed_for is not None else exit_code,
        killed_for=killed_for,
        saturated=saturated,
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


def _classify(outcome: _Outcome, status: bytes, limits: SandboxLimits) -> LimitHit | None:
    """The limit that stopped a run.

    In order: the process limit when the tree sat at it as the sandbox stopped the run; the wall
    time; what an uncaught exception points to (a failing fork bomb also floods the output with
    tracebacks); the output cap; CPU time (SIGXCPU, or SIGKILL after at least the limit's CPU time,
    which is the hard limit one second after an ignored SIGXCPU).
    """
    if outcome.saturated:
        return "processes"
    if outcome.killed_for == "wall_time":
        return "wall_time"
    reported = status.split()
    for kind in ("memory", "processes", "file_size"):
        if kind.encode() in reported:
            return kind  # type: ignore[return-value]
    if outcome.killed_for is not None:
        return outcome.killed_for
    if outcome.exit_code == 128 + signal.SIGXCPU:
        return "cpu_time"
    if outcome.exit_code == 128 + signal.SIGKILL and _reported_cpu(reported) >= limits.cpu_seconds:
        return "cpu_time"
    return None


def _reported_cpu(tokens: list[bytes]) -> float:
    """The supervisor's ``cpu=<seconds>``; the code can write to the status pipe too, so garbage is skipped."""
    cpu = 0.0
    for token in tokens:
        if token.startswith(b"cpu="):
            try:
                cpu = max(cpu, float(token[4:]))
            except ValueError:
                continue
    return cpu


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


def stage_file(directory: Path, name: str, text: str) -> Path:
    """Write ``text`` to ``directory / name``, readable by the sandbox's user (mode 0444)."""
    path = directory / name
    path.write_text(text, encoding="utf-8")
    path.chmod(0o444)
    return path


class _Spawner(Protocol):
    @property
    def limits(self) -> SandboxLimits: ...

    def files_root(self, files_dir: Path) -> str: ...

    def spawn(
        self, python_args: Sequence[str], files_dir: Path | None, *, stdin: int, pass_fds: Sequence[int] = ()
    ) -> subprocess.Popen: ...

    @property
    def tasks(self) -> Callable[[], int] | None: ...


def _run_python(sandbox: _Spawner, code: str) -> RunResult:
    with tempfile.TemporaryDirectory(prefix="planted-run-") as tmp:
        files_dir = Path(tmp)
        stage_file(files_dir, "main.py", code)
        status_read, status_write = os.pipe()
        try:
            try:
                script = f"{sandbox.files_root(files_dir)}/main.py"
                started = time.monotonic()
                proc = sandbox.spawn(
                    ["-I", "-B", "-u", "-X", "utf8", "-c", _RUNNER, str(status_write), script],
                    files_dir,
                    stdin=subprocess.DEVNULL,
                    pass_fds=(status_write,),
                )
            finally:
                os.close(status_write)
            outcome = _collect(proc, sandbox.limits, started, sandbox.tasks)
            status = _read_available(status_read, 64 * KIB)
        finally:
            os.close(status_read)
    return RunResult(
        stdout=outcome.stdout.decode("utf-8", errors="replace"),
        stderr=outcome.stderr.decode("utf-8", errors="replace"),
        exit_code=outcome.exit_code,
        limit_hit=_classify(outcome, status, sandbox.limits),
        wall_seconds=outcome.wall_seconds,
        truncated=outcome.truncated,
        limits=sandbox.limits,
    )


def _read_available(fd: int, cap: int) -> bytes:
    """What the pipe holds now (up to ``cap`` bytes), without waiting for writers that remain."""
    os.set_blocking(fd, False)
    data = bytearray()
    while len(data) < cap:
        try:
            chunk = os.read(fd, cap - len(data))
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    return bytes(data)


def _sandbox_uid(workspace: Path) -> int:
    return _UID_BASE + zlib.crc32(str(workspace).encode()) % 1_000_000_000


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

    Raises
    ------
    SandboxUnavailableError
        When ``bwrap`` (Debian package ``bubblewrap``), ``prlimit`` or ``setpriv`` (``util-linux``)
        is missing, or when a trial sandbox fails to start (its error is quoted).

    Notes
    -----
    The constructor starts one trial sandbox (about 40 ms) so that a host without the needed
    namespaces fails here, before an episode starts, not in the middle of one.
    """

    sandboxed = True
    workspace_path = WORKSPACE

    def __init__(self, workspace: Path, data_file: Path | None, limits: SandboxLimits = SandboxLimits()) -> None:
        self._bwrap = _require("bwrap", "bubblewrap")
        self._prlimit = _require("prlimit", "util-linux")
        self._as_root = os.geteuid() == 0
        self._setpriv = _require("setpriv", "util-linux") if self._as_root else None
        self.limits = limits
        self.workspace = Path(workspace).resolve()
        self.data_file = None if data_file is None else Path(data_file).resolve()
        for path in _interpreter_paths():
            for inside in (self.workspace, self.data_file):
                if inside is not None and inside.is_relative_to(path):
                    raise SandboxUnavailableError(
                        f"{inside} lies inside the interpreter directory {path}, which is mounted read-only "
                        "into the sandbox with everything under it (sealed files beside it would be visible); "
                        "keep workspaces and world files outside the Python installation"
                    )
        self.workspace.mkdir(parents=True, exist_ok=True)
        self._staged_data = None
        if self.data_file is not None:
            if not self.data_file.is_file():
                raise FileNotFoundError(f"data file {self.data_file} does not exist")
            (self.workspace / "data").mkdir(exist_ok=True)
            (self.workspace / "data" / "data.csv").touch()  # the mount point
            staging = Path(tempfile.mkdtemp(prefix="planted-data-"))
            weakref.finalize(self, shutil.rmtree, staging, ignore_errors=True)
            self._staged_data = staging / "data.csv"
            shutil.copyfile(self.data_file, self._staged_data)
            self._staged_data.chmod(0o444)
        self.uid = _sandbox_uid(self.workspace) if self._as_root else os.getuid()
        """The uid the code runs as (a dedicated unprivileged uid when the host runs as root)."""
        if self._as_root:
            os.chown(self.workspace, self.uid, self.uid)
        self._check()

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

    def command(self, python_args: Sequence[str], files_dir: Path | None) -> list[str]:
        """The argv that runs ``sys.executable *python_args`` in this sandbox.

        Each regular file of the host directory ``files_dir`` is mounted read-only at
        ``/sandbox/<name>``.
        """
        limits = self.limits
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
            argv += ["--perms", "1777", "--size", str(limits.file_bytes), "--tmpfs", tmpfs]
        # Interpreter prefixes after the tmpfs mounts: a virtual environment under /tmp (a CI clone)
        # must stay visible above the sandbox's private /tmp.
        made: set[str] = set()
        for path in _interpreter_paths():
            argv += _parents(path, made) + ["--ro-bind", path, path]
        argv += ["--bind", str(self.workspace), WORKSPACE]
        if self._staged_data is not None:
            argv += ["--ro-bind", str(self._staged_data), DATA_PATH]
        if files_dir is not None:
            argv += ["--perms", "0755", "--dir", FILES_ROOT]
            for file in sorted(files_dir.iterdir()):
                argv += ["--ro-bind", str(file), f"{FILES_ROOT}/{file.name}"]
        argv += ["--remount-ro", "/", "--chdir", WORKSPACE, "--clearenv"]
        for key, value in _environment(limits, home=WORKSPACE, tmp="/tmp").items():
            argv += ["--setenv", key, value]
        argv.append("--")
        if self._setpriv is not None:
            argv += [self._setpriv, f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups"]
            argv += ["--bounding-set=-all", "--inh-caps=-all", "--"]
        argv += _rlimits(self._prlimit, limits, processes=True)
        return [*argv, sys.executable, *python_args]

    def spawn(
        self, python_args: Sequence[str], files_dir: Path | None, *, stdin: int, pass_fds: Sequence[int] = ()
    ) -> subprocess.Popen:
        """Start :meth:`command` with piped stdout/stderr in a new session (see :func:`kill_process_tree`)."""
        return _start(self.command(python_args, files_dir), stdin=stdin, pass_fds=pass_fds)

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

    def _check(self) -> None:
        trial = subprocess.run(self.command(["-I", "-S", "-c", "pass"], None), capture_output=True, timeout=60)
        if trial.returncode != 0:
            message = trial.stderr.decode("utf-8", errors="replace").strip()
            raise SandboxUnavailableError(
                f"bwrap is installed but could not start a sandbox here (exit {trial.returncode}): {message}. "
                "bwrap needs to create mount, PID and network namespaces: run as root, or enable "
                "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)."
            )


def _start(argv: list[str], *, stdin: int, pass_fds: Sequence[int], **kwargs: Any) -> subprocess.Popen:
    """Start ``argv`` with piped stdout/stderr in a new session (so the whole tree can be killed)."""
    return subprocess.Popen(
        argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=tuple(pass_fds),
        start_new_session=True, **kwargs,
    )


def _parents(path: str, made: set[str]) -> list[str]:
    """bwrap arguments creating the missing ancestors of ``path`` with mode 0755 (bwrap would copy
    the host's modes, and ``/root`` is 0700)."""
    argv = []
    for parent in reversed(Path(path).parents[:-1]):
        if str(parent) not in made and parent != Path("/usr"):
            made.add(str(parent))
            argv += ["--perms", "0755", "--dir", str(parent)]
    return argv


class UnsafeLocalSandbox:
    """Development only: a plain subprocess in ``workspace`` with no isolation (``sandboxed = False``).

    For ``--unsafe-no-sandbox`` on hosts without bubblewrap; never chosen silently. The code can
    read and write anything the host user can, reach the network and leave processes behind.
    CPU time, memory and file size are limited as in :class:`BwrapSandbox` (``prlimit``); wall time
    and output as there (killing the process group); the process count is **not** limited
    (``RLIMIT_NPROC`` would count every process of the host user). The data file is copied to
    ``workspace/data/data.csv``.
    """

    sandboxed = False

    def __init__(self, workspace: Path, data_file: Path | None, limits: SandboxLimits = SandboxLimits()) -> None:
        self._prlimit = _require("prlimit", "util-linux")
        self.limits = limits
        self.workspace = Path(workspace).resolve()
        self.workspace.mkdir(parents=True, exist_ok=True)
        self._data_path = None
        if data_file is not None:
            target = self.workspace / "data" / "data.csv"
            target.parent.mkdir(exist_ok=True)
            if target.exists():
                target.chmod(0o644)
            shutil.copyfile(data_file, target)
            target.chmod(0o444)
            self._data_path = str(target)

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

    def spawn(
        self, python_args: Sequence[str], files_dir: Path | None, *, stdin: int, pass_fds: Sequence[int] = ()
    ) -> subprocess.Popen:
        """Start ``sys.executable *python_args`` under ``prlimit`` in the workspace, in a new session."""
        return _start(
            [*_rlimits(self._prlimit, self.limits, processes=False), sys.executable, *python_args],
            stdin=stdin, pass_fds=pass_fds, cwd=self.workspace,
            env=_environment(self.limits, home=str(self.workspace), tmp=tempfile.gettempdir()),
        )

    def run_python(self, code: str) -> RunResult:
        """Run ``code`` as ``__main__`` in a fresh, unsandboxed Python process (see :class:`BwrapSandbox`)."""
        return _run_python(self, code)

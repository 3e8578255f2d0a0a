"""The agent's ``run_python`` sandbox: every call is a fresh Python process inside bubblewrap.

This module builds the sandbox (what is mounted, the environment, the user, the filter); the limits
and results are in :mod:`planted.agents.limits`, the host's side of a call (reading, watching,
killing, classifying) in :mod:`planted.agents.calls`.

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
import shutil
import stat
import subprocess
import sys
import tempfile
import weakref
import zlib
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from planted.agents.agent_env import FORBIDDEN_MODULES, AgentEnvironment, agent_environment
from planted.agents.calls import kill_process_tree, run_python_call, tasks_of
from planted.agents.limits import GIB, KIB, MIB, LimitHit, RunResult, SandboxLimits
from planted.agents.seccomp import seccomp_program

WORKSPACE = "/workspace"
"""Where the writable workspace appears inside the sandbox."""
DATA_DIR = "/workspace/data"
DATA_PATH = "/workspace/data/data.csv"
"""Where the agent's data file appears inside the sandbox."""
FILES_ROOT = "/sandbox"
"""Where the read-only files of one call (the code, the evaluator harness) appear inside."""

_UID_BASE = 2_000_000_000
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives")

# Run once per process and environment in a trial sandbox: the forbidden modules must be absent.
_ENVIRONMENT_CHECK = """\
import importlib.util, sys
found = [name for name in sys.argv[1:] if importlib.util.find_spec(name) is not None]
print(",".join(found))
"""


class SandboxUnavailableError(RuntimeError):
    """bubblewrap (or a util-linux helper) is missing, or cannot create a sandbox on this host."""


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
        return (lambda: tasks_of(uid)) if self._as_root else None

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
        return run_python_call(self, code)


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
        return run_python_call(self, code)


__all__ = ["DATA_PATH", "GIB", "KIB", "MIB", "WORKSPACE", "BwrapSandbox", "LimitHit", "RunResult", "Sandbox",
           "SandboxLimits", "SandboxUnavailableError", "UnsafeLocalSandbox", "ensure_plain_directory",
           "parent_directories", "require_program"]

"""The limits of one sandboxed call and what it returns to the agent.

:class:`SandboxLimits` holds every limit (how each is enforced is in :mod:`planted.agents.sandbox`);
:class:`RunResult` is a call's outcome, and :meth:`RunResult.observation` the text the agent reads.
Every limit hit a result reports was measured by the host (:mod:`planted.agents.calls`).
"""

from __future__ import annotations

import signal
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

LimitHit = Literal["wall_time", "cpu_time", "memory", "processes", "output", "file_size", "disk"]
"""Which limit stopped a run (each confirmed by the host)."""

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

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


def cpu_slack(limit: float) -> float:
    """How far below the CPU limit a process may last have been sampled and still count as having hit it.

    The larger of 0.25 s and 2% of the limit: the sampling thread can lag by a tenth of a second on
    a loaded machine. A process that stops on its own within the slack is reported as a hit; one
    killed at the limit while the sampler lagged by more is not (its exit status still says SIGXCPU).
    """
    return max(0.25, 0.02 * limit)

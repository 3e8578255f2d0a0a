"""Host-side totals of one sandboxed call: memory and processes of the whole tree, bytes in the workspace.

Per-process limits (``RLIMIT_AS``, ``RLIMIT_NPROC``, ``RLIMIT_FSIZE``) do not bound a tree: six
children of 400 MiB each pass a 512 MiB address-space limit, and four 1 GiB files pass a 1 GiB
file limit. :class:`TreeWatch` measures the totals **on the host**, from ``/proc`` and the
workspace directory, in a thread that samples while the call runs, and kills the process group
the moment a total passes its cap. What it reports is what the host measured, never what the
sandboxed code said, so a limit hit cannot be forged from inside.

Conventions:

* memory: resident set size (``VmRSS``) summed over every process descending from the sandbox's
  first process (pages shared between processes are counted once per process: conservative).
  Sampled every ``interval`` seconds, so a tree may pass the cap by what it allocates in one
  interval before it is killed.
* processes: tasks (threads included, as ``RLIMIT_NPROC`` counts them) of the same tree; the
  highest count seen is kept (see :attr:`TreeWatch.saturated`).
* CPU: the largest CPU time (user + system) of one process of the tree, as last sampled.
* disk: for every file under the workspace (symbolic links are not followed, nothing is opened),
  the larger of its length and its allocated blocks, summed, and the number of entries.
"""

from __future__ import annotations

import os
import signal
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Breach = Literal["memory", "disk", "processes"]


@dataclass(frozen=True)
class DiskUsage:
    """Bytes and entries under a directory, and the largest file changed since a given time."""

    bytes: int
    entries: int
    largest_changed: int


def disk_usage(root: Path, stop_after: int | None = None, changed_since_ns: int = 0) -> DiskUsage:
    """Sum of ``max(st_size, 512 * st_blocks)`` over every entry below ``root`` (links not followed).

    ``stop_after`` ends the walk early once that many bytes are counted (a breach is already certain);
    ``largest_changed`` is the length of the largest regular file whose change time is at or after
    ``changed_since_ns``.
    """
    total = entries = largest = 0
    pending = [str(root)]
    while pending:
        try:
            iterator = os.scandir(pending.pop())
        except OSError:
            continue
        with iterator:
            for entry in iterator:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                entries += 1
                size = max(info.st_size, 512 * info.st_blocks)
                total += size
                if stat.S_ISDIR(info.st_mode):
                    pending.append(entry.path)
                elif stat.S_ISREG(info.st_mode) and info.st_ctime_ns >= changed_since_ns:
                    largest = max(largest, info.st_size)
                if stop_after is not None and total > stop_after:
                    return DiskUsage(total, entries, largest)
    return DiskUsage(total, entries, largest)


_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICK = os.sysconf("SC_CLK_TCK")


def _process_table() -> dict[int, tuple[int, int, int, float]]:
    """``{pid: (ppid, threads, rss bytes, cpu seconds)}`` of every process on the host.

    Processes that end while the table is read are skipped.
    """
    table: dict[int, tuple[int, int, int, float]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                text = handle.read()
        except OSError:
            continue
        fields = text[text.rfind(b")") + 2 :].split()
        # fields[0] is field 3 (state) of proc(5): ppid is field 4, utime 14, stime 15 (clock ticks),
        # num_threads 20, rss 24 (pages).
        cpu = (int(fields[11]) + int(fields[12])) / _TICK
        table[int(name)] = (int(fields[1]), int(fields[17]), int(fields[21]) * _PAGE, cpu)
    return table


def tree_totals(root_pid: int) -> tuple[int, int, float]:
    """(tasks, resident bytes, largest CPU seconds of one process) of ``root_pid`` and its descendants."""
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    tasks = rss = 0
    cpu = 0.0
    pending = [root_pid]
    while pending:
        pid = pending.pop()
        if pid not in table:
            continue
        _, threads, resident, used = table[pid]
        tasks += threads
        rss += resident
        cpu = max(cpu, used)
        pending += children.get(pid, [])
    return tasks, rss, cpu


class TreeWatch:
    """Sample a sandbox's tree and workspace while it runs; kill its process group on a breach.

    Parameters
    ----------
    pid : int
        The sandbox's first process (bwrap), leader of its own process group.
    memory_bytes : int
        Cap on the tree's summed resident memory.
    processes : int
        The sandboxed user's task limit (``RLIMIT_NPROC``). The tree also holds bubblewrap's two
        processes, which the limit does not count, so a tree of ``processes`` tasks or more has
        come within two of it: that counts as reaching it.
    workspace : Path or None
        Directory whose total bytes are capped by ``disk_bytes`` (None: no disk cap).
    disk_bytes : int
    interval : float
        Seconds between memory samples; the workspace is walked every ``disk_every`` samples.
    """

    def __init__(
        self, pid: int, *, memory_bytes: int, processes: int, workspace: Path | None, disk_bytes: int,
        interval: float = 0.01, disk_every: int = 5,
    ) -> None:
        self.pid = pid
        self.memory_bytes, self.processes = memory_bytes, processes
        self.workspace, self.disk_bytes = workspace, disk_bytes
        self.interval, self.disk_every = interval, disk_every
        self.breach: Breach | None = None
        self.peak_memory = 0
        self.peak_tasks = 0
        self.peak_process_cpu = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"treewatch-{pid}", daemon=True)

    def __enter__(self) -> "TreeWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop sampling (idempotent); the measurements stay."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    @property
    def saturated(self) -> bool:
        """Whether the tree was seen at its process limit."""
        return self.peak_tasks >= self.processes

    def _watch(self) -> None:
        samples = 0
        while not self._stop.is_set():
            tasks, rss, cpu = tree_totals(self.pid)
            self.peak_tasks = max(self.peak_tasks, tasks)
            self.peak_process_cpu = max(self.peak_process_cpu, cpu)
            self.peak_memory = max(self.peak_memory, rss)
            breach: Breach | None = None
            if rss > self.memory_bytes:
                breach = "memory"
            elif self.workspace is not None and samples % self.disk_every == 0:
                if disk_usage(self.workspace, stop_after=self.disk_bytes).bytes > self.disk_bytes:
                    breach = "disk"
            if breach is not None:
                self.breach = breach
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                return
            samples += 1
            self._stop.wait(self.interval)


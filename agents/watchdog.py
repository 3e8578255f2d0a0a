"""Host-side totals of one sandboxed call: memory and processes of the whole tree, what the workspace holds.

Per-process limits (``RLIMIT_AS``, ``RLIMIT_NPROC``, ``RLIMIT_FSIZE``) do not bound a tree: six
children of 400 MiB each pass a 512 MiB address-space limit, and four 1 GiB files pass a 1 GiB
file limit. :class:`TreeWatch` measures the totals **on the host**, from ``/proc`` and the
workspace directory, in two threads that sample while the call runs (one for the processes, one
for the workspace, so that a slow walk of a crowded workspace never delays the memory samples),
and kills the process group the moment a total passes its cap. What it reports is what the host
measured, never what the sandboxed code said, so a limit hit cannot be forged from inside.

Conventions:

* memory: resident set size summed over every process descending from the sandbox's first
  process (pages shared between processes are counted once per process: conservative), plus the
  memory no RSS shows: the larger of the unlinked regular files the tree holds open outside the
  workspace's file system (``memfd_create``, a deleted ``/tmp`` file) and the growth of the host's
  shared memory (``Shmem``) since the call started (which also sees a memfd that is only mapped,
  or in flight on a socket, and the sandbox's tmpfs). The growth is host-wide: shared memory that
  another process takes during the call is counted too (conservative). Sampled every
  ``interval`` seconds, so a tree may pass the cap by what it allocates in one interval before it
  is killed.
* processes: tasks (threads included, as ``RLIMIT_NPROC`` counts them) of the same tree; the
  highest count seen is kept (see :attr:`TreeWatch.saturated`).
* CPU: the largest CPU time (user + system) any process of the tree was seen to have used.
* workspace: :func:`planted.agents.workspace_files.disk_usage` (bytes, entries, nesting), plus the
  disk no walk shows: the larger of the unlinked files held open on the workspace's file system
  and the growth of that file system's used space since the call started beyond the growth the
  walk sees (files mapped or in flight after their unlink; host-wide, so another process's writes
  during the call count too); walked every ``disk_interval`` seconds.
* the largest regular file any process of the tree holds open (for the file-size limit).
"""

from __future__ import annotations

import os
import signal
import stat
import threading
from pathlib import Path
from typing import Literal

from planted.agents.workspace_files import disk_usage

Breach = Literal["memory", "disk"]

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


def shmem_bytes() -> int:
    """The host's shared memory in use (``Shmem`` of ``/proc/meminfo``): tmpfs, memfd and System V pages."""
    with open("/proc/meminfo", "rb") as handle:
        for line in handle:
            if line.startswith(b"Shmem:"):
                return int(line.split()[1]) * 1024
    return 0


def free_bytes(directory: Path) -> int:
    """Free bytes of the file system holding ``directory``."""
    info = os.statvfs(directory)
    return info.f_bfree * info.f_frsize


def tree_pids(root_pid: int, table: dict[int, tuple[int, int, int, float]]) -> list[int]:
    """``root_pid`` and all its descendants in ``table``."""
    children: dict[int, list[int]] = {}
    for pid, row in table.items():
        children.setdefault(row[0], []).append(pid)
    found, pending = [], [root_pid]
    while pending:
        pid = pending.pop()
        if pid in table:
            found.append(pid)
            pending += children.get(pid, [])
    return found


def held_files(pids: list[int]) -> dict[tuple[int, int], tuple[int, int]]:
    """``{(device, inode): (bytes, nlink)}`` of the regular files the processes hold open.

    Bytes are ``max(st_size, 512 * st_blocks)``. Read from ``/proc/<pid>/fd`` (as root, or as the
    processes' owner); descriptors that close meanwhile are skipped.
    """
    held: dict[tuple[int, int], tuple[int, int]] = {}
    for pid in pids:
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for name in names:
            try:
                info = os.stat(f"/proc/{pid}/fd/{name}")
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                held[(info.st_dev, info.st_ino)] = (max(info.st_size, 512 * info.st_blocks), info.st_nlink)
    return held


class TreeWatch:
    """Sample a sandbox's tree and workspace while it runs; kill its process group on a breach.

    Parameters
    ----------
    pid : int
        The sandbox's first process (bwrap), leader of its own process group.
    memory_bytes : int
        Cap on the tree's memory (see the module conventions).
    processes : int
        The sandboxed user's task limit (``RLIMIT_NPROC``). The tree also holds bubblewrap's two
        processes, which the limit does not count, so a tree of ``processes`` tasks or more has
        come within two of it: that counts as reaching it.
    workspace : Path or None
        Directory whose contents are capped (None: no workspace caps).
    disk_bytes, files : int
        Caps on the workspace's bytes (with the unlinked files held open on its file system) and entries.
    interval, disk_interval : float
        Seconds between process samples and between workspace walks.
    """

    def __init__(
        self, pid: int, *, memory_bytes: int, processes: int, workspace: Path | None, disk_bytes: int, files: int,
        interval: float = 0.01, disk_interval: float = 0.05,
    ) -> None:
        self.pid = pid
        self.memory_bytes, self.processes = memory_bytes, processes
        self.workspace, self.disk_bytes, self.files = workspace, disk_bytes, files
        self.interval, self.disk_interval = interval, disk_interval
        self.breach: Breach | None = None
        self.peak_tasks = 0
        self.peak_process_cpu = 0.0
        self.largest_open_file = 0
        self.held_disk = 0
        self._device = os.stat(workspace).st_dev if workspace is not None else None
        # Baselines of two host-wide measures, for what no process's descriptors or mappings show:
        # memory and disk held through descriptors in flight on a socket or a mapping of an unlinked file.
        self._shmem_at_start = shmem_bytes()
        self._free_at_start = free_bytes(workspace) if workspace is not None else 0
        self._visible_at_start = disk_usage(workspace).bytes if workspace is not None else 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._watch_processes, name=f"treewatch-{pid}", daemon=True)]
        if workspace is not None:
            self._threads.append(threading.Thread(target=self._watch_workspace, name=f"diskwatch-{pid}", daemon=True))

    def __enter__(self) -> "TreeWatch":
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop sampling (idempotent); the measurements stay."""
        self._stop.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join()

    @property
    def saturated(self) -> bool:
        """Whether the tree was seen at its process limit."""
        return self.peak_tasks >= self.processes

    def _kill(self, breach: Breach) -> None:
        with self._lock:
            if self.breach is None:
                self.breach = breach
        self._stop.set()
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _watch_processes(self) -> None:
        while not self._stop.is_set():
            table = _process_table()
            pids = tree_pids(self.pid, table)
            tasks = sum(table[p][1] for p in pids)
            rss = sum(table[p][2] for p in pids)
            self.peak_tasks = max(self.peak_tasks, tasks)
            self.peak_process_cpu = max([self.peak_process_cpu, *(table[p][3] for p in pids)])
            held = held_files(pids)
            held_memory = sum(size for (device, _), (size, links) in held.items() if links == 0 and device != self._device)
            hidden_memory = max(held_memory, shmem_bytes() - self._shmem_at_start)
            self.held_disk = sum(size for (device, _), (size, links) in held.items() if links == 0 and device == self._device)
            if held:
                self.largest_open_file = max(self.largest_open_file, max(size for size, _ in held.values()))
            if rss + hidden_memory > self.memory_bytes:
                self._kill("memory")
                return
            self._stop.wait(self.interval)

    def _watch_workspace(self) -> None:
        assert self.workspace is not None
        while not self._stop.is_set():
            usage = disk_usage(self.workspace, stop_after_bytes=self.disk_bytes, stop_after_entries=self.files)
            growth = self._free_at_start - free_bytes(self.workspace)
            hidden_disk = max(self.held_disk, growth - (usage.bytes - self._visible_at_start))
            if usage.bytes + hidden_disk > self.disk_bytes or usage.entries > self.files or usage.too_deep:
                self._kill("disk")
                return
            self._stop.wait(self.disk_interval)

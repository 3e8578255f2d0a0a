"""The host's access to what the agent controls: reading, counting and removing workspace files
without following anything the agent made.

The agent decides what stands at every path of its workspace: a regular file, a symbolic link to
a host file (``/etc/shadow``, ``/proc/self/mem``), a FIFO that blocks whoever opens it, a device,
or a file of gigabytes. :func:`read_workspace_file` opens the name relative to a descriptor of the
directory with ``O_NOFOLLOW | O_NONBLOCK`` (a link is refused whatever it points to, so the answer
is the same for existing and missing targets; opening a FIFO does not block), checks on that one
descriptor that it is a regular file no larger than the cap, and reads it from that descriptor.
:func:`disk_usage`, :func:`remove_changed_since` and :func:`remove_tree` walk a workspace by
directory descriptors with ``O_NOFOLLOW``, iteratively, so that links, races that swap a directory
for a link, and trees of any depth (deeper than ``PATH_MAX`` or the interpreter's recursion limit)
neither mislead nor crash the host.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

MODEL_FILE_CAP = 1024 * 1024
"""Largest accepted ``final_model.py`` (1 MiB; the scripted researcher's is about 1 KiB)."""


class WorkspaceFileError(ValueError):
    """The file cannot be accepted; the message says why in terms the agent can act on."""


def read_workspace_file(directory: Path, name: str, cap: int) -> bytes:
    """The bytes of the regular file ``name`` directly in ``directory``, at most ``cap`` of them.

    Parameters
    ----------
    directory : Path
        A directory the host controls (the agent may control what is inside it).
    name : str
        A plain file name (no ``/``).
    cap : int
        Largest accepted size in bytes.

    Raises
    ------
    WorkspaceFileError
        Missing, a symbolic link, not a regular file (directory, FIFO, socket, device), or larger
        than ``cap``.
    """
    if "/" in name or name in ("", ".", ".."):
        raise ValueError(f"not a plain file name: {name!r}")
    folder = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=folder)
        except FileNotFoundError:
            raise WorkspaceFileError(f"{name} not found") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise WorkspaceFileError(f"{name} is a symbolic link; write a regular file instead") from None
            raise WorkspaceFileError(f"{name} cannot be opened ({os.strerror(exc.errno or 0)})") from None
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise WorkspaceFileError(f"{name} is not a regular file; write a regular file instead")
        if info.st_size > cap:
            raise WorkspaceFileError(f"{name} has {info.st_size} bytes, more than the limit of {cap} bytes")
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= cap:
            chunk = os.read(fd, min(1 << 16, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > cap:
            raise WorkspaceFileError(f"{name} grew beyond the limit of {cap} bytes while it was read")
        return b"".join(chunks)
    finally:
        os.close(fd)




MAX_DEPTH = 64
"""Deepest directory nesting the host walks in a workspace; deeper is a disk-limit breach."""

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class DiskUsage:
    """What a workspace holds, as the host counted it.

    Attributes
    ----------
    bytes : int
        Sum over entries of ``max(st_size, 512 * st_blocks)``.
    entries : int
        Files, directories, links and other entries.
    largest_changed : int
        Length of the largest regular file changed at or after the walk's ``changed_since_ns``.
    too_deep : bool
        Whether directories are nested deeper than :data:`MAX_DEPTH` (their contents are not counted).
    """

    bytes: int
    entries: int
    largest_changed: int
    too_deep: bool


def _open_child(parent: int, name: str) -> int | None:
    """A descriptor of the directory ``name`` in ``parent``; None if it is not one (or was swapped for a link)."""
    try:
        return os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
    except OSError:
        return None


def disk_usage(root: Path, *, changed_since_ns: int = 0, stop_after_bytes: int | None = None,
               stop_after_entries: int | None = None) -> DiskUsage:
    """Count what lies under ``root`` without following anything the agent made.

    Every directory is opened relative to its parent's descriptor with ``O_NOFOLLOW`` (a directory
    swapped for a link while the walk runs is skipped, never followed), entries are ``lstat``-ed
    relative to that descriptor, and no path string grows with the depth (a tree deeper than
    ``PATH_MAX`` is walked like any other, down to :data:`MAX_DEPTH`). The walk is iterative and
    holds at most :data:`MAX_DEPTH` descriptors. It ends early once ``stop_after_bytes`` or
    ``stop_after_entries`` is passed (a breach is then certain).
    """
    total = entries = largest = 0
    too_deep = False
    try:
        top = os.open(root, _DIRECTORY_FLAGS)  # the workspace itself: a directory the host made
    except OSError:
        return DiskUsage(0, 0, 0, False)
    stack: list[tuple[int, list[str]]] = []

    def visit(fd: int) -> list[str]:
        nonlocal total, entries, largest
        children = []
        with os.scandir(fd) as iterator:
            for entry in iterator:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                entries += 1
                total += max(info.st_size, 512 * info.st_blocks)
                if stat.S_ISDIR(info.st_mode):
                    children.append(entry.name)
                elif stat.S_ISREG(info.st_mode) and info.st_ctime_ns >= changed_since_ns:
                    largest = max(largest, info.st_size)
        return children

    def over() -> bool:
        return (stop_after_bytes is not None and total > stop_after_bytes) or (
            stop_after_entries is not None and entries > stop_after_entries)

    try:
        stack.append((top, visit(top)))
        while stack and not over():
            fd, pending = stack[-1]
            if not pending:
                os.close(fd)
                stack.pop()
                continue
            child = _open_child(fd, pending.pop())
            if child is None:
                continue
            if len(stack) >= MAX_DEPTH:
                too_deep = True
                os.close(child)
                continue
            try:
                stack.append((child, visit(child)))
            except OSError:
                os.close(child)
    finally:
        for fd, _ in stack:
            os.close(fd)
    return DiskUsage(total, entries, largest, too_deep)


def _prune(root: Path, *, since_ns: int | None, prune_below: int | None) -> list[str]:
    """Post-order walk of ``root``'s tree, however deep, removing entries; return the removed names.

    A non-directory is removed when ``since_ns`` is None or its change time is at or after it; a
    directory is removed once it is empty and (``since_ns`` None or) its modification time is at or
    after ``since_ns``; a directory at depth ``prune_below`` or deeper is removed with everything
    in it. The walk holds two descriptors and a stack of names: it descends by ``openat`` of a
    child with ``O_NOFOLLOW`` and climbs back by ``..``, which is sound only while nothing else
    changes the tree, so it runs only when no sandboxed process is alive. Links are removed, never
    followed; names are returned as JSON strings relative to ``root`` (directories end with ``/``).
    """
    import json

    removed: list[str] = []
    top = os.open(root, _DIRECTORY_FLAGS)
    current = top
    names: list[str] = []  # the path from root to current
    done_below: list[set[str]] = [set()]  # children of the directory at each depth already walked
    try:
        while True:
            shown = "".join(f"{n}/" for n in names)
            everything = since_ns is None or (prune_below is not None and len(names) >= prune_below)
            child = None
            with os.scandir(current) as iterator:
                entries = [(e.name, e.stat(follow_symlinks=False)) for e in iterator]
            for name, info in entries:
                if stat.S_ISDIR(info.st_mode):
                    if child is None and name not in done_below[-1]:
                        child = name
                elif everything or info.st_ctime_ns >= since_ns:  # type: ignore[operator]
                    try:
                        os.unlink(name, dir_fd=current)
                    except OSError:
                        continue
                    removed.append(json.dumps(os.fsdecode(shown + name), ensure_ascii=True))
            if child is not None:
                fd = _open_child(current, child)
                done_below[-1].add(child)
                if fd is None:
                    continue
                if current != top:
                    os.close(current)
                current = fd
                names.append(child)
                done_below.append(set())
                continue
            if not names:
                break
            info = os.fstat(current)
            empty = not os.listdir(current)
            parent = os.open("..", _DIRECTORY_FLAGS, dir_fd=current) if len(names) > 1 else top
            os.close(current)
            current = parent
            name = names.pop()
            done_below.pop()
            if empty and (everything or info.st_mtime_ns >= since_ns):  # type: ignore[operator]
                try:
                    os.rmdir(name, dir_fd=current)
                except OSError:
                    continue
                removed.append(json.dumps(os.fsdecode(shown), ensure_ascii=True))
    finally:
        if current != top:
            os.close(current)
        os.close(top)
    return sorted(removed)


def remove_tree(path: Path) -> None:
    """Remove ``path`` and everything below it, however deep, following no links.

    ``shutil.rmtree`` recurses (a tree of a thousand levels raises ``RecursionError``); this walk is
    iterative (:func:`_prune`). Used for workspaces, only when no sandboxed process is alive.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(path)
        return
    _prune(Path(path), since_ns=None, prune_below=None)
    os.rmdir(path)


def remove_changed_since(root: Path, since_ns: int) -> list[str]:
    """Remove what a call wrote, and whatever is nested deeper than :data:`MAX_DEPTH`.

    Every non-directory entry below ``root`` changed at or after ``since_ns`` is removed, then every
    directory left empty by that whose modification time is at or after ``since_ns``; a directory
    at depth :data:`MAX_DEPTH` or deeper is removed with everything in it (however old: it is over
    the nesting limit). (A directory that existed before and held only new files is removed too:
    the kernel does not record when a directory was created.) Returns the removed entries relative
    to ``root``, each written as a JSON string (a name holding a newline or undecodable bytes is
    shown escaped, never as a line of its own), sorted. Only when no sandboxed process is alive.
    """
    return _prune(Path(root), since_ns=since_ns, prune_below=MAX_DEPTH)


__all__ = ["MAX_DEPTH", "MODEL_FILE_CAP", "DiskUsage", "WorkspaceFileError", "disk_usage", "read_workspace_file",
           "remove_changed_since", "remove_tree"]

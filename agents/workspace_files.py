"""Reading a file the agent controls, on the host, without following anything the agent made.

The agent decides what stands at every path of its workspace: a regular file, a symbolic link to
a host file (``/etc/shadow``, ``/proc/self/mem``), a FIFO that blocks whoever opens it, a device,
or a file of gigabytes. :func:`read_workspace_file` opens the name relative to a descriptor of the
directory with ``O_NOFOLLOW | O_NONBLOCK`` (a link is refused whatever it points to, so the answer
is the same for existing and missing targets; opening a FIFO does not block), checks on that one
descriptor that it is a regular file no larger than the cap, and reads it from that descriptor.
"""

from __future__ import annotations

import errno
import os
import stat
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


__all__ = ["MODEL_FILE_CAP", "WorkspaceFileError", "read_workspace_file"]

"""A seccomp filter for the sandbox: less kernel surface than bubblewrap alone leaves.

bubblewrap installs a classic-BPF seccomp program passed on a file descriptor (``--seccomp FD``)
just before it runs the sandboxed command; the filter then holds for every process in the sandbox.
It returns ``EPERM`` for:

* creating namespaces: ``unshare`` and ``clone`` with any ``CLONE_NEW*`` flag (no nested user
  namespace, the usual first step of a kernel exploit), ``setns``;
* mounting and root changes: ``mount``, ``umount2``, ``pivot_root``, ``chroot``, the new mount API
  (``fsopen``, ``fsmount``, ``fspick``, ``move_mount``, ``open_tree``, ``mount_setattr``);
* inspecting or changing other processes and the kernel: ``ptrace``, ``process_vm_readv/writev``,
  ``kcmp``, ``pidfd_getfd``, ``process_madvise``, System V shared memory and message queues
  (``shm*``, ``msg*``: memory no process's resident set shows) and ``memfd_secret``,
  ``bpf``, ``perf_event_open``, ``userfaultfd``, ``io_uring_*``, the keyring (``add_key``,
  ``request_key``, ``keyctl``), modules and ``kexec``, ``open_by_handle_at``, ``syslog``, ``acct``,
  ``swapon/off``, ``reboot``, ``quotactl``;

and ``ENOSYS`` for ``clone3`` (its flags live in memory a filter cannot read; glibc then falls back
to ``clone``, as under Docker's and Flatpak's profiles). A syscall of another ABI than the host's
(the i386 ABI on x86-64, or the x32 ABI's numbers) kills the process.

The numbers are the kernel's ``unistd`` tables for x86-64 and aarch64 (checked against the
installed kernel headers in ``tests/agents/test_seccomp.py``). On another architecture there is
no filter, and :func:`seccomp_program` says so by returning None (the sandbox stamps
``seccomp: false`` into its description).
"""

from __future__ import annotations

import errno
import platform
import struct

# Classic BPF opcodes (linux/filter.h, linux/bpf_common.h) and seccomp return values (linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000
_OFFSET_NR, _OFFSET_ARCH, _OFFSET_ARG0 = 0, 4, 16

CLONE_NAMESPACES = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
"""CLONE_NEWTIME | NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (linux/sched.h)."""

DENIED = (
    "setns", "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsmount", "fspick", "move_mount",
    "open_tree", "mount_setattr", "ptrace", "process_vm_readv", "process_vm_writev", "bpf", "perf_event_open",
    "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "add_key", "request_key", "keyctl",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "open_by_handle_at",
    "syslog", "acct", "swapon", "swapoff", "reboot", "quotactl", "kcmp", "pidfd_getfd", "process_madvise",
    "shmget", "shmat", "shmctl", "shmdt", "msgget", "msgsnd", "msgrcv", "msgctl", "memfd_secret",
)
"""System calls answered with EPERM whatever their arguments."""

SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "clone": 56, "clone3": 435, "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155,
        "chroot": 161, "fsopen": 430, "fsmount": 432, "fspick": 433, "move_mount": 429, "open_tree": 428,
        "mount_setattr": 442, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "bpf": 321,
        "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "add_key": 248, "request_key": 249, "keyctl": 250, "init_module": 175,
        "finit_module": 313, "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320,
        "open_by_handle_at": 304, "syslog": 103, "acct": 163, "swapon": 167, "swapoff": 168, "reboot": 169,
        "quotactl": 179, "kcmp": 312, "pidfd_getfd": 438, "process_madvise": 440,
        "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71,
        "memfd_secret": 447,
    },
    "aarch64": {
        "clone": 220, "clone3": 435, "unshare": 97, "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41,
        "chroot": 51, "fsopen": 430, "fsmount": 432, "fspick": 433, "move_mount": 429, "open_tree": 428,
        "mount_setattr": 442, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "bpf": 280,
        "perf_event_open": 241, "userfaultfd": 282, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "add_key": 217, "request_key": 218, "keyctl": 219, "init_module": 105,
        "finit_module": 273, "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294,
        "open_by_handle_at": 265, "syslog": 116, "acct": 89, "swapon": 224, "swapoff": 225, "reboot": 142,
        "quotactl": 60, "kcmp": 272, "pidfd_getfd": 438, "process_madvise": 440,
        "msgget": 186, "msgctl": 187, "msgrcv": 188, "msgsnd": 189, "shmget": 194, "shmctl": 195, "shmat": 196,
        "shmdt": 197, "memfd_secret": 447,
    },
}
"""System call numbers by machine (arch/x86/entry/syscalls/syscall_64.tbl, include/uapi/asm-generic/unistd.h)."""

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
"""AUDIT_ARCH_X86_64 and AUDIT_ARCH_AARCH64 (linux/audit.h)."""

_X32_BIT = 0x40000000


def _assemble(program: list[tuple[int, object, object, int]]) -> bytes:
    """Encode ``(code, jump-if-true label, jump-if-false label, k)`` rows; labels are row names or None.

    A label is a string naming a row (``("label", name)`` rows mark positions and emit nothing);
    jumps are encoded relative to the next instruction, as classic BPF requires.
    """
    positions: dict[str, int] = {}
    rows: list[tuple[int, object, object, int]] = []
    for row in program:
        if row[0] == -1:
            positions[str(row[1])] = len(rows)
        else:
            rows.append(row)
    out = bytearray()
    for index, (code, true, false, k) in enumerate(rows):
        jt = 0 if true is None else positions[str(true)] - index - 1
        jf = 0 if false is None else positions[str(false)] - index - 1
        if not (0 <= jt < 256 and 0 <= jf < 256):
            raise ValueError("seccomp program too long for classic BPF jumps")
        out += struct.pack("=HBBI", code, jt, jf, k)
    return bytes(out)


def seccomp_program(machine: str | None = None) -> bytes | None:
    """The filter as bytes (an array of ``struct sock_filter``), or None on an unsupported machine.

    Parameters
    ----------
    machine : str, optional
        ``platform.machine()`` of the host (default): ``x86_64`` or ``aarch64``.
    """
    machine = machine or platform.machine()
    if machine not in SYSCALLS:
        return None
    numbers = SYSCALLS[machine]
    label = -1
    program: list[tuple[int, object, object, int]] = [
        (_LD_W_ABS, None, None, _OFFSET_ARCH),
        (_JEQ_K, "native", "kill", AUDIT_ARCH[machine]),
        (label, "native", None, 0),
        (_LD_W_ABS, None, None, _OFFSET_NR),
    ]
    if machine == "x86_64":
        program.append((_JGE_K, "kill", None, _X32_BIT))
    for name in DENIED:
        program.append((_JEQ_K, "eperm", None, numbers[name]))
    program += [
        (_JEQ_K, "enosys", None, numbers["clone3"]),
        (_JEQ_K, "flags", None, numbers["clone"]),
        (_JEQ_K, "flags", "allow", numbers["unshare"]),
        (label, "flags", None, 0),
        (_LD_W_ABS, None, None, _OFFSET_ARG0),
        (_JSET_K, "eperm", "allow", CLONE_NAMESPACES),
        (label, "allow", None, 0),
        (_RET_K, None, None, _RET_ALLOW),
        (label, "eperm", None, 0),
        (_RET_K, None, None, _RET_ERRNO | errno.EPERM),
        (label, "enosys", None, 0),
        (_RET_K, None, None, _RET_ERRNO | errno.ENOSYS),
        (label, "kill", None, 0),
        (_RET_K, None, None, _RET_KILL_PROCESS),
    ]
    return _assemble(program)


__all__ = ["CLONE_NAMESPACES", "DENIED", "SYSCALLS", "seccomp_program"]

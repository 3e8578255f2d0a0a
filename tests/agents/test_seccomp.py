"""The sandbox's seccomp filter: its numbers against the kernel headers, its program run by an
independent classic-BPF interpreter, and its effect inside a real sandbox."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import struct
from pathlib import Path

import pytest

from planted.agents.sandbox import BwrapSandbox
from planted.agents.seccomp import AUDIT_ARCH, CLONE_NAMESPACES, DENIED, SYSCALLS, seccomp_program

HEADERS = {"x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
           "aarch64": Path("/usr/include/asm-generic/unistd.h")}
ALLOW, KILL = 0x7FFF0000, 0x80000000


@pytest.mark.parametrize("machine", sorted(SYSCALLS))
def test_syscall_numbers_match_the_kernel_headers(machine):
    header = HEADERS[machine]
    if not header.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{header} is missing (Debian package linux-libc-dev)")
        pytest.skip(f"{header} is not installed (Debian package linux-libc-dev)")
    defined = {name: int(number) for name, number in re.findall(r"#define __NR_(\w+)\s+(\d+)\b", header.read_text())}
    assert {name: defined.get(name) for name in SYSCALLS[machine]} == SYSCALLS[machine]


def run_bpf(program: bytes, nr: int, arch: int, arg0: int = 0) -> int:
    """A classic-BPF interpreter for the instructions a seccomp filter uses (linux/filter.h semantics)."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    rows = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    accumulator, pc = 0, 0
    while True:
        code, jt, jf, k = rows[pc]
        if code == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            accumulator = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif code in (0x15, 0x35, 0x45):  # JEQ, JGE, JSET with a constant
            taken = {0x15: accumulator == k, 0x35: accumulator >= k, 0x45: bool(accumulator & k)}[code]
            pc += 1 + (jt if taken else jf)
        elif code == 0x06:  # BPF_RET | BPF_K
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")


@pytest.mark.parametrize("machine", sorted(SYSCALLS))
def test_the_program_allows_ordinary_calls_and_refuses_the_surface(machine):
    program = seccomp_program(machine)
    arch, numbers = AUDIT_ARCH[machine], SYSCALLS[machine]
    eperm, enosys = 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
    for name in DENIED:
        assert run_bpf(program, numbers[name], arch) == eperm, name
    assert run_bpf(program, numbers["clone3"], arch) == enosys
    for flag in range(32):
        bit = 1 << flag
        expected = eperm if bit & CLONE_NAMESPACES else ALLOW
        assert run_bpf(program, numbers["clone"], arch, arg0=bit) == expected, hex(bit)
        assert run_bpf(program, numbers["unshare"], arch, arg0=bit) == expected, hex(bit)
    fork_flags = 0x01200011  # CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD, as glibc's fork
    assert run_bpf(program, numbers["clone"], arch, arg0=fork_flags) == ALLOW
    for ordinary in range(0, 460):
        if ordinary not in numbers.values():
            assert run_bpf(program, ordinary, arch) == ALLOW, ordinary
    assert run_bpf(program, 0, 0x40000003) == KILL  # another ABI (i386) kills
    if machine == "x86_64":
        assert run_bpf(program, 0x40000000 | 1, arch) == KILL  # the x32 ABI's numbers


def test_an_unknown_machine_gets_no_filter():
    assert seccomp_program("riscv64") is None


@pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"), reason="bubblewrap is not installed")
def test_inside_the_sandbox(tmp_path):
    sandbox = BwrapSandbox(tmp_path / "ws", None)
    assert sandbox.describe()["seccomp"] is (seccomp_program() is not None)
    result = sandbox.run_python(
        "import ctypes, json, os, subprocess, threading\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "def call(*args):\n    value = libc.syscall(*args)\n    return value, ctypes.get_errno()\n"
        "out = {'unshare_user': libc.unshare(0x10000000), 'errno': ctypes.get_errno()}\n"
        "out['unshare_files'] = libc.unshare(0x400)\n"  # CLONE_FILES: no namespace, allowed
        "out['mount'] = libc.mount(b'none', b'/tmp', b'tmpfs', 0, None), ctypes.get_errno()\n"
        "out['ptrace'] = libc.ptrace(0, 0, None, None), ctypes.get_errno()\n"
        "seen = []\nthread = threading.Thread(target=seen.append, args=(1,))\nthread.start(); thread.join()\n"
        "out['thread'] = seen\nout['fork'] = subprocess.run(['true']).returncode\n"
        "out['unshare_cmd'] = subprocess.run(['unshare', '-U', 'true'], capture_output=True).returncode\n"
        "print(json.dumps(out))\n"
    )
    out = json.loads(result.stdout)
    assert (out["unshare_user"], out["errno"]) == (-1, errno.EPERM), result.observation()
    assert out["unshare_files"] == 0 and out["mount"] == [-1, errno.EPERM] and out["ptrace"] == [-1, errno.EPERM]
    assert out["thread"] == [1] and out["fork"] == 0 and out["unshare_cmd"] != 0

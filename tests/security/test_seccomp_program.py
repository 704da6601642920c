"""The seccomp program decides every system call as its tables say: run on a BPF interpreter, for every input.

The program is a binary tree over runs of system-call numbers (`seccomp._runs`),
not a list: these tests hold it to the tables' meaning for every number (and the
x32 numbers, and other architectures) and for the arguments checked.
"""

from __future__ import annotations

import errno
import socket
import struct

from grader.child import seccomp

ALLOW, KILL = seccomp.RET_ALLOW, seccomp.RET_KILL_PROCESS
EPERM = seccomp.RET_ERRNO | errno.EPERM
ENOSYS = seccomp.RET_ERRNO | errno.ENOSYS


def run(program: bytes, nr: int, arch: int = seccomp.AUDIT_ARCH_X86_64, args: tuple[int, ...] = (0,) * 6) -> int:
    """What the classic-BPF ``program`` returns for one system call (a ``seccomp_data``), as the kernel runs it."""
    data = struct.pack("<IIQ6Q", nr, arch, 0, *args)
    instructions = [struct.unpack_from("HBBI", program, i) for i in range(0, len(program), 8)]
    a = pc = 0
    for _ in range(len(instructions)):  # jumps go forward only: at most one pass
        code, jt, jf, k = instructions[pc]
        pc += 1
        if code == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            a = struct.unpack_from("<I", data, k)[0]
        elif code == 0x05:  # BPF_JMP | BPF_JA
            pc += k
        elif code in (0x15, 0x35, 0x45):  # JEQ, JGE, JSET with a constant
            taken = a == k if code == 0x15 else (a >= k if code == 0x35 else bool(a & k))
            pc += jt if taken else jf
        elif code == 0x06:  # BPF_RET
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
    raise AssertionError("the program ran off its end")


def expected(nr: int, arch: int = seccomp.AUDIT_ARCH_X86_64, args: tuple[int, ...] = (0,) * 6) -> int:
    """What the module's tables and docstrings say the filter does."""
    if arch != seccomp.AUDIT_ARCH_X86_64:
        return KILL
    if nr >= 0x40000000:
        return EPERM  # the x32 ABI
    low = [arg & 0xFFFFFFFF for arg in args]
    checked = {
        seccomp.SYS_CLONE3: ENOSYS,
        seccomp.SYS_SENDTO: ALLOW if args[4] == 0 else EPERM,
        seccomp.SYS_SOCKET: ALLOW if low[0] == socket.AF_UNIX else seccomp.RET_ERRNO | errno.EAFNOSUPPORT,
        seccomp.SYS_CLONE: EPERM if low[0] & seccomp.NAMESPACE_FLAGS else ALLOW,
        seccomp.SYS_FCNTL: EPERM if low[1] in seccomp.LOCK_COMMANDS else ALLOW,
    }
    if nr in checked:
        return checked[nr]
    if nr in seccomp.ALLOWED_SYSCALLS_X86_64:
        return ALLOW
    if nr in seccomp.DENIED_SYSCALLS_X86_64:
        return EPERM
    return KILL if nr in seccomp.KILLED_SYSCALLS_X86_64 else ENOSYS


def test_every_system_call_number_gets_what_the_tables_say() -> None:
    program = seccomp.seccomp_program()
    numbers = [*range(1100), 0x40000000, 0x4000002A, 0x7FFFFFFF, 0xFFFFFFFF]
    assert [run(program, nr) for nr in numbers] == [expected(nr) for nr in numbers]
    assert {run(program, 0, arch) for arch in (0x40000003, 0xC00000B7, 0)} == {KILL}  # i386, aarch64, none
    assert run(program, 0) == ALLOW and run(program, 169) == KILL and run(program, 165) == EPERM  # read, reboot, mount


def test_the_arguments_checked() -> None:
    program = seccomp.seccomp_program()
    inet, unix = socket.AF_INET, socket.AF_UNIX
    cases = [
        (seccomp.SYS_SOCKET, (unix, 1, 0, 0, 0, 0)),
        (seccomp.SYS_SOCKET, (inet, 1, 0, 0, 0, 0)),
        (seccomp.SYS_SOCKET, (1 << 32 | unix, 1, 0, 0, 0, 0)),  # the family is an int: its low half counts
        (seccomp.SYS_SENDTO, (3, 0, 0, 0, 0, 0)),
        (seccomp.SYS_SENDTO, (3, 0, 0, 0, 0x1000, 0)),
        (seccomp.SYS_SENDTO, (3, 0, 0, 0, 1 << 40, 0)),  # an address above 4 GiB: its high half
        (seccomp.SYS_CLONE3, (0,) * 6),
        *[(seccomp.SYS_CLONE, (flags, 0, 0, 0, 0, 0)) for flags in (0x1200011, 0x20000000, 0x00020000, 0x40000000)],
        *[(seccomp.SYS_FCNTL, (3, cmd, 0, 0, 0, 0)) for cmd in (*seccomp.LOCK_COMMANDS, 0, 1, 2, 3, 4, 1030, 1 << 32)],
    ]
    assert [run(program, nr, args=args) for nr, args in cases] == [expected(nr, args=args) for nr, args in cases]
    assert [run(program, nr, args=args) for nr, args in cases[:6]] == [
        ALLOW,
        seccomp.RET_ERRNO | errno.EAFNOSUPPORT,
        ALLOW,
        ALLOW,
        EPERM,
        EPERM,
    ]


def test_the_program_is_a_short_tree() -> None:
    """About 330 instructions (a list of one comparison per number was 608), in about 140 runs."""
    program = seccomp.seccomp_program()
    assert len(program) // 8 < 400
    assert len(seccomp._runs(EPERM, ENOSYS)) < 200

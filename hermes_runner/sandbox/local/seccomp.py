"""The local sandbox's seccomp filter: syscalls no task needs, that reach the kernel's riskier parts, fail with EPERM.

Compiled once per run with libseccomp (through `pyseccomp`) into a classic BPF program, which
bubblewrap loads (`--seccomp FD`) after it has set up its namespaces and right before it execs the
command, so it applies to the command and everything it forks. Everything not listed is allowed.
"""

from __future__ import annotations

import errno
import os
import platform

# Denied with EPERM, whatever their arguments.
DENIED = (
    # kernel keyrings: global kernel state, not namespaced by uid alone (the sweep's finding)
    "keyctl", "add_key", "request_key",
    # other processes' memory (strace and gdb do not work inside; see docs/sandboxes.md)
    "process_vm_readv", "process_vm_writev", "kcmp",
    # mounts and namespaces: bubblewrap has made its own before the filter is loaded
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount",
    "fspick", "mount_setattr", "unshare", "setns",
    # the kernel itself
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon",
    "swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "iopl", "ioperm", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "vhangup", "lookup_dcookie", "nfsservctl",
    # large attack surfaces a task does not need
    "bpf", "perf_event_open", "userfaultfd", "open_by_handle_at", "name_to_handle_at", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "fanotify_init",
)  # fmt: skip
# clone(2) flags that make namespaces: clone with any of them fails like unshare(2)
CLONE_NAMESPACES = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)  # (CLONE_NEWTIME is not a clone(2) flag: its bit is clone's exit signal there; unshare(2) is denied anyway)
PTRACE_TRACEME = 0


def compile_filter() -> bytes:
    """The filter as a BPF program for `bwrap --seccomp`; raises OSError or ImportError if it cannot be built."""
    import pyseccomp as sc

    f = sc.SyscallFilter(sc.ALLOW)
    if platform.machine() == "x86_64":  # 32-bit and x32 programs get the same rules, not a way around them
        for arch in (sc.Arch.X86, sc.Arch.X32):
            if not f.exist_arch(arch):
                f.add_arch(arch)
    eperm = sc.ERRNO(errno.EPERM)
    for name in DENIED:
        try:
            f.add_rule(eperm, name)
        except (OSError, ValueError, RuntimeError):  # unknown on this architecture or libseccomp
            continue
    f.add_rule(eperm, "ptrace", sc.Arg(0, sc.NE, PTRACE_TRACEME))
    for flag in CLONE_NAMESPACES:
        f.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    # clone3 passes its flags in memory a filter cannot read: ENOSYS makes libc fall back to clone(2)
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    with os.fdopen(os.memfd_create("hermes-seccomp", os.MFD_CLOEXEC), "w+b") as out:
        f.export_bpf(out)
        out.seek(0)
        return out.read()

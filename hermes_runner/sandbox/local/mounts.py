"""The local sandbox's disk cap: a size-limited tmpfs per prompt (root runner), a usage walk for the watchdog, and
removal of a directory that never goes through a mount into the host."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import shutil
import stat
from pathlib import Path

MS_NOSUID, MS_NODEV = 0x2, 0x4
MNT_DETACH = 0x2
BYTES_PER_INODE = 4096  # a tmpfs cap of N bytes holds at most N / 4096 files and dirs (each inode costs memory)

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
_libc.umount2.argtypes = (ctypes.c_char_p, ctypes.c_int)


def mount_tmpfs(path: Path, size: int) -> None:
    """Mount a tmpfs of `size` bytes (nosuid, nodev, mode 0700, root's) on `path`; OSError if the kernel refuses."""
    inodes = max(1024, size // BYTES_PER_INODE)
    opts = f"size={size},nr_inodes={inodes},mode=0700".encode()
    if _libc.mount(b"hermes-sandbox", os.fsencode(path), b"tmpfs", MS_NOSUID | MS_NODEV, opts) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot mount a tmpfs on {path}: {os.strerror(err)}")


def unmount(path: str | Path) -> None:
    """Detach the mount at `path` (lazily: a process still inside cannot hold the removal up)."""
    if _libc.umount2(os.fsencode(path), MNT_DETACH) != 0:
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOENT):  # EINVAL: not a mount point (any more)
            raise OSError(err, f"cannot unmount {path}: {os.strerror(err)}")


def _unescape(field: str) -> str:
    """A mountinfo path: spaces, tabs, newlines and backslashes come as octal escapes."""
    return field.encode().decode("unicode_escape").encode("latin-1").decode(errors="surrogateescape")


def mounts_under(path: str | Path) -> list[str]:
    """Mount points at or below `path` in this mount namespace, deepest first."""
    base = os.path.realpath(path)
    found = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as fp:
        for line in fp:
            point = _unescape(line.split(" ", 5)[4])
            if point == base or point.startswith(base.rstrip("/") + "/"):
                found.append(point)
    return sorted(set(found), key=lambda p: (-p.count("/"), p))


def remove_tree(path: str | Path) -> list[str]:
    """Unmount everything mounted under `path`, then remove it; returns the mounts that would not go (then
    nothing is removed: an rmtree through a mount could delete host files)."""
    for point in mounts_under(path):
        with contextlib.suppress(OSError):
            unmount(point)
    left = mounts_under(path)
    if not left:
        shutil.rmtree(path, ignore_errors=True)
    return left


def usage(path: str | Path, reopen: bool = False) -> int:
    """Bytes the files below `path` take on disk (allocated blocks; a hard-linked file counted once).

    Never follows a symlink or leaves the file system. `reopen` (the files are the runner's own, an
    unprivileged runner): a directory the command made unreadable is opened up again, not skipped.
    """
    total, seen = 0, set()
    root = os.lstat(path)
    stack = [os.fspath(path)]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except PermissionError:
            entries = []
            if reopen:
                with contextlib.suppress(OSError):
                    os.chmod(d, stat.S_IMODE(os.lstat(d).st_mode) | 0o700)
                    entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_dev != root.st_dev:
                continue
            if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                if (st.st_ino, st.st_dev) in seen:
                    continue
                seen.add((st.st_ino, st.st_dev))
            total += st.st_blocks * 512
            if stat.S_ISDIR(st.st_mode):
                stack.append(e.path)
    return total


def copy_out(path: str | Path) -> None:
    """Keep what a tmpfs mounted on `path` holds: copy it to the disk (symlinks as links), unmount, put it there."""
    path = Path(path)
    kept = path.with_name(path.name + ".kept")
    shutil.copytree(path, kept, symlinks=True, ignore_dangling_symlinks=True)
    unmount(path)
    os.rmdir(path)
    kept.rename(path)

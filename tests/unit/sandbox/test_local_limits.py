"""The local sandbox's disk cap helpers (mounts.py), its seccomp filter's compilation, and files passed to a child."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hermes_runner.sandbox.local import mounts
from hermes_runner.sandbox.local.spawn import fd_arg, passed_files, run_io

AS_ROOT = os.geteuid() == 0


def test_usage_counts_allocated_blocks_once_and_never_follows_a_symlink(tmp_path):
    outside = tmp_path / "outside"
    outside.write_bytes(b"o" * (4 << 20))
    d = tmp_path / "d"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "a").write_bytes(b"a" * (1 << 20))
    os.link(d / "sub" / "a", d / "hardlink")
    (d / "link").symlink_to(outside)
    (d / "sparse").touch()
    os.truncate(d / "sparse", 1 << 30)  # 1 GiB that takes no block
    used = mounts.usage(d)
    assert 1 << 20 <= used < (1 << 20) + 64 * 1024, used


@pytest.mark.skipif(not AS_ROOT, reason="mounts need root")
def test_remove_tree_unmounts_first_and_never_deletes_through_a_mount(tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    (host / "precious").write_text("keep")
    tree = tmp_path / "a tree\twith odd\\names"
    (tree / "work" / "bound").mkdir(parents=True)
    mounts.mount_tmpfs(tree, 1 << 20)
    (tree / "inner").mkdir()
    subprocess.run(["mount", "--bind", str(host), str(tree / "inner")], check=True)
    try:
        assert mounts.mounts_under(tmp_path) == [str(tree / "inner"), str(tree)]  # deepest first, unescaped
        assert mounts.remove_tree(tree) == []
        assert not tree.exists() and (host / "precious").read_text() == "keep"
        assert mounts.mounts_under(tmp_path) == []
    finally:
        for m in mounts.mounts_under(tmp_path):
            mounts.unmount(m)


@pytest.mark.skipif(not AS_ROOT, reason="mounts need root")
def test_tmpfs_has_the_size_asked_for(tmp_path):
    mounts.mount_tmpfs(tmp_path, 8 << 20)
    try:
        st = os.statvfs(tmp_path)
        assert st.f_blocks * st.f_frsize == 8 << 20
        assert st.f_files == max(1024, (8 << 20) // mounts.BYTES_PER_INODE)
        with pytest.raises(OSError, match="No space left"), open(tmp_path / "f", "wb") as fp:
            fp.write(b"x" * (9 << 20))
    finally:
        mounts.unmount(tmp_path)
    assert not os.path.ismount(tmp_path)


def test_seccomp_filter_compiles_to_bpf():
    from hermes_runner.sandbox.local.seccomp import compile_filter

    bpf = compile_filter()
    assert bpf and len(bpf) % 8 == 0  # struct sock_filter: 8 bytes an instruction


def test_passed_files_give_each_child_the_whole_content(tmp_path):
    data = b"filter bytes " * 1000
    read = "import os, sys; sys.stdout.buffer.write(os.read(int(sys.argv[1]), 1 << 20))"
    argv = [sys.executable, "-c", read, fd_arg(0)]
    for _ in range(2):  # a fresh fd per child: the first one's read does not empty the second's
        code, out, err, _ = run_io(argv, env=dict(os.environ), cwd=None, stdin=None, max_out=1 << 20, timeout=10,
                                   files=(data,))  # fmt: skip
        assert code == 0 and out == data, err
    with passed_files(["x", fd_arg(0), "y"], (b"a",)) as (args, fds):
        assert args[1] == str(fds[0]) and args[::2] == ["x", "y"]

"""Pure rules of the Docker sandbox (no engine needed): user choice, output capping, the probe's end check."""

from __future__ import annotations

import os

import pytest

from hermes_runner.errors import SandboxError
from hermes_runner.sandbox.base import OutputCap
from hermes_runner.sandbox.docker_images import DirInfo, Probe, choose_user, parse_passwd, probe

PASSWD = parse_passwd(
    "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n"
    "app:x:1000:1001::/home/app:/bin/sh\nbroken line\nsecond:x:1001:1001::/:/bin/sh\n"
)
EMPTY = DirInfo(False)
REPO_ROOT = DirInfo(True, populated=True, uid=0, gid=0)
REPO_USER = DirInfo(True, populated=True, uid=1234, gid=1235)


@pytest.mark.parametrize(
    ("setting", "image_user", "workdir", "passwd", "expected"),
    [
        ("auto", "", EMPTY, PASSWD, ("1000:1001", 1000, 1001)),  # first regular user, not nobody
        ("auto", "", EMPTY, PASSWD[:2], ("65534:65534", 65534, 65534)),  # no regular user: nobody, never root
        ("auto", "app", EMPTY, PASSWD, ("app", 1000, 1001)),  # the image's USER wins
        ("auto", "", REPO_ROOT, PASSWD, ("0:0", 0, 0)),  # the task's files belong to root
        ("auto", "", REPO_USER, PASSWD, ("1234:1235", 1234, 1235)),  # ... or to their owner
        (None, "", EMPTY, PASSWD, (None, 0, 0)),  # the image's default (root)
        (None, "second", EMPTY, PASSWD, ("second", 1001, 1001)),
        ("2000:3000", "", EMPTY, PASSWD, ("2000:3000", 2000, 3000)),
        ("app:staff", "", EMPTY, PASSWD, ("app:staff", 1000, None)),  # group name: gid unknown
        ("ghost", "", EMPTY, PASSWD, ("ghost", None, None)),
    ],
)
def test_choose_user(setting, image_user, workdir, passwd, expected):
    assert choose_user(setting, image_user, Probe(passwd, workdir)) == expected


def test_output_cap_keeps_head_and_tail():
    cap = OutputCap(100)
    for _ in range(1000):
        cap.feed(b"0123456789")
    text = cap.text()
    assert text.startswith("0123456789" * 4) and text.endswith("0123456789" * 6)
    assert "[9900 bytes truncated]" in text
    small = OutputCap(100)
    small.feed(b"a" * 60)
    small.feed(b"b" * 40)
    assert small.text() == "a" * 60 + "b" * 40


class _CutLogEngine:
    """`client.containers.run` of an engine whose log of a just-exited container loses its last line the
    first `cut` times (rootless Podman races its log against the container's end): the probe's script
    runs for real in /bin/sh, on a directory of this host."""

    def __init__(self, cut: int):
        self.cut, self.runs = cut, 0
        self.containers = self

    def run(self, image, entrypoint, command, **_):
        import subprocess

        self.runs += 1
        out = subprocess.run([*entrypoint, *command], capture_output=True, check=True).stdout
        return out.rsplit(b"\n", 2)[0] + b"\n" if self.runs <= self.cut else out


def test_a_probe_whose_output_comes_back_cut_short_runs_again(tmp_path):
    (tmp_path / "README").write_text("x")
    engine = _CutLogEngine(cut=2)
    found = probe(engine, "img", str(tmp_path), {})
    assert engine.runs == 3 and found.workdir == DirInfo(True, True, os.getuid(), os.getgid())
    assert any(uid == 0 for _, uid, _ in found.passwd)
    with pytest.raises(SandboxError, match="incomplete 5 times"):
        probe(_CutLogEngine(cut=99), "img", str(tmp_path), {})

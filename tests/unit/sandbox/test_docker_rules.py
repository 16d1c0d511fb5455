"""Pure rules of the Docker sandbox (no engine needed): user choice, output capping, the probe's end check."""

from __future__ import annotations

import os

import pytest

from hermes_runner.errors import SandboxError
from hermes_runner.sandbox.base import OutputCap
from hermes_runner.sandbox.docker.images import DirInfo, Probe, choose_user, parse_passwd, probe

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
    """The containers API of an engine whose log of a just-exited container loses its last line the first
    `cut` times (rootless Podman races its log against the container's end), and whose first `stuck` runs
    never end: the probe's script runs for real in /bin/sh, on a directory of this host."""

    def __init__(self, cut: int, stuck: int = 0):
        self.cut, self.stuck, self.runs, self.removed = cut, stuck, 0, 0
        self.containers = self

    def create(self, image, entrypoint, command, **_):
        return _Trial(self, [*entrypoint, *command])


class _Trial:
    def __init__(self, engine: _CutLogEngine, argv: list[str]):
        self.engine, self.argv, self.out = engine, argv, b""

    def start(self):
        import subprocess

        self.engine.runs += 1
        self.out = subprocess.run(self.argv, capture_output=True, check=True).stdout

    def wait(self, timeout):
        from requests.exceptions import ReadTimeout

        if self.engine.runs <= self.engine.stuck:
            raise ReadTimeout(f"read timed out ({timeout} s)")
        return {"StatusCode": 0}

    def logs(self, stdout, stderr):
        cut = self.engine.runs <= self.engine.stuck + self.engine.cut
        return self.out.rsplit(b"\n", 2)[0] + b"\n" if cut else self.out

    def remove(self, v, force):
        self.engine.removed += 1


def test_a_probe_whose_output_comes_back_cut_short_runs_again(tmp_path):
    (tmp_path / "README").write_text("x")
    engine = _CutLogEngine(cut=2)
    found = probe(engine, "img", str(tmp_path), {})
    assert engine.runs == 3 and found.workdir == DirInfo(True, True, os.getuid(), os.getgid())
    assert engine.removed == 3  # every trial container, also the ones whose output was cut
    assert any(uid == 0 for _, uid, _ in found.passwd)
    with pytest.raises(SandboxError, match="incomplete 5 times"):
        probe(_CutLogEngine(cut=99), "img", str(tmp_path), {})


def test_a_probe_that_does_not_end_is_removed_and_runs_again(tmp_path):
    """A trial run whose wait times out (an engine that never reports its end) does not hang the start."""
    engine = _CutLogEngine(cut=0, stuck=2)
    found = probe(engine, "img", str(tmp_path), {})
    assert engine.runs == 3 and engine.removed == 3 and found.workdir.exists

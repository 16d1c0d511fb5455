"""The terminal and file tools in the local sandbox (real processes, real bubblewrap when installed)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import psutil
import pytest

from hermes_runner.config import SandboxConfig
from hermes_runner.dataset import Prompt
from hermes_runner.sandbox.local.backend import LocalBackend
from hermes_runner.tools.base import ToolContext
from hermes_runner.tools.catalog import all_tools, tool_names, tools_for

from tests.helpers.wait import wait_for


class Box:
    """A local sandbox for one test, driven synchronously."""

    def __init__(self, root: Path, **options):
        cfg = SandboxConfig()
        cfg.local.root = str(root)
        for k, v in options.items():
            setattr(cfg.local if hasattr(cfg.local, k) else cfg, k, v)
        self.loop = asyncio.new_event_loop()
        self.backend = LocalBackend(cfg, "test")
        self.loop.run_until_complete(self.backend.start(set()))
        self.sandbox = self.loop.run_until_complete(self.backend.create(Prompt(0, "k-0", "p")))
        self.ctx = ToolContext(self.sandbox, command_timeout_s=20, max_output_chars=cfg.max_output_chars)

    def __call__(self, name: str, **args) -> tuple[dict, bool]:
        from hermes_runner.errors import ToolError

        try:
            res = self.loop.run_until_complete(all_tools()[name].run(self.ctx, args))
        except ToolError as exc:
            return {"error": str(exc)}, False
        return json.loads(res.content), res.ok

    def close(self) -> None:
        self.loop.run_until_complete(self.sandbox.close())
        self.loop.run_until_complete(self.backend.shutdown())
        self.loop.close()


@pytest.fixture
def box(tmp_path):
    b = Box(tmp_path / "sbx")
    yield b
    b.close()


def test_registry_is_the_single_list_of_tools():
    names = tool_names()
    assert names == sorted(set(names)) and {"terminal", "read_file", "write_file", "patch", "search_files"} <= set(
        names
    )
    assert {t.name for ts in ("terminal", "file") for t in tools_for([ts])} == {
        "terminal",
        "read_file",
        "write_file",
        "patch",
        "search_files",
    }
    assert [t.name for t in tools_for(["terminal"])] == ["terminal"]
    for t in all_tools().values():
        assert t.openai_schema()["function"]["parameters"]["type"] == "object"


def test_terminal_reports_output_and_exit_code(box):
    out, ok = box("terminal", command="echo out; echo err >&2; exit 3")
    assert ok and out["exit_code"] == 3 and "out" in out["output"] and "err" in out["output"] and out["error"] is None


def test_terminal_timeout_kills_the_whole_process_group(box):
    marker = f"hrsleep{os.getpid()}{time.time_ns() % 100000}"
    t0 = time.monotonic()
    out, ok = box("terminal", command=f"sh -c 'exec -a {marker} sleep 60' & sleep 60", timeout=1)
    assert not ok and out["exit_code"] == 124 and "timed out" in out["error"]
    assert time.monotonic() - t0 < 10

    def running() -> list[int]:
        return [p.pid for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]

    wait_for(lambda: not running(), 10, "the timed-out group to be gone", state=running)


def test_terminal_output_is_truncated_head_and_tail(tmp_path):
    b = Box(tmp_path / "sbx", max_output_chars=1000)
    try:
        out, _ = b("terminal", command="echo START; seq 1 100000; echo END")
        assert out["output"].startswith("START") and out["output"].rstrip().endswith("END")
        assert "truncated" in out["output"] and len(out["output"]) < 1200
    finally:
        b.close()


def test_each_task_gets_a_fresh_directory_removed_afterwards(tmp_path):
    a, b = Box(tmp_path / "sbx"), Box(tmp_path / "sbx")
    a("write_file", path="mine.txt", content="x")
    out, _ = b("terminal", command="ls")
    assert "mine.txt" not in out["output"] and a.sandbox.cwd != b.sandbox.cwd
    cwd = Path(a.sandbox.cwd)
    a.close()
    b.close()
    assert not cwd.exists()
    kept = Box(tmp_path / "sbx2", keep=True)
    kept.close()
    assert Path(kept.sandbox.cwd).exists()


def test_sandbox_env_carries_no_secrets(box, monkeypatch):
    os.environ["OPENAI_API_KEY"] = "sk-should-not-leak"
    try:
        out, _ = box("terminal", command="env")
    finally:
        del os.environ["OPENAI_API_KEY"]
    assert "sk-should-not-leak" not in out["output"] and "HOME=" in out["output"]


@pytest.mark.bwrap
def test_bubblewrap_confines_commands(box):
    out, _ = box("terminal", command="touch /etc/hr-test 2>&1; echo ok > here.txt; cat here.txt")
    assert "Read-only file system" in out["output"]
    assert "ok" in out["output"] and not Path("/etc/hr-test").exists()
    out, _ = box("terminal", command="tail -n +3 /proc/net/dev | cut -d: -f1")
    assert out["output"].split() == ["lo"]  # no network but loopback
    out, _ = box("terminal", command="echo t > /tmp/x && cat /tmp/x")
    assert out["output"].strip() == "t"
    assert box("read_file", path="/tmp/x")[0]["content"] == "1|t"  # /tmp is the task's own


def test_file_writes_are_confined_to_the_task(box):
    out, ok = box("write_file", path="/etc/hr-not-allowed", content="x")
    assert not ok and "confined" in out["error"]


def test_read_write_with_line_numbers_and_paging(box):
    out, ok = box("write_file", path="sub/dir/f.txt", content="\n".join(f"line{i}" for i in range(1, 11)))
    assert ok and out["bytes_written"] > 0
    out, ok = box("read_file", path="sub/dir/f.txt", offset=3, limit=2)
    assert ok and out["content"] == "3|line3\n4|line4" and out["total_lines"] == 10 and out["truncated"]
    out, ok = box("read_file", path="missing.txt")
    assert not ok and "not found" in out["error"]


def test_patch_replace_mode(box):
    box("write_file", path="a.py", content="x = 1\ny = 2\nx = 1\n")
    out, ok = box("patch", mode="replace", path="a.py", old_string="x = 1", new_string="x = 3")
    assert not ok and "2 times" in out["error"]
    out, ok = box("patch", mode="replace", path="a.py", old_string="y = 2", new_string="y = 5")
    assert ok and "-y = 2" in out["diff"] and "+y = 5" in out["diff"]
    out, ok = box("patch", mode="replace", path="a.py", old_string="x = 1", new_string="x = 9", replace_all=True)
    assert ok and box("read_file", path="a.py")[0]["content"] == "1|x = 9\n2|y = 5\n3|x = 9"
    out, ok = box("patch", mode="replace", path="a.py", old_string="nope", new_string="z")
    assert not ok and "not found" in out["error"]


def test_patch_v4a_mode(box):
    box("write_file", path="m.py", content="def f():\n    return 1\n\nprint(f())\n")
    patch = "\n".join([
        "*** Begin Patch",
        "*** Update File: m.py",
        "@@ def f():",
        "-    return 1",
        "+    return 2",
        "*** Add File: new.txt",
        "+hello",
        "+world",
        "*** End Patch",
    ])  # fmt: skip
    out, ok = box("patch", mode="patch", patch=patch)
    assert ok, out
    assert box("read_file", path="m.py")[0]["content"].splitlines()[1] == "2|    return 2"
    assert box("read_file", path="new.txt")[0]["content"] == "1|hello\n2|world"
    out, ok = box("patch", mode="patch", patch="*** Begin Patch\n*** Delete File: new.txt\n*** End Patch")
    assert ok and not box("read_file", path="new.txt")[1]
    out, ok = box("patch", mode="patch", patch="no header")
    assert not ok and "Begin Patch" in out["error"]


def test_search_files(box):
    box("write_file", path="src/a.py", content="import os\nTODO: one\n")
    box("write_file", path="src/b.txt", content="TODO: two\nTODO: three\n")
    out, ok = box("search_files", pattern="TODO")
    assert ok and out["total"] == 3 and any(m.endswith("a.py:2:TODO: one") for m in out["matches"])
    out, _ = box("search_files", pattern="TODO", file_glob="*.py")
    assert out["total"] == 1
    out, _ = box("search_files", pattern="TODO", output_mode="count")
    assert sorted(m.rsplit(":", 1)[1] for m in out["matches"]) == ["1", "2"]
    out, _ = box("search_files", pattern="*.txt", target="files")
    assert out["matches"] == ["./src/b.txt"]
    out, _ = box("search_files", pattern="TODO", limit=1, offset=1)
    assert len(out["matches"]) == 1 and out["truncated"]


def test_number_arg_converts_or_names_the_argument():
    from hermes_runner.errors import ToolError
    from hermes_runner.tools.base import number_arg, params

    assert number_arg("limit", "7", int) == 7 and number_arg("timeout", "2.5") == 2.5
    with pytest.raises(ToolError, match=r"'limit' must be an integer, not 'x'"):
        number_arg("limit", "x", int)
    with pytest.raises(ToolError, match=r"'timeout' must be a number, not None"):
        number_arg("timeout", None)
    assert params("a", a={"type": "string"}, b={"type": "integer"}) == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "required": ["a"],
    }

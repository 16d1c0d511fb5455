"""Checks shared by the container backends' tests (Docker, Podman): two prompts' sandboxes, a command tree
that outlives its timeout."""

from __future__ import annotations

import json
import time

import pytest

from hermes_runner.dataset import Prompt
from hermes_runner.errors import ToolError
from hermes_runner.tools.base import ToolContext
from hermes_runner.tools.catalog import all_tools


async def two_prompts(backend, image: str, commands: list[str], tools=()) -> tuple[list, list]:
    """Start `backend`, run `commands` in prompt a's sandbox and each tool `(who, name, args)` in a's or b's;
    ([command results], [(tool output as JSON, ok)]); everything is closed after."""
    assert await backend.start({image}) == {}
    a = await backend.create(Prompt(0, "a", "p"))
    b = await backend.create(Prompt(1, "b", "p"))
    try:
        out = [await a.run(c, 30) for c in commands]
        contexts = {"a": ToolContext(a, command_timeout_s=20), "b": ToolContext(b, command_timeout_s=20)}
        results = []
        for who, name, args in tools:
            try:
                res = await all_tools()[name].run(contexts[who], args)
                results.append((json.loads(res.content), res.ok))
            except ToolError as exc:
                results.append(({"error": str(exc)}, False))
        return out, results
    finally:
        await a.close()
        await b.close()
        await backend.shutdown()


async def timed_out_tree(backend, image: str) -> tuple:
    """A command that leaves a child and a grandchild sleeping, run with a 1 s timeout; then what is left, and a
    missing workdir. (result, seconds it took, `ps` after)."""
    await backend.start({image})
    sb = await backend.create(Prompt(0, "k", "p"))
    try:
        t = time.monotonic()
        res = await sb.run("echo begin; sleep 300 & sh -c 'sleep 301'; echo never", 1)
        took = time.monotonic() - t
        after = await sb.run("ps -o comm,args | grep 'sleep 30' | grep -v grep; echo end", 10)
        with pytest.raises(ToolError, match="workdir does not exist"):
            await sb.run("true", 5, workdir="/nope")
        return res, took, after
    finally:
        await sb.close()
        await backend.shutdown()


def check_timed_out_tree(res, took: float, after) -> None:
    assert res.timed_out and res.exit_code == 124 and res.output == "begin\n"
    assert took < 10, took  # 1 s, the kill, and a loaded machine
    assert after.output == "end\n"  # both sleeps (child and grandchild) are gone

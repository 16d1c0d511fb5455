"""Checks shared by the container backends' tests (Docker, Podman): two prompts' sandboxes, a command tree
that outlives its timeout, process floods sampled from the host."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from dataclasses import dataclass

import pytest

from hermes_runner.dataset import Prompt
from hermes_runner.errors import ToolError
from hermes_runner.sandbox.docker import procs as docker_procs
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


# -- floods: a prompt's processes stay bounded, and none outlives it ------------------------------

FORK_BOMB = "b() { b | b & }; b; sleep 30"
FLOOD = "for i in $(seq 2000); do sleep 30 & done 2>/dev/null; echo started; wait"


def host_processes() -> int:
    """How many processes this host has (every pid namespace)."""
    return sum(1 for d in os.listdir("/proc") if d.isdigit())


def _uid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fp:
            for line in fp:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


@dataclass
class Flood:
    """What a flood did: the host's and the container's process counts, sampled every 0.2 s."""

    result: object  # the command's ExecResult
    baseline: int  # the host's processes before the command
    host_max: int
    container_max: int  # of the container's processes, those not of an `ignore_uids` uid
    uids: set[int]  # the host uids the container's processes ran as
    after: int  # the host's processes once the prompt ended and its processes were gone
    left: set[int]  # the container's processes still there 60 s after its prompt ended (killed then)
    runaway: bool  # the container's processes passed `runaway` and the test killed them


class _Sampler(threading.Thread):
    """Counts the host's and the container's processes every 0.2 s; kills the container's processes (from the
    host) if they pass `runaway`, so a limit that does not hold fails the test and spares the machine."""

    def __init__(self, cid: str, init: int | None, runaway: int, ignore_uids: frozenset[int]):
        super().__init__(daemon=True)
        self.cid, self.init, self.runaway, self.ignore_uids = cid, init, runaway, ignore_uids
        self.host_max = self.container_max = 0
        self.uids: set[int] = set()
        self.killed = False
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.2):
            self.sample()

    def sample(self) -> None:
        self.host_max = max(self.host_max, host_processes())
        pids = docker_procs.container_pids(self.cid, self.init)
        uids = {pid: _uid(pid) for pid in pids}
        self.container_max = max(self.container_max, sum(uid not in self.ignore_uids for uid in uids.values()))
        self.uids.update(uid for uid in uids.values() if uid is not None)
        if len(pids) > self.runaway and not self.killed:
            self.killed = True
            docker_procs.kill(self.cid, self.init)


async def flood(
    backend, image: str, command: str, *, timeout: float, runaway: int, ignore_uids: frozenset[int] = frozenset()
) -> Flood:
    """Run `command` as a prompt of `backend` with the host's and the container's processes sampled; the
    prompt's sandbox is closed after; returns once the container's processes are gone (at most 60 s).
    `ignore_uids`: uids whose processes `container_max` leaves out (rootless Podman's service user, whose runc
    starts each exec inside the container before it becomes the command's process)."""
    await backend.start({image})
    sb = await backend.create(Prompt(0, "flood", "p"))
    sampler: _Sampler | None = None
    try:
        init = docker_procs.init_pid(backend.api, sb.id)
        baseline = host_processes()
        sampler = _Sampler(sb.id, init, runaway, ignore_uids)
        sampler.start()
        res = await sb.run(command, timeout)
        sampler.sample()
    finally:
        try:
            await sb.close()
        finally:
            if sampler is not None:
                sampler.halt.set()
                sampler.join()
            await backend.shutdown()
            cid = sb.id
            end = time.monotonic() + 60
            while (left := docker_procs.container_pids(cid, init)) and time.monotonic() < end:
                await asyncio.sleep(0.2)
            docker_procs.kill(cid, init)  # (a no-op unless the prompt left processes: asserted by the caller)
    return Flood(
        res, baseline, sampler.host_max, sampler.container_max, sampler.uids, host_processes(), left, sampler.killed
    )


def record(backend: str, command: str, f: Flood) -> None:
    """One line per flood in $HERMES_FLOOD_LOG (if set): the figures a report quotes."""
    path = os.environ.get("HERMES_FLOOD_LOG")
    if path:
        with open(path, "a") as fp:
            fp.write(
                f"{backend} {command[:20]!r}: host baseline {f.baseline}, host max {f.host_max} "
                f"(+{f.host_max - f.baseline}), container max {f.container_max}, after {f.after}, "
                f"left {len(f.left)}, runaway {f.runaway}, exit {getattr(f.result, 'exit_code', None)}\n"
            )


def uid_processes(uids: set[int]) -> list[int]:
    """The host's processes running as one of `uids`."""
    return [int(d) for d in os.listdir("/proc") if d.isdigit() and _uid(int(d)) in uids]

"""Per tool call cost of the Docker sandbox against bare `docker exec`, same containers, same run.

    python -m bench.docker_calls [--levels 16,64] [--seconds 4] [--reps 3] [--image local/busybox:ci]

N containers are started by DockerBackend (N = each level). Then N loops, one per container, make
calls back to back for `--seconds`, in each of these modes, interleaved and repeated `--reps` times:

- `bare`:  the `docker exec CONTAINER sh -c 'echo hi'` CLI (and `docker exec CONTAINER cat FILE`);
- `exec`:  the sandbox's terminal command / file read with `sandbox.docker.exec_mode=exec` (a
  `docker exec` per call through the engine API: exec create, start, inspect);
- `shell`: the same with `exec_mode=shell` (the default: one long-lived shell per container).

Two calls: the terminal command `echo hi` and the file read of a small file. For each it prints
tool calls per second, p50/p95 latency per call, host CPU per call (all processes, /proc/stat)
and the ratio to bare `docker exec` (medians over the repetitions), then the target line: the
overhead per tool call at 64 in flight within 1.2x of bare `docker exec` (p50 and p95).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from dataclasses import dataclass, field

from bench.common import busy_seconds
from hermes_runner.config import DockerExecMode, DockerSandboxOptions, SandboxConfig
from hermes_runner.dataset import Prompt
from hermes_runner.sandbox.docker.backend import DockerBackend, DockerSandbox

MODES = ("bare", "exec", "shell")
OPS = ("echo hi", "read file")
TARGET = 1.2
FILE = "/workspace/small.txt"
CONTENT = b"line one\nline two\n" * 20  # 360 bytes


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


@dataclass
class Sample:
    """One mode's figures of one repetition."""

    rate: float  # calls per second, all loops together
    p50: float  # seconds per call
    p95: float
    cpu: float  # host CPU-seconds per call


@dataclass
class Table:
    rows: dict[tuple[int, str, str], list[Sample]] = field(default_factory=dict)

    def add(self, level: int, op: str, mode: str, s: Sample) -> None:
        self.rows.setdefault((level, op, mode), []).append(s)

    def median(self, level: int, op: str, mode: str) -> Sample:
        xs = self.rows[(level, op, mode)]
        return Sample(*(statistics.median(getattr(x, f) for x in xs) for f in ("rate", "p50", "p95", "cpu")))


async def bare(cid: str, op: str) -> None:
    argv = ["sh", "-c", "echo hi"] if op == "echo hi" else ["cat", FILE]
    proc = await asyncio.create_subprocess_exec(
        "docker", "exec", cid, *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0 and out, out


async def ours(sb: DockerSandbox, op: str) -> None:
    if op == "echo hi":
        res = await sb.run("echo hi", 30)
        assert res.exit_code == 0 and res.output == "hi\n", res
    else:
        assert await sb.read_file(FILE) == CONTENT


async def loops(calls: list, seconds: float) -> Sample:
    """Each of `calls` (one per container) called back to back until the time is up."""
    lat: list[float] = []
    deadline = time.perf_counter() + seconds

    async def loop(call) -> None:
        while time.perf_counter() < deadline:
            t = time.perf_counter()
            await call()
            lat.append(time.perf_counter() - t)

    cpu, t0 = busy_seconds(), time.perf_counter()
    await asyncio.gather(*(loop(c) for c in calls))
    wall, cpu = time.perf_counter() - t0, busy_seconds() - cpu
    return Sample(len(lat) / wall, pct(lat, 0.5), pct(lat, 0.95), cpu / len(lat))


async def backend(mode: DockerExecMode, image: str, run_dir: str) -> DockerBackend:
    cfg = SandboxConfig(backend="docker", image=image, docker=DockerSandboxOptions(pool_size=0, exec_mode=mode))
    b = DockerBackend(cfg, f"bench-{mode}", run_dir)
    unavailable = await b.start({image})
    if unavailable:
        raise SystemExit(f"image unavailable: {unavailable}")
    return b


async def level(n: int, image: str, seconds: float, reps: int, table: Table) -> None:
    with tempfile.TemporaryDirectory() as run_dir:
        shell_b = await backend(DockerExecMode.shell, image, run_dir)
        exec_b = await backend(DockerExecMode.exec, image, run_dir)
        try:
            boxes = list(await asyncio.gather(*(shell_b.create(Prompt(i, f"b{i}", "x")) for i in range(n))))
            views = {
                "shell": boxes,
                "exec": [DockerSandbox(exec_b, sb.id, sb.cwd) for sb in boxes],  # the same containers
            }
            await asyncio.gather(*(sb.write_file(FILE, CONTENT) for sb in boxes))
            await asyncio.gather(*(ours(sb, op) for sb in boxes for op in OPS))  # warm-up: each shell is up
            for rep in range(reps):
                for op in OPS:
                    for mode in MODES:
                        if mode == "bare":
                            calls = [lambda cid=sb.id, op=op: bare(cid, op) for sb in boxes]
                        else:
                            calls = [lambda sb=sb, op=op: ours(sb, op) for sb in views[mode]]
                        s = await loops(calls, seconds)
                        table.add(n, op, mode, s)
                        print(
                            f"  [{n} in flight, rep {rep + 1}/{reps}] {op:<9} {mode:<5} {s.rate:7.1f} calls/s "
                            f"p50 {s.p50 * 1e3:7.1f} ms  p95 {s.p95 * 1e3:7.1f} ms",
                            flush=True,
                        )
        finally:
            await asyncio.gather(*(sb.close() for sb in boxes), return_exceptions=True)
            await exec_b.shutdown()
            await shell_b.shutdown()


def report(table: Table, levels: list[int]) -> None:
    print(
        f"\n{'in flight':>9} {'call':<9} {'mode':<5} {'calls/s':>8} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'CPU ms/call':>11} {'p50 x bare':>10} {'p95 x bare':>10}"
    )
    for n in levels:
        for op in OPS:
            b = table.median(n, op, "bare")
            for mode in MODES:
                s = table.median(n, op, mode)
                print(
                    f"{n:>9} {op:<9} {mode:<5} {s.rate:>8.1f} {s.p50 * 1e3:>8.1f} {s.p95 * 1e3:>8.1f} "
                    f"{s.cpu * 1e3:>11.1f} {s.p50 / b.p50:>10.2f} {s.p95 / b.p95:>10.2f}"
                )
    top = max(levels)
    for op in OPS:
        b, s = table.median(top, op, "bare"), table.median(top, op, "shell")
        r50, r95 = s.p50 / b.p50, s.p95 / b.p95
        met = "met" if max(r50, r95) <= TARGET else "not met"
        print(
            f"target {TARGET}x: overhead per tool call ({op}) at {top} in flight within {TARGET}x of bare "
            f"docker exec: p50 {r50:.2f}x, p95 {r95:.2f}x: {met}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", default="local/busybox:ci")
    ap.add_argument("--levels", default="16,64", help="comma-separated numbers of sandboxes in flight")
    ap.add_argument("--seconds", type=float, default=4.0, help="duration of each measurement")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (interleaved modes; medians reported)")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    print(f"image {args.image}; modes interleaved, {args.reps} repetitions of {args.seconds:g} s each")
    table = Table()
    for n in levels:
        asyncio.run(level(n, args.image, args.seconds, args.reps, table))
    report(table, levels)


if __name__ == "__main__":
    main()

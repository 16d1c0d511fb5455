"""Per-prompt cost of the Docker sandbox against a bare `docker run --rm IMAGE true`, same run.

    python -m bench.docker_overhead [--image local/busybox:ci] [--n 30] [--pool 0,2]

For each prompt: create the container (resolution of the image is cached, as in a run), run a
first command, remove it; timed end to end through DockerBackend. Also measured:
prompts run back to back with `num_workers` in flight (throughput). Prints p50/p95 and ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import tempfile
import time

from hermes_runner.config import DockerSandboxOptions, SandboxConfig
from hermes_runner.dataset import Prompt
from hermes_runner.sandbox.docker.backend import DockerBackend


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def bare_run(image: str) -> float:
    t = time.perf_counter()
    subprocess.run(["docker", "run", "--rm", image, "true"], check=True, capture_output=True)
    return time.perf_counter() - t


async def one_prompt(backend: DockerBackend, i: int, image: str) -> float:
    t = time.perf_counter()
    sb = await backend.create(Prompt(i, f"bench{i}", "x", image=image))
    res = await sb.run("true", 30)
    await sb.close()
    assert res.exit_code == 0, res
    return time.perf_counter() - t


async def measure(image: str, n: int, pool: int, workers: int) -> tuple[list[float], list[float], float]:
    cfg = SandboxConfig(backend="docker", image=image, docker=DockerSandboxOptions(pool_size=pool))
    with tempfile.TemporaryDirectory() as run_dir:
        backend = DockerBackend(cfg, "bench", run_dir)
        unavailable = await backend.start({image})
        if unavailable:
            raise SystemExit(f"image unavailable: {unavailable}")
        await one_prompt(backend, -1, image)  # warm-up (first exec of the image)
        ours, bare = [], []
        for i in range(n):
            if pool:
                await asyncio.sleep(0.5)  # a prompt's model turns give the pool time to refill
            ours.append(await one_prompt(backend, i, image))
            bare.append(await asyncio.to_thread(bare_run, image))
        sem = asyncio.Semaphore(workers)

        async def limited(i: int) -> float:
            async with sem:
                return await one_prompt(backend, 1000 + i, image)

        t = time.perf_counter()
        await asyncio.gather(*(limited(i) for i in range(n)))
        rate = n / (time.perf_counter() - t)
        await backend.shutdown()
    return ours, bare, rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", default="local/busybox:ci")
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--pool", default="0", help="comma-separated pool sizes to compare")
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args()
    print(f"image {args.image}, {args.n} prompts per setting, {args.workers} in flight for throughput")
    print(
        f"{'pool':>4} {'ours p50':>9} {'ours p95':>9} {'bare p50':>9} {'bare p95':>9} {'p50 ratio':>9} {'p95 ratio':>9} {'prompts/s':>9}"
    )
    for pool in (int(x) for x in args.pool.split(",")):
        ours, bare, rate = asyncio.run(measure(args.image, args.n, pool, args.workers))
        o50, o95, b50, b95 = pct(ours, 0.5), pct(ours, 0.95), pct(bare, 0.5), pct(bare, 0.95)
        print(
            f"{pool:>4} {o50:>8.3f}s {o95:>8.3f}s {b50:>8.3f}s {b95:>8.3f}s {o50 / b50:>9.2f} {o95 / b95:>9.2f} {rate:>9.1f}"
        )
        print(f"     mean ours {statistics.mean(ours):.3f}s, bare {statistics.mean(bare):.3f}s")


if __name__ == "__main__":
    main()

"""Worker-process benchmark: one runner process against `executor.processes=N`, in one invocation.

    python -m bench.processes            # 64 and 256 sessions, processes=1 vs N (about five minutes)
    python -m bench.processes --quick    # smaller runs (about two minutes)

The setting of bench.throughput (its scripted server in its own process, L = 200 ms per call, the default
2-call agent with one `terminal` call in the local sandbox, bubblewrap isolation, `run.py` as a user runs
it), at each level once with processes=1 and once with processes=N (default: the core count). It prints
each run's wall time against the latency ideal (N prompts x 2 calls x L / sessions), the throughput ratio
of N processes over one, the runner's CPU per trajectory, and the targets of issue 23 point 4.

CPU: with processes=1 `runner ms` is the runner's own CPU (the sandbox commands apart); with N processes it
is the runner plus its workers (they are its children, so their sandbox commands are in `sandbox ms` only
when processes=1; with N they count with the workers). Other processes share the cores: the ratios of one
invocation are what compare; repeat (`--repeat`) when the machine is noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from bench.common import ScriptedServerProcess
from bench.throughput import K_CALLS, LevelResult, run_level, verdict

TARGET_SPEEDUP_256 = 1.5  # N processes over one at 256 sessions
TARGET_CPU_MS_64 = 6.0  # runner CPU per 2-call trajectory at 64 sessions, bubblewrap


def run_pair(server, work: Path, c: int, n: int, procs: int, isolation: str) -> tuple[LevelResult, LevelResult]:
    one = run_level(server, work, c, n, False, isolation, ["executor.processes=1"], "-p1")
    many = run_level(server, work, c, n, False, isolation, [f"executor.processes={procs}"], f"-p{procs}")
    return one, many


def per_trajectory_s(one: LevelResult) -> float:
    """Machine CPU a trajectory took in the processes=1 run: the runner, its sandbox commands, the scripted
    server, and what other processes used meanwhile (mostly the kernel's work of making and tearing down
    each command's namespaces, which runs in kernel threads, not in the runner)."""
    return (one.cpu_ms + one.children_ms + one.server_ms) / 1000 + one.others_cpu_s / one.n


def ceiling_line(c: int, one: LevelResult) -> str:
    """How busy processes=1 kept the cores, and so the most N processes could give over it on this machine:
    every core busy at the same cost per trajectory (cores / cores kept busy)."""
    cores = os.cpu_count() or 1
    used = per_trajectory_s(one) * one.n / one.wall_s
    return (
        f"ceiling at {c} sessions: processes=1 kept {used:.2f} of {cores} cores busy (ms/traj: runner {one.cpu_ms:.2f}, "
        f"sandbox {one.children_ms:.2f}, server {one.server_ms:.2f}, other processes {1000 * one.others_cpu_s / one.n:.2f}), "
        f"so no N can exceed {cores / used if used > 0 else float('inf'):.2f}x its throughput here (less the workers' relay)"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="~5 s of ideal time per run instead of ~15 s")
    ap.add_argument("--levels", default="64,256", help="sessions in flight")
    ap.add_argument("--processes", type=int, default=os.cpu_count() or 2, help="N (default: the core count)")
    ap.add_argument("--latency", type=float, default=0.2, help="model latency per call, seconds")
    ap.add_argument("--isolation", choices=["auto", "none"], default="auto", help="local sandbox isolation")
    ap.add_argument("--repeat", type=int, default=1, help="runs per level and setting (the best is kept)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args(argv)
    ideal_s = 5.0 if args.quick else 15.0
    work = Path(tempfile.mkdtemp(prefix="hermes-bench-procs-"))
    levels = [int(x) for x in args.levels.split(",")]
    bwrap = shutil.which("bwrap")
    print(
        f"hermes-runner worker-process benchmark: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
        f"L={args.latency * 1000:.0f} ms, k={K_CALLS} calls/trajectory, processes=1 vs {args.processes}, "
        f"isolation={args.isolation} (bubblewrap {'at ' + bwrap if bwrap else 'not installed'})",
        flush=True,
    )
    pairs: dict[int, tuple[LevelResult, LevelResult]] = {}
    with ScriptedServerProcess(args.latency, work / "server.log") as server:
        for c in levels:
            n = max(c, int(round(ideal_s * c / (K_CALLS * args.latency))))
            best: list[LevelResult | None] = [None, None]
            for _ in range(args.repeat):
                for i, r in enumerate(run_pair(server, work, c, n, args.processes, args.isolation)):
                    print(
                        f"  c={c:<3} processes={1 if i == 0 else args.processes} N={n:<5} wall {r.wall_s:6.2f}s "
                        f"ratio {r.ratio:.3f} (steady {r.steady:.3f}) runner CPU {r.cpu_ms:.2f} ms/traj "
                        f"(+{r.children_ms:.2f} children){'' if r.ok == r.n else f'  {r.ok}/{r.n} ok'}",
                        flush=True,
                    )
                    if best[i] is None or r.wall_s < best[i].wall_s:
                        best[i] = r
            pairs[c] = (best[0], best[1])
    print()
    head = f"{'c':>4} {'procs':>5} {'N':>6} {'wall s':>7} {'ideal s':>7} {'ratio':>6} {'steady':>6} {'vs 1':>5} {'CPU ms/traj':>11} {'children ms':>11}"
    print(head)
    print("-" * len(head))
    for c, (one, many) in pairs.items():
        for procs, r in ((1, one), (args.processes, many)):
            print(
                f"{c:>4} {procs:>5} {r.n:>6} {r.wall_s:>7.2f} {r.ideal_s:>7.2f} {r.ratio:>6.3f} {r.steady:>6.3f} "
                f"{one.wall_s / r.wall_s:>5.2f} {r.cpu_ms:>11.2f} {r.children_ms:>11.2f}"
            )
    print(
        "ratio = ideal / wall (the latency limit); vs 1 = throughput over processes=1 at the same level;\n"
        "CPU ms/traj = the runner process (processes=1) or the runner alone, its workers being children (N);\n"
        "children ms = sandbox commands (processes=1) or the workers with their sandbox commands (N)"
    )
    verdicts = []
    for c, (one, _) in pairs.items():
        print(ceiling_line(c, one))
    if 256 in pairs:
        one, many = pairs[256]
        speedup = one.wall_s / many.wall_s
        good = speedup >= TARGET_SPEEDUP_256 and many.ok == many.n
        verdicts.append(
            f"{verdict(good)}  processes={args.processes} at 256 sessions: {speedup:.2f}x the throughput of one "
            f"process >= {TARGET_SPEEDUP_256:g}x (ratio {many.ratio:.3f} vs {one.ratio:.3f} of the latency limit)"
        )
    if 64 in pairs:
        one, _ = pairs[64]
        good = one.cpu_ms <= TARGET_CPU_MS_64
        verdicts.append(
            f"{verdict(good)}  runner CPU per 2-call trajectory at 64 sessions, isolation={args.isolation}: "
            f"{one.cpu_ms:.2f} ms <= {TARGET_CPU_MS_64:g} ms"
        )
    print("\nTargets")
    for line in verdicts:
        print("  " + line)
    if args.json:
        args.json.write_text(
            json.dumps({c: [asdict(one), asdict(many)] for c, (one, many) in pairs.items()} | {"verdicts": verdicts})
        )
    shutil.rmtree(work, ignore_errors=True)
    return 0 if all(v.startswith("PASS") for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Telemetry overhead: the runner's CPU per trajectory with telemetry off and with `telemetry.otlp_file` on.

    python -m bench.telemetry               # 256 prompts at 64 sessions, off/on/off/on (about two minutes)
    python -m bench.telemetry --quick       # 64 prompts, one round

The setting of bench.throughput (its scripted server in its own process, L = 200 ms per call, the 2-call agent
with one `terminal` call in the local sandbox, `run.py` as a user runs it; isolation none, so that sandbox
start-up noise stays out). Rounds alternate off and on; it prints the runner's CPU ms per trajectory of each,
the ratio on/off, the spans written per trajectory (invoke_agent, 2 chat, 1 execute_tool, 1 sandbox run) and
the file's bytes per trajectory. Other work on the machine moves the figures: compare within one invocation.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench.common import ScriptedServerProcess
from bench.throughput import run_level


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="64 prompts, one round")
    ap.add_argument("--prompts", type=int, default=None)
    ap.add_argument("--sessions", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=None)
    args = ap.parse_args(argv)
    n = args.prompts or (64 if args.quick else 256)
    rounds = args.rounds or (1 if args.quick else 2)
    work = Path(tempfile.mkdtemp(prefix="hermes-bench-telemetry-"))
    print(f"telemetry overhead: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, {n} prompts, "
          f"{args.sessions} sessions, {rounds} round(s) of off/on")  # fmt: skip
    cpu: dict[str, list[float]] = {"off": [], "on": []}
    spans_per, bytes_per = 0.0, 0.0
    with ScriptedServerProcess(0.2, work / "server.log") as server:
        for r in range(rounds):
            for mode in ("off", "on"):
                spans = work / f"spans-{r}.jsonl"
                extra = [f"telemetry.otlp_file={spans}"] if mode == "on" else []
                res = run_level(server, work, args.sessions, n, False, "none", extra, f"-{mode}{r}")
                if res.ok != n or res.exit_code != 0:
                    print(f"FAIL: {mode} round {r}: {res.ok}/{n} ok, exit {res.exit_code}")
                    return 1
                cpu[mode].append(res.cpu_ms)
                print(f"  round {r} {mode:3}: runner {res.cpu_ms:6.2f} ms CPU per trajectory, wall {res.wall_s:.1f} s")
                if mode == "on":
                    text = spans.read_text()
                    spans_per = text.count('"spanId"') / n
                    bytes_per = len(text.encode()) / n
    shutil.rmtree(work, ignore_errors=True)
    off, on = statistics.median(cpu["off"]), statistics.median(cpu["on"])
    print(f"runner CPU per trajectory: off {off:.2f} ms, on {on:.2f} ms: on/off {on / off:.2f} "
          f"(+{on - off:.2f} ms for {spans_per:.1f} spans, {bytes_per / 1024:.1f} KiB of file per trajectory)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

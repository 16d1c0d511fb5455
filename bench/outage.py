"""Outage benchmark: prompts lost to a provider outage in the middle of a run, circuit breaker off and on.

    python -m bench.outage                                  # 1,000 prompts, a 2-minute outage (about 9 minutes)
    python -m bench.outage --prompts 200 --outage-s 30      # a quick look

The scripted OpenAI-compatible server (in this process) answers every call after `--latency`; once `--at` of
the prompts' calls have been served it answers every chat call 503 for `--outage-s` seconds (its outage mode),
then recovers. Each prompt runs the default scripted 2-call agent (a `terminal` call in the local sandbox, then an
answer). `run.py` runs as a user runs it, with the default model retries (model.max_retries=6, backing off up to
60 s) and the default breaker (20 prompts in 60 s open it, a probe every 10 s), once with breaker.enabled=false
and once with it on. Printed per mode: prompts ok and failed at the end of the invocation (failed: lost to the
outage until a rerun), prompts that failed and ended ok in the same invocation, ledger records of the prompt
with the most (1: exactly once), the chat calls the outage refused, and wall time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.common import PY, ROOT, write_dataset
from hermes_runner.testing.scripted_server import ScriptedServer

K_CALLS = 2  # model calls per prompt of the default scripted agent


@dataclass
class ModeResult:
    breaker: bool
    prompts: int
    ok: int
    failed: int  # lost to the outage until a rerun
    rerun: (
        int  # prompts that failed, ran again in the same invocation and ended ok (their failed runs in failures.jsonl)
    )
    max_records: int  # ledger records of the prompt with the most (1: exactly once)
    refused_calls: int  # chat calls the outage answered 503
    outage_s: float
    wall_s: float
    exit_code: int


def run_mode(breaker: bool, args: argparse.Namespace, work: Path) -> ModeResult:
    server = ScriptedServer(latency=args.latency, record=False).start()
    try:
        ds = write_dataset(work / "d.jsonl", args.prompts)
        run_dir = work / f"run-breaker-{'on' if breaker else 'off'}"
        cmd = [
            PY, str(ROOT / "run.py"), "model=local_server", f"model.base_url={server.url}", f"dataset_file={ds}",
            "run_name=outage", f"hydra.run.dir={run_dir}", f"num_workers={args.workers}", "progress=false",
            "cache=off", f"sandbox.local.root={work / 'sandboxes'}", "distribution=terminal_only",
            f"breaker.enabled={str(breaker).lower()}",
        ]  # fmt: skip
        if args.max_retries is not None:
            cmd.append(f"model.max_retries={args.max_retries}")
        t0 = time.monotonic()
        with (work / f"cli-{breaker}.log").open("w") as log:
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
            start_at = int(args.prompts * K_CALLS * args.at)
            while server.served < start_at and proc.poll() is None:
                time.sleep(0.05)
            server.outage(503)
            began = time.monotonic()
            while time.monotonic() - began < args.outage_s and proc.poll() is None:
                time.sleep(0.05)
            server.recover()
            outage = time.monotonic() - began
            code = proc.wait()
        wall = time.monotonic() - t0
        stats = json.loads((run_dir / "statistics.json").read_text())
        ledger = [json.loads(ln) for ln in (run_dir / "ledger.jsonl").read_text().splitlines() if ln.strip()]
        rerun = [r for r in ledger if r["status"] == "ok" and r.get("attempts", 1) > 1]  # failed runs before
        return ModeResult(
            breaker, args.prompts, stats["prompts"]["ok"], stats["prompts"]["failed"], len(rerun),
            max(Counter(r["key"] for r in ledger).values()), server.outage_answered, outage, wall, code,
        )  # fmt: skip
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=1000)
    ap.add_argument("--outage-s", type=float, default=120.0, help="how long every chat call answers 503")
    ap.add_argument("--at", type=float, default=0.3, help="share of the run's calls served before the outage")
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--latency", type=float, default=0.05, help="seconds the server takes per reply")
    ap.add_argument("--max-retries", type=int, help="model.max_retries (default: the config's, 6)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    results = []
    for breaker in (False, True):
        work = Path(tempfile.mkdtemp(prefix="bench-outage-"))
        try:
            results.append(run_mode(breaker, args, work))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    retries = "default" if args.max_retries is None else args.max_retries
    print(f"{args.prompts} prompts, {args.workers} in flight, a {args.outage_s:g} s outage (every chat call 503) "
          f"after {args.at:.0%} of the calls, model.max_retries={retries}")  # fmt: skip
    print(f"{'breaker':8} {'ok':>6} {'failed':>7} {'lost %':>7} {'rerun':>6} {'records':>8} {'503s':>6} {'wall s':>7}")
    for r in results:
        print(f"{'on' if r.breaker else 'off':8} {r.ok:6d} {r.failed:7d} {100 * r.failed / r.prompts:6.1f}% "
              f"{r.rerun:6d} {r.max_records:8d} {r.refused_calls:6d} {r.wall_s:7.1f}")  # fmt: skip
    off, on = results
    print(f"prompts lost: {off.failed} without the breaker, {on.failed} with it")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))


if __name__ == "__main__":
    main()

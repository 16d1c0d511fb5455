"""Throughput benchmark: how close a run gets to the model-latency limit on this machine.

    python -m bench.throughput            # full benchmark (a few minutes)
    python -m bench.throughput --quick    # smaller runs (about a minute)

A loopback OpenAI-compatible server (hermes_runner.testing.scripted_server, its own process)
answers every call after a fixed latency L. Each prompt runs the default scripted
2-call agent: one `terminal` call in the local sandbox, then an answer (k = 2 calls).
With N prompts and c sessions in flight nothing can finish before N*k*L/c seconds;
the benchmark runs `run.py` as a user does (in a probe process that reports its own
CPU and peak RSS, and its sandbox children's CPU separately) and prints wall time,
that ideal, their ratio, CPU per trajectory and peak RSS per concurrency level,
for streaming off and on, with bubblewrap isolation and without.

It also times the resume planning of a run dir holding 100,000 finished entries, and
the peak RSS of planning (and dispatching) a 1,000,000-row dataset.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.common import PY, ROOT, ScriptedServerProcess, busy_seconds, probe, write_dataset

K_CALLS = 2  # model calls per trajectory of the default scripted agent
TARGET_RATIO = {8: 0.90, 64: 0.90, 256: 0.75}
TARGET_CPU_MS = 20.0
TARGET_RESUME_S = 5.0
TARGET_RSS_MB = 500.0


@dataclass
class LevelResult:
    workers: int
    stream: bool
    isolation: str
    n: int
    ok: int
    wall_s: float  # process start to exit
    ideal_s: float
    ratio: float  # ideal / wall: the efficiency the targets judge
    startup_s: float  # process start to its first model call
    finish_s: float  # last reply to process exit (finalize: outputs, report)
    steady: float  # ideal / (first call to last reply): the runner once started
    cpu_ms: float  # runner process, per trajectory
    children_ms: float  # sandbox commands (bwrap, bash), per trajectory
    server_ms: float  # the scripted server, per trajectory (shares the cores)
    others_cpu_s: float  # CPU used by everything else on the machine meanwhile
    rss_mb: float
    exit_code: int


def base_overrides(url: str, dataset: Path, run_dir: Path, name: str) -> list[str]:
    return [
        "model=local_server",
        f"model.base_url={url}",
        "model.name=scripted",
        f"dataset_file={dataset}",
        f"run_name={name}",
        f"hydra.run.dir={run_dir}",
        "cache=off",  # every level asks the same prompts: a replayed reply would be no call at all
    ]


def run_level(
    server: ScriptedServerProcess,
    work: Path,
    workers: int,
    n: int,
    stream: bool,
    isolation: str,
    extra: list[str] | None = None,
    tag: str = "",
) -> LevelResult:
    """One run of `n` prompts at `workers` sessions; `extra` overrides (e.g. executor.processes) named by `tag`."""
    name = f"c{workers}-{'stream' if stream else 'plain'}-{isolation}{tag}"
    dataset = write_dataset(work / f"{name}.jsonl", n)
    run_dir = work / name
    args = base_overrides(server.url, dataset, run_dir, name) + [
        f"num_workers={workers}",
        f"sandbox.local.isolation={isolation}",
        f"sandbox.local.root={work / 'sandboxes'}",
    ]
    if stream:
        args.append("model.stream=true")
    args += extra or []
    # Render the progress bar as on a terminal, so its cost is measured too.
    env = {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "COLUMNS": "120"}
    server.stats(reset=True)
    cpu0, busy0 = server.cpu_seconds(), busy_seconds()
    report, start, end, code = probe(work / f"{name}.usage.json", ["run.py", *args], work / f"{name}.log", env)
    server_cpu, busy = server.cpu_seconds() - cpu0, busy_seconds() - busy0
    served = server.stats()
    first, last = served["first_request"] or end, served["last_reply"] or end
    stats_path = run_dir / "statistics.json"
    ok = json.loads(stats_path.read_text())["prompts"]["ok"] if stats_path.exists() else 0
    if served["served"] != n * K_CALLS:
        ok = min(ok, served["served"] // K_CALLS)  # not the 2-call agent: count it as not done
    ideal = n * K_CALLS * server.latency / workers
    own = report.get("cpu_self_s", 0.0)
    children = report.get("cpu_children_s", 0.0)
    shutil.rmtree(run_dir, ignore_errors=True)
    dataset.unlink()
    return LevelResult(
        workers=workers,
        stream=stream,
        isolation=isolation,
        n=n,
        ok=ok,
        wall_s=end - start,
        ideal_s=ideal,
        ratio=ideal / (end - start),
        startup_s=first - start,
        finish_s=end - last,
        steady=ideal / max(1e-9, last - first),
        cpu_ms=1000 * own / n,
        children_ms=1000 * children / n,
        server_ms=1000 * server_cpu / n,
        others_cpu_s=max(0.0, busy - own - children - server_cpu),
        rss_mb=report.get("maxrss_mb", 0.0),
        exit_code=code,
    )


# -- resume planning over 100,000 finished entries --------------------------------------


def build_finished_run(work: Path, n: int) -> tuple[Path, list[str]]:
    """A run dir whose ledger holds `n` finished (ok) entries, written through the store API."""
    from bench.common import compose
    from hermes_runner.agent.loop import SessionResult, StopReason
    from hermes_runner.config import as_container
    from hermes_runner.dataset import Prompt, read_prompts
    from hermes_runner.run.record import _summary, classify
    from hermes_runner.rundir.manifest import data_config, write_manifest
    from hermes_runner.rundir.store import RunStore
    from hermes_runner.tools.backends import unavailable
    from hermes_runner.tools.catalog import tool_names, tools_for
    from hermes_runner.trajectory import entry as entries
    from hermes_runner.usage import Usage

    dataset = write_dataset(work / "resume.jsonl", n)
    run_dir = work / "resume"
    overrides = base_overrides("http://127.0.0.1:9/v1", dataset, run_dir, "resume")
    cfg = compose(overrides)
    run_dir.mkdir(parents=True)
    data = data_config(as_container(cfg), unavailable(cfg.tools, cfg.model, cfg.distribution))
    write_manifest(run_dir, data, cfg.run_name)
    names = tool_names()
    call = {
        "id": "call_0",
        "type": "function",
        "function": {"name": "terminal", "arguments": '{"command": "echo hello"}'},
    }
    res = SessionResult(Prompt(0, "KEY", "PROMPT"), tools_for(["terminal", "file"]), ["terminal", "file"])
    res.history = [
        {"role": "user", "content": "PROMPT"},
        {"role": "assistant", "content": "", "tool_calls": [call], "reasoning": "I should run a command to check."},
        {"role": "tool", "tool_call_id": "call_0", "name": "terminal", "content": '{"output": "hello\\n", "exit_code": 0, "error": null}'},
        {"role": "assistant", "content": "The answer is hello.", "reasoning": "The command worked; I can answer."},
    ]  # fmt: skip
    res.stop_reason, res.api_calls = StopReason.final_answer, 2
    res.tool_calls = [("terminal", True)]
    res.usage = Usage(prompt_tokens=900, completion_tokens=60, total_tokens=960)
    status, _, summary = classify(res, cfg.filters, names)
    template = entries.entry(res, batch_num=0, model="scripted", tool_names=names, system_prompt=cfg.system_prompt)
    line = json.dumps(template, ensure_ascii=False)
    store = RunStore(run_dir)
    for p in read_prompts(dataset):
        batch = p.index // cfg.batch_size
        entry = line.replace('"prompt_index": 0', f'"prompt_index": {p.index}', 1).replace("KEY", p.key, 1)
        entry = entry.replace("PROMPT", json.dumps(p.prompt)[1:-1], 1) + "\n"
        rec = _summary(res, p.key, p.index, 0) | summary
        store.write_trajectory(status, batch, entry.encode(), rec)
        if p.index % cfg.batch_size == cfg.batch_size - 1:
            store.close_batch(batch)
    store.close()
    return run_dir, overrides


def resume_bench(work: Path, n: int) -> dict:
    t = time.perf_counter()
    run_dir, overrides = build_finished_run(work, n)
    built = time.perf_counter() - t
    spec = work / "resume.spec.json"
    spec.write_text(json.dumps({"overrides": overrides, "run_dir": str(run_dir)}))
    report, _, _, code = probe(work / "resume.usage.json", ["--prepare", str(spec)], work / "resume.log")
    if code:
        raise RuntimeError(f"resume probe failed, see {work / 'resume.log'}")
    shutil.rmtree(run_dir, ignore_errors=True)
    return {"entries": n, "build_s": built, **report}


# -- memory over a 1,000,000-row dataset ------------------------------------------------


def plan_rss(work: Path, dataset: Path, tag: str) -> dict:
    run_dir = work / f"plan-{tag}"
    spec = work / f"plan-{tag}.spec.json"
    spec.write_text(
        json.dumps(
            {"overrides": base_overrides("http://127.0.0.1:9/v1", dataset, run_dir, tag), "run_dir": str(run_dir)}
        )
    )
    report, _, _, code = probe(work / f"plan-{tag}.usage.json", ["--prepare", str(spec)], work / f"plan-{tag}.log")
    if code:
        raise RuntimeError(f"planning probe failed, see {work / f'plan-{tag}.log'}")
    shutil.rmtree(run_dir, ignore_errors=True)
    return report


def dispatch_rss(work: Path, dataset: Path, seconds: float) -> dict:
    """Run the CLI over the whole dataset against a zero-latency server for a while, then Ctrl-C it."""
    run_dir = work / "dispatch"
    with ScriptedServerProcess(0.0, work / "server0.log") as server:
        args = base_overrides(server.url, dataset, run_dir, "dispatch") + [
            "num_workers=64",
            "sandbox.local.isolation=none",
            f"sandbox.local.root={work / 'sandboxes'}",
            "progress=false",
        ]
        out = work / "dispatch.usage.json"
        log = (work / "dispatch.log").open("w")
        proc = subprocess.Popen([PY, "-m", "bench.probe", str(out), "run.py", *args], cwd=ROOT, stdout=log, stderr=log)
        t = time.perf_counter()
        while not (run_dir / "ledger.jsonl").exists() and proc.poll() is None:
            time.sleep(0.2)
        planned = time.perf_counter() - t
        time.sleep(seconds)
        proc.send_signal(signal.SIGINT)
        proc.wait(600)
    report = json.loads(out.read_text()) if out.exists() else {}
    done = sum(1 for _ in (run_dir / "ledger.jsonl").open()) if (run_dir / "ledger.jsonl").exists() else 0
    shutil.rmtree(run_dir, ignore_errors=True)
    return {**report, "until_dispatch_s": planned, "dispatched": done}


# -- report ---------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def print_levels(results: list[LevelResult]) -> list[str]:
    head = (
        f"{'c':>4} {'stream':>6} {'isolation':>9} {'N':>6} {'wall s':>7} {'ideal s':>7} {'ratio':>6} "
        f"{'startup s':>9} {'finish s':>8} {'steady':>6} {'CPU ms/traj':>11} {'sandbox ms':>10} {'server ms':>9} "
        f"{'others s':>8} {'peak RSS MB':>11}"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        flag = "" if r.ok == r.n and r.exit_code == 0 else f"  ({r.ok}/{r.n} ok, exit {r.exit_code})"
        print(
            f"{r.workers:>4} {'on' if r.stream else 'off':>6} {r.isolation:>9} {r.n:>6} {r.wall_s:>7.2f} "
            f"{r.ideal_s:>7.2f} {r.ratio:>6.3f} {r.startup_s:>9.2f} {r.finish_s:>8.2f} {r.steady:>6.3f} "
            f"{r.cpu_ms:>11.2f} {r.children_ms:>10.2f} {r.server_ms:>9.2f} {r.others_cpu_s:>8.1f} {r.rss_mb:>11.1f}{flag}"
        )
    print(
        "ratio = ideal / wall (process start to exit), the efficiency the targets are judged on;\n"
        "steady = ideal / (first model call to last reply): the runner once started (startup and finish\n"
        "are fixed costs that a run of hours amortizes and a benchmark of seconds cannot);\n"
        "CPU ms/traj = the runner process (startup included); sandbox ms = its commands (bash, bwrap);\n"
        "server ms = the scripted server; others s = CPU-seconds used by other processes on the machine meanwhile"
    )
    lines = []
    for r in results:
        label = f"c={r.workers} stream={'on' if r.stream else 'off'} isolation={r.isolation}"
        target = TARGET_RATIO.get(r.workers)
        if target is not None:
            good = r.ratio >= target and r.ok == r.n
            lines.append(
                f"{verdict(good)}  efficiency {r.ratio:.3f} >= {target:.2f} (steady {r.steady:.3f}, with "
                f"{r.startup_s:.1f}s startup and {r.finish_s:.1f}s finish)  [{label}]"
            )
        good = r.cpu_ms <= TARGET_CPU_MS
        lines.append(f"{verdict(good)}  runner CPU {r.cpu_ms:.2f} ms/trajectory <= {TARGET_CPU_MS:g}  [{label}]")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller runs: ~5s of ideal time per level instead of ~20s")
    ap.add_argument("--levels", default="8,64,256", help="concurrency levels (sessions in flight)")
    ap.add_argument("--latency", type=float, default=0.2, help="model latency per call, seconds")
    ap.add_argument("--ideal-s", type=float, default=None, help="ideal seconds per level (sets N)")
    ap.add_argument("--stream", choices=["off", "on", "both"], default="both")
    ap.add_argument("--isolation", choices=["auto", "none", "both"], default="both", help="local sandbox isolation")
    ap.add_argument("--resume-entries", type=int, default=100_000)
    ap.add_argument("--dataset-rows", type=int, default=1_000_000)
    ap.add_argument("--dispatch-s", type=float, default=None, help="seconds of dispatch over the big dataset")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: throughput,resume,memory")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--workdir", type=Path, default=None, help="where runs are written (default: a temp dir)")
    args = ap.parse_args(argv)
    ideal_s = args.ideal_s or (5.0 if args.quick else 20.0)
    dispatch_s = args.dispatch_s if args.dispatch_s is not None else (5.0 if args.quick else 15.0)
    skip = set(filter(None, args.skip.split(",")))
    levels = [int(x) for x in args.levels.split(",")]
    streams = {"off": [False], "on": [True], "both": [False, True]}[args.stream]
    isolations = {"auto": ["auto"], "none": ["none"], "both": ["auto", "none"]}[args.isolation]
    work = args.workdir or Path(tempfile.mkdtemp(prefix="hermes-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    bwrap = shutil.which("bwrap")
    print(
        f"hermes-runner throughput benchmark: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
        f"L={args.latency * 1000:.0f} ms, k={K_CALLS} calls/trajectory, bubblewrap "
        f"{'at ' + bwrap if bwrap else 'not installed (isolation=auto runs unconfined)'}, work dir {work}",
        flush=True,
    )
    out: dict = {"latency_s": args.latency, "levels": []}
    verdicts: list[str] = []
    if "throughput" not in skip:
        results = []
        with ScriptedServerProcess(args.latency, work / "server.log") as server:
            for isolation in isolations:
                for stream in streams:
                    for c in levels:
                        n = max(c, int(round(ideal_s * c / (K_CALLS * args.latency))))
                        r = run_level(server, work, c, n, stream, isolation)
                        results.append(r)
                        print(
                            f"  c={c:<3} stream={'on ' if stream else 'off'} isolation={isolation:<4} "
                            f"N={n:<5} wall {r.wall_s:6.2f}s ratio {r.ratio:.3f} (steady {r.steady:.3f}) "
                            f"CPU {r.cpu_ms:.2f} ms/traj",
                            flush=True,
                        )
        print()
        verdicts += print_levels(results)
        out["levels"] = [asdict(r) for r in results]
    if "resume" not in skip:
        print(f"\nresume planning: building a run dir with {args.resume_entries:,} finished entries ...", flush=True)
        res = resume_bench(work, args.resume_entries)
        print(
            f"  built in {res['build_s']:.1f}s; Run.prepare() (ledger load + plan) took {res['prepare_s']:.2f}s, "
            f"{res['plan']['done']:,} done / {res['plan']['to_run']:,} to run, peak RSS {res['maxrss_mb']:.0f} MB"
        )
        good = res["prepare_s"] <= TARGET_RESUME_S and res["plan"]["done"] == args.resume_entries
        verdicts.append(
            f"{verdict(good)}  resume planning over {args.resume_entries:,} entries {res['prepare_s']:.2f}s <= {TARGET_RESUME_S:g}s"
        )
        out["resume"] = res
    if "memory" not in skip:
        rows = args.dataset_rows
        print(f"\nmemory: a {rows:,}-row dataset ...", flush=True)
        big = write_dataset(work / "big.jsonl", rows)
        small = write_dataset(work / "small.jsonl", max(1, rows // 10))
        p_small = plan_rss(work, small, "small")
        p_big = plan_rss(work, big, "big")
        print(
            f"  planning: peak RSS {p_small['maxrss_mb']:.0f} MB at {rows // 10:,} rows, {p_big['maxrss_mb']:.0f} MB at "
            f"{rows:,} rows (after imports: {p_big['rss_before_mb']:.0f} MB; plan took {p_big['prepare_s']:.1f}s)"
        )
        verdicts.append(
            f"{verdict(p_big['maxrss_mb'] <= TARGET_RSS_MB)}  planning {rows:,} rows: peak RSS {p_big['maxrss_mb']:.0f} MB <= {TARGET_RSS_MB:g}"
        )
        mem: dict = {"rows": rows, "plan_small": p_small, "plan_big": p_big}
        if dispatch_s > 0:
            d = dispatch_rss(work, big, dispatch_s)
            print(
                f"  dispatch: {d.get('dispatched', 0):,} prompts run in {dispatch_s:g}s after {d['until_dispatch_s']:.1f}s of "
                f"planning, then Ctrl-C: peak RSS {d.get('maxrss_mb', math.nan):.0f} MB"
            )
            verdicts.append(
                f"{verdict(d.get('maxrss_mb', math.inf) <= TARGET_RSS_MB)}  dispatching over {rows:,} rows: "
                f"peak RSS {d.get('maxrss_mb', math.nan):.0f} MB <= {TARGET_RSS_MB:g}"
            )
            mem["dispatch"] = d
        out["memory"] = mem
        big.unlink()
        small.unlink()
    print("\nTargets")
    for line in verdicts:
        print("  " + line)
    out["verdicts"] = verdicts
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(v.startswith("PASS") for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())

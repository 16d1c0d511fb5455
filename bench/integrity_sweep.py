"""A small adversarial sweep of run integrity (issue 15): kill -9 during runs and during the final write,
Ctrl-C cycles under a token budget; prints what survived exactly once and what the statistics counted.

    python bench/integrity_sweep.py REPO WORK_DIR [runs,final,budget]     (about 2 minutes)
"""

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(sys.argv[1])
WORK = Path(sys.argv[2])
sys.path.insert(0, str(REPO))
from hermes_runner.testing.scripted_server import ScriptedServer  # noqa: E402

TERM = {"name": "terminal", "arguments": {"command": "echo hi"}}


def script(*steps, text="task"):
    return f"{text}\n#script {json.dumps(list(steps))}"


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read_jsonl(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def args_for(srv, ds, run_dir, *extra):
    return [
        "model=local_server",
        f"model.base_url={srv.url}",
        "model.retry_initial_wait_s=0.01",
        "progress=false",
        f"sandbox.local.root={WORK / 'sb'}",
        f"dataset_file={ds}",
        "run_name=sweep",
        f"hydra.run.dir={run_dir}",
        *extra,
    ]


def start(args, log):
    return subprocess.Popen(
        [sys.executable, str(REPO / "run.py"), *args],
        cwd=REPO,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "HYDRA_FULL_ERROR": "1", "PYTHONPATH": str(REPO)},
    )


def check(run_dir, rows, srv):
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    once = Counter(e["conversations"][1]["value"] for e in entries) == Counter(r["prompt"] for r in rows)
    ordered = [e["prompt_index"] for e in entries] == list(range(len(rows)))
    terms = Counter(r["key"] for r in read_jsonl(run_dir / "ledger.jsonl") if r["status"] in ("ok", "discarded"))
    stats = json.loads((run_dir / "statistics.json").read_text())
    temps = [p.name for p in run_dir.iterdir() if p.name.startswith(".") and p.name not in (".lock", ".hydra")]
    sent = len(srv.requests)
    mc = stats.get("model_calls", {})
    return {
        "rows": len(rows),
        "entries": len(entries),
        "exactly_once": once and ordered and len(terms) == len(rows) and set(terms.values()) == {1},
        "stats_ok": stats["prompts"]["ok"],
        "server_calls": sent,
        "stats_api_calls": stats["api_calls"],
        "missing_calls": sent - stats["api_calls"] - stats.get("retries", 0),
        "unanswered": mc.get("unanswered"),
        "stale_temps": temps[:3],
        "n_stale": len(temps),
        "invocations": len(read_jsonl(run_dir / "invocations.jsonl")),
    }


def kills_during_runs(srv, n_kills, seed):
    rng = random.Random(seed)
    words = [f"task {i}" for i in range(40)]
    rows = [{"prompt": rng.choice(words[:30]) if i % 4 == 0 else words[i % 40], "id": i % 7} for i in range(60)]
    ds = write_jsonl(WORK / f"d{seed}.jsonl", rows)
    run_dir = WORK / f"runs{seed}"
    srv.reset()
    srv.latency = 0.03
    args = args_for(srv, ds, run_dir, "num_workers=4", "batch_size=5")
    log = WORK / f"kills{seed}.log"
    kills = invocations = 0
    while True:
        proc = start(args, log)
        invocations += 1
        if kills < n_kills:
            target = len(srv.requests) + rng.randint(4, 40)
            while proc.poll() is None and len(srv.requests) < target:
                time.sleep(0.005)
            time.sleep(rng.uniform(0, 0.1))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
                continue
        assert proc.wait(300) == 0, log.read_text()[-2000:]
        break
    out = check(run_dir, rows, srv)
    out.update(kills=kills, runs=invocations)
    return out


def kills_during_final_write(srv, n_kills):
    rows = [{"prompt": f"final {i} " + "y" * 3000} for i in range(1500)]
    ds = write_jsonl(WORK / "final.jsonl", rows)
    run_dir = WORK / "final"
    srv.reset()
    srv.latency = 0.0
    args = args_for(srv, ds, run_dir, "num_workers=8", "batch_size=100", "distribution=terminal_only")
    log = WORK / "final.log"
    assert start(args, log).wait(900) == 0, log.read_text()[-2000:]
    landed = 0
    leftovers = []
    for _ in range(n_kills):
        old = {p.name for p in run_dir.iterdir() if p.name.startswith(".trajectories.jsonl.")}
        proc = start(args, log)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            tmp = [p for p in run_dir.iterdir() if p.name.startswith(".trajectories.jsonl.") and p.name not in old]
            if tmp:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                landed += 1
                leftovers.append(
                    sum(p.stat().st_size for p in run_dir.iterdir() if p.name.startswith(".trajectories.jsonl."))
                )
                break
            time.sleep(0.0005)
        else:
            proc.wait()
    assert start(args, log).wait(300) == 0
    out = check(run_dir, rows, srv)
    out.update(final_write_kills=landed, temp_bytes_left_at_kills=leftovers)
    return out


def ctrl_c_under_budget(srv, cycles):
    rows = [
        {
            "prompt": script(
                *[{"tool_calls": [TERM], "reasoning": "r"}] * 12, {"content": "ok", "reasoning": "r"}, text=f"long {i}"
            )
        }
        for i in range(8)
    ]
    ds = write_jsonl(WORK / "budget.jsonl", rows)
    run_dir = WORK / "budget"
    srv.reset()
    srv.latency = 0.1
    args = args_for(srv, ds, run_dir, "num_workers=4", "limits.max_tokens_total=2000")
    log = WORK / "budget.log"
    codes = []
    for _ in range(cycles):
        proc = start(args, log)
        target = len(srv.requests) + 6
        deadline = time.monotonic() + 60
        while proc.poll() is None and len(srv.requests) < target and time.monotonic() < deadline:
            time.sleep(0.01)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        codes.append(proc.wait(60))
    stats = json.loads((run_dir / "statistics.json").read_text())
    return {
        "exit_codes": codes,
        "server_calls": len(srv.requests),
        "budget_tokens_recorded": stats["usage"]["total_tokens"],
        "stats_api_calls": stats["api_calls"],
        "model_calls": stats.get("model_calls"),
        "stopped_by_budget": stats["stopped_by_budget"],
    }


if __name__ == "__main__":
    WORK.mkdir(parents=True, exist_ok=True)
    srv = ScriptedServer().start()
    results = {}
    which = sys.argv[3].split(",") if len(sys.argv) > 3 else ["runs", "final", "budget"]
    if "runs" in which:
        results["kills_during_runs"] = [kills_during_runs(srv, 8, seed) for seed in (1, 2)]
    if "final" in which:
        results["kills_during_final_write"] = kills_during_final_write(srv, 6)
    if "budget" in which:
        results["ctrl_c_under_budget"] = ctrl_c_under_budget(srv, 4)
    print(json.dumps(results, indent=1))
    srv.stop()

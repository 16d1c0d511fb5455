"""Planning and dispatching a 1,000,000-row dataset in every format, against JSONL (today's) and a bare floor.

    python -m bench.dataset_formats                 # 1,000,000 rows (about 5 minutes on 2 cores)
    python -m bench.dataset_formats --rows 100000   # quicker

The same rows (`id`, `prompt`, `target`) are written as JSONL, a JSON array, CSV, Parquet, a
`save_to_disk` directory and a hub dataset in a private `datasets` cache (`hf:bench/rows`, read offline).
Each format is planned (`make_plan`: the pass that counts, checks and finds what is done) and dispatched
(`pending`: the pass that yields the prompts to run) in a process of its own, which reports its peak RSS
(VmHWM, reset before planning), its RSS before planning, and the CPU seconds of each pass. The floor is the least any reader
does: the JSONL file's lines through `json.loads`, nothing kept. Ratios are against JSONL, measured in the
same run: the issue's target is that every format plans in the same memory as JSONL.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import PY, ROOT

FORMATS = ("jsonl", "json", "csv", "parquet", "save_to_disk", "hf")
HUB_NAME = "bench/rows"


def row(i: int) -> dict:
    return {"id": f"row-{i}", "prompt": f"Task {i}: find out what the machine says when asked.", "target": str(i)}


def write_all(work: Path, n: int) -> dict[str, str]:
    """The same n rows in every format; returns format -> dataset_file."""
    out = {}
    jsonl, arr, csv_path = work / "rows.jsonl", work / "rows.json", work / "rows.csv"
    with jsonl.open("w") as fj, arr.open("w") as fa, csv_path.open("w", newline="") as fc:
        w = csv.DictWriter(fc, fieldnames=["id", "prompt", "target"])
        w.writeheader()
        fa.write("[\n")
        for start in range(0, n, 10_000):
            rows = [row(i) for i in range(start, min(n, start + 10_000))]
            fj.write("".join(json.dumps(r) + "\n" for r in rows))
            fa.write(("" if start == 0 else ",\n") + ",\n".join(json.dumps(r) for r in rows))
            w.writerows(rows)
        fa.write("\n]\n")
    out.update(jsonl=str(jsonl), json=str(arr), csv=str(csv_path))
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("id", pa.string()), ("prompt", pa.string()), ("target", pa.string())])
    with pq.ParquetWriter(work / "rows.parquet", schema) as pw:
        for start in range(0, n, 100_000):
            pw.write_table(pa.Table.from_pylist([row(i) for i in range(start, min(n, start + 100_000))], schema))
    out["parquet"] = str(work / "rows.parquet")
    import datasets

    datasets.disable_progress_bars()
    datasets.Dataset.from_parquet(str(work / "rows.parquet"), cache_dir=str(work / "build")).save_to_disk(work / "disk")
    out["save_to_disk"] = str(work / "disk")
    _hub_cache(work, jsonl)
    out["hf"] = f"hf:{HUB_NAME}"
    shutil.rmtree(work / "build", ignore_errors=True)
    return out


def _hub_cache(work: Path, jsonl: Path) -> None:
    """`bench/rows` in a private datasets cache, laid out as a first online load leaves it (read offline)."""
    from datasets.data_files import DataFilesDict
    from datasets.packaged_modules.json.json import Json

    cache = work / "hf" / "datasets"
    ns, name = HUB_NAME.split("/")
    b = Json(cache_dir=str(cache), dataset_name=name, hash="0" * 16,
             data_files=DataFilesDict.from_patterns({"train": [str(jsonl)]}))  # fmt: skip
    b.download_and_prepare()
    (config_dir,) = (cache / name).iterdir()
    shutil.move(cache / name, cache / f"{ns}___{name}")
    (cache / f"{ns}___{name}" / config_dir.name).rename(cache / f"{ns}___{name}" / "default")


def hf_env(work: Path) -> dict[str, str]:
    return {"HF_HOME": str(work / "hf"), "HF_DATASETS_CACHE": str(work / "hf" / "datasets"), "HF_HUB_OFFLINE": "1"}


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as fp:
        for line in fp:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise KeyError(field)


def _base_mb() -> float:
    """RSS now, with the peak reset to it (so the peak reported after is that of what follows)."""
    with open("/proc/self/clear_refs", "w") as fp:
        fp.write("5")  # resets VmHWM (Linux >= 4.0)
    return _status_mb("VmRSS")


def _rss_mb() -> float:
    """Peak RSS since the last `_base_mb` (VmHWM)."""
    return _status_mb("VmHWM")


def child(fmt: str, source: str, work: Path) -> dict:
    """One format: planned and dispatched in this process."""
    if fmt == "floor":
        base = _base_mb()
        t0 = time.process_time()
        n = 0
        with open(source, "rb") as fp:
            for line in fp:
                json.loads(line)
                n += 1
        return {"rows": n, "base_mb": base, "peak_mb": _rss_mb(), "plan_s": time.process_time() - t0, "dispatch_s": 0}
    from bench.common import compose
    from hermes_runner.run.plan import make_plan, pending
    from hermes_runner.rundir.store import LedgerState

    run_dir = work / f"run-{fmt}"
    run_dir.mkdir(exist_ok=True)
    cfg = compose(["model=local_server", "model.base_url=http://127.0.0.1:9/v1", f"dataset_file={source}",
                   f"run_name={fmt}", "progress=false"])  # fmt: skip
    state = LedgerState()
    base = _base_mb()
    t0 = time.process_time()  # CPU seconds: other work on the machine does not blur them as much as wall time
    plan = make_plan(cfg, state, run_dir)
    t1 = time.process_time()
    n = sum(1 for _ in pending(cfg, state, 0))
    t2 = time.process_time()
    assert n == plan.to_run == plan.total, (n, plan)
    return {"rows": n, "base_mb": base, "peak_mb": _rss_mb(), "plan_s": t1 - t0, "dispatch_s": t2 - t1}


def measure(fmt: str, source: str, work: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(hf_env(work) if fmt == "hf" else {})}
    res = subprocess.run(
        [PY, "-m", "bench.dataset_formats", "--child", fmt, source, "--workdir", str(work)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    if res.returncode != 0:
        raise SystemExit(f"{fmt}: exit {res.returncode}\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--formats", default=",".join(FORMATS), help="comma list of " + ", ".join(FORMATS))
    ap.add_argument("--workdir", type=Path, default=None, help="where the datasets are written (default: temp)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--child", nargs=2, metavar=("FORMAT", "SOURCE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.workdir)))
        return 0
    work = args.workdir or Path(tempfile.mkdtemp(prefix="hermes-bench-ds-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"dataset formats: {args.rows:,} rows, {os.cpu_count()} CPUs, work dir {work}", flush=True)
    t0 = time.perf_counter()
    sources = write_all(work, args.rows)
    print(f"written in {time.perf_counter() - t0:.0f}s", flush=True)
    formats = ["floor", *[f for f in args.formats.split(",") if f]]
    if "jsonl" not in formats:
        formats.insert(1, "jsonl")
    results = {f: measure(f, sources["jsonl"] if f == "floor" else sources[f], work) for f in formats}
    ref = results["jsonl"]
    print(f"{'format':<13}{'rows':>10}{'base MB':>9}{'peak MB':>9}{'plan cpu s':>11}{'dispatch cpu s':>15}"
          f"{'peak/jsonl':>11}{'Δpeak/Δjsonl':>13}{'cpu/jsonl':>11}")  # fmt: skip
    for f, r in results.items():
        grow, ref_grow = r["peak_mb"] - r["base_mb"], ref["peak_mb"] - ref["base_mb"]
        took, ref_took = r["plan_s"] + r["dispatch_s"], ref["plan_s"] + ref["dispatch_s"]
        print(f"{f:<13}{r['rows']:>10,}{r['base_mb']:>9.0f}{r['peak_mb']:>9.0f}{r['plan_s']:>11.1f}"
              f"{r['dispatch_s']:>15.1f}{r['peak_mb'] / ref['peak_mb']:>11.2f}{grow / ref_grow:>13.2f}"
              f"{took / ref_took:>11.2f}")  # fmt: skip
    print("base: RSS before planning (imports, config); Δpeak: what planning and dispatching add to it")
    if args.json:
        args.json.write_text(json.dumps({"rows": args.rows, "results": results}, indent=2))
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

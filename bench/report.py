"""How long report.html takes for a big run, and how big it gets.

    python -m bench.report [--prompts 20000]

Builds a synthetic run directory by replicating the trajectories of a small real scripted run
(tests/helpers/sample_run.py) under new keys, then times `build_report` against an ideal measured in
the same process: reading and JSON-parsing the ledger plus the embedded trajectories, which any
report has to do at least.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hermes_runner.report.page import build_report  # noqa: E402
from hermes_runner.report.viewer import MAX_TRAJECTORIES  # noqa: E402
from hermes_runner.rundir.reader import RunData  # noqa: E402
from hermes_runner.rundir.store import dumps_line  # noqa: E402
from hermes_runner.testing.scripted_server import ScriptedServer  # noqa: E402

from tests.helpers.sample_run import make_run  # noqa: E402


def big_run(base: Path, prompts: int) -> tuple[Path, Path]:
    """The scripted sample run (tests/helpers/sample_run.py) under `base` and its copy blown up to `prompts`
    prompts: (sample, big)."""
    server = ScriptedServer().start()
    try:
        sample = make_run(server, base / "sample")
    finally:
        server.stop()
    blow_up(sample, base / "big", prompts)
    return sample, base / "big"


def blow_up(src: Path, dst: Path, prompts: int) -> None:
    """A run dir of `prompts` prompts made of copies of `src`'s entries."""
    dst.mkdir(parents=True)
    shutil.copy(src / "run.json", dst / "run.json")
    ledger = [json.loads(line) for line in (src / "ledger.jsonl").read_text().splitlines()]
    files: dict[str, object] = {}
    out_ledger = (dst / "ledger.jsonl").open("wb")
    n = 0
    while n < prompts:
        for rec in ledger:
            if n >= prompts:
                break
            rec = dict(rec, key=f"{rec['key']}-{n}", index=n)
            if rec["status"] in ("ok", "discarded"):
                raw = (src / rec["file"]).read_bytes()[rec["offset"] : rec["offset"] + rec["length"]]
                name = "discarded.jsonl" if rec["status"] == "discarded" else f"batch_{n // 1000}.jsonl"
                fp = files.get(name) or files.setdefault(name, (dst / name).open("wb"))
                rec.update(file=name, offset=fp.tell(), length=len(raw), batch=n // 1000)
                fp.write(raw)
            out_ledger.write(dumps_line(rec))
            n += 1
    out_ledger.close()
    for fp in files.values():
        fp.close()


def ideal(run_dir: Path) -> float:
    started = time.perf_counter()
    run = RunData.load(run_dir)
    keys = list(run.refs)[:MAX_TRAJECTORIES]
    for _ in run.entries(keys):
        pass
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=20000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        _, big = big_run(Path(tmp), args.prompts)
        ideal_s = min(ideal(big) for _ in range(3))
        runs = []
        for _ in range(3):
            started = time.perf_counter()
            page = build_report(big)
            runs.append(time.perf_counter() - started)
        took = min(runs)
        size = page.stat().st_size
        print(f"prompts: {args.prompts:,}  ledger: {(big / 'ledger.jsonl').stat().st_size / 1e6:.1f} MB")
        print(
            f"report:  {took:.2f}s  ideal (read ledger + embedded entries): {ideal_s:.2f}s  ratio {took / ideal_s:.1f}x"
        )
        print(f"size:    {size / 1e6:.2f} MB ({MAX_TRAJECTORIES} trajectories embedded)")


if __name__ == "__main__":
    main()

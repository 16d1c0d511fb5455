"""Run a Python entry point in this process and write its resource usage to a JSON file at exit.

    python -m bench.probe OUT.json run.py key=value ...        # the CLI, as a user runs it
    python -m bench.probe OUT.json --prepare CFG.json          # only Run.prepare() (ledger load + plan)

CPU is split into this process's own (RUSAGE_SELF: the runner, all its threads) and its
waited-for children (RUSAGE_CHILDREN: sandbox commands, bubblewrap).
"""

from __future__ import annotations

import atexit
import json
import resource
import runpy
import sys
import time

T0 = time.monotonic()


def usage() -> dict:
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "cpu_self_s": s.ru_utime + s.ru_stime,
        "cpu_children_s": c.ru_utime + c.ru_stime,
        "maxrss_mb": s.ru_maxrss / 1024,
        "elapsed_s": time.monotonic() - T0,
    }


def prepare(cfg_path: str) -> dict:
    """Time Run.prepare() alone, with the config composed beforehand."""
    from pathlib import Path

    from bench.common import compose
    from hermes_runner.run.invocation import Run

    spec = json.loads(Path(cfg_path).read_text())
    cfg = compose(spec["overrides"])
    base = usage()
    run = Run(cfg, Path(spec["run_dir"]))
    t = time.perf_counter()
    plan = run.prepare()
    took = time.perf_counter() - t
    return {
        "prepare_s": took,
        "rss_before_mb": base["maxrss_mb"],
        "plan": {"total": plan.total, "done": plan.done, "to_run": plan.to_run, "rejected": plan.rejected},
    }


def main() -> None:
    out, target, *rest = sys.argv[1:]
    extra: dict = {}

    def report() -> None:
        with open(out, "w") as fp:
            json.dump({**usage(), **extra}, fp)

    atexit.register(report)
    if target == "--prepare":
        extra.update(prepare(rest[0]))
        return
    sys.argv = [target, *rest]
    runpy.run_path(target, run_name="__main__")


if __name__ == "__main__":
    main()

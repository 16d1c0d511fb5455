"""Throughput of a run that feeds an Atropos trainer (feed=atropos) against the same run in batch mode, at the
same number of sessions: the cost of registering, asking /status-env before each prompt and pushing each group.

    python -m bench.feed                            # 100 rows x 4 samples, 16 sessions, 3 rounds
    python -m bench.feed --rows 50 --rounds 1

Both modes run `run.py` with output.tokens=true and samples_per_prompt=4 against the scripted server (its own
process), as bench.throughput runs it; the feed runs against Atropos' real API server (`run-api` from the
consumer venv `atropos`: scripts/consumer_venvs.sh) with a trainer that registers a batch of 4 groups and pulls
batches as fast as they come, so the hold (feed.max_batches_offpolicy=1) is part of the measure. The table gives
each mode's wall seconds and trajectories per second, and the ratio feed/batch of the throughputs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ScriptedServerProcess  # noqa: E402
from bench.throughput import run_level  # noqa: E402

from tests.helpers.atropos import Trainer, api_server  # noqa: E402

SAMPLES = 4
LONG = 65536  # the byte tokenizer's sequences are ~7000 ids: every group fits


def _fed(server: ScriptedServerProcess, work: Path, args: argparse.Namespace, tag: str) -> tuple[float, int, int]:
    """One feed=atropos run: (wall seconds, trajectories ok, sequences the trainer pulled)."""
    with api_server(work / f"api{tag}.log") as url:
        trainer, pulled, stop = Trainer(url, batch_size=SAMPLES * 4, max_token_len=LONG), [], threading.Event()

        def pull() -> None:
            while not stop.is_set():
                batch = trainer.pull()
                pulled.extend(len(g["tokens"]) for g in batch)
                stop.wait(0 if batch else 0.01)  # (not a busy loop on the server's CPU)

        puller = threading.Thread(target=pull, daemon=True)
        puller.start()
        extra = ["feed=atropos", f"feed.url={url}", "feed.poll_interval_s=0.02", f"feed.max_token_len={LONG}"]
        extra.append(f"samples_per_prompt={SAMPLES}")
        try:
            r = run_level(server, work, args.workers, args.rows, False, "none", extra, f"-feed{tag}")
        finally:
            stop.set()
            puller.join(30)
    return r.wall_s, r.ok if r.exit_code == 0 else -1, sum(pulled)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=16)
    args = ap.parse_args(argv)
    n = args.rows * SAMPLES
    batch: list[float] = []
    fed: list[float] = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-feed-") as tmp,
        ScriptedServerProcess(0.0, Path(tmp) / "s.log") as server,
    ):
        work = Path(tmp)
        for i in range(args.rounds):
            for feed in (False, True) if i % 2 == 0 else (True, False):
                if feed:
                    wall, ok, pulled = _fed(server, work, args, str(i))
                else:
                    extra = ["output.tokens=true", f"samples_per_prompt={SAMPLES}"]
                    r = run_level(server, work, args.workers, args.rows, False, "none", extra, f"-batch{i}")
                    wall, ok, pulled = r.wall_s, (r.ok if r.exit_code == 0 else -1), n
                if ok != n or pulled < n - n % (SAMPLES * 4):  # (the trainer pulls whole batches only)
                    print(f"round {i} feed={feed}: {ok}/{n} ok, {pulled} sequences pulled (see {work})")
                    return 1
                (fed if feed else batch).append(wall)
    b, f = statistics.median(batch), statistics.median(fed)
    print(f"{'mode':>6} {'wall s (median of ' + str(args.rounds) + ')':>24} {'trajectories/s':>15}")
    print(f"{'batch':>6} {b:>24.2f} {n / b:>15.1f}")
    print(f"{'feed':>6} {f:>24.2f} {n / f:>15.1f}")
    print(f"throughput ratio feed/batch: {b / f:.3f} ({args.workers} sessions, {args.rows} rows x {SAMPLES} samples)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

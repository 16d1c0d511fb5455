"""The runner's CPU per trajectory with output.tokens=true against without: the cost of asking for, reading,
checking and storing every call's token ids and logprobs.

    python -m bench.tokens_overhead                 # 300 prompts x 3 rounds, 16 sessions
    python -m bench.tokens_overhead --prompts 100 --rounds 1

The scripted server (its own process; CPU not counted) answers every call of the default 2-call agent
(a `terminal` call, then an answer) and, asked for them, returns vLLM's `prompt_token_ids`, `token_ids` and
`logprobs` from a byte tokenizer of the ChatML prompt: one id per byte, about 4 times the ids a real
tokenizer gives, so the figure is an upper bound. Each round runs `run.py` once without and once with
output.tokens=true (the order alternating), as bench.throughput runs it, and the table gives the runner's own
CPU ms per trajectory and their ratio (the target: at most 1.10).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from bench.common import ScriptedServerProcess
from bench.throughput import run_level

TARGET_RATIO = 1.10


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=16)
    args = ap.parse_args(argv)
    off: list[float] = []
    on: list[float] = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-tokens-") as tmp,
        ScriptedServerProcess(0.0, Path(tmp) / "s.log") as server,
    ):
        work = Path(tmp)
        for i in range(args.rounds):
            for tokens in (False, True) if i % 2 == 0 else (True, False):
                extra = ["output.tokens=true"] if tokens else []
                r = run_level(
                    server, work, args.workers, args.prompts, False, "none", extra, f"-tokens{int(tokens)}-{i}"
                )
                if r.exit_code != 0 or r.ok != args.prompts:
                    print(f"round {i} tokens={tokens}: exit {r.exit_code}, {r.ok}/{args.prompts} ok (see {work})")
                    return 1
                (on if tokens else off).append(r.cpu_ms)
    ratio = statistics.median(on) / statistics.median(off)
    print(f"{'output.tokens':>13} {'runner CPU ms/trajectory (median of ' + str(args.rounds) + ')':>44}")
    print(f"{'off':>13} {statistics.median(off):>44.2f}")
    print(f"{'on':>13} {statistics.median(on):>44.2f}")
    verdict = "ok" if ratio <= TARGET_RATIO else "over the target"
    print(f"ratio on/off: {ratio:.3f} (target <= {TARGET_RATIO}: {verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

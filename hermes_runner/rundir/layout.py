"""Every file name of a run directory, in one place (the modules that write or read them import them from here)."""

from __future__ import annotations

import re

# The ledger and its side logs (rundir/store.py)
LEDGER = "ledger.jsonl"
DISCARDED = "discarded.jsonl"
FAILURES = "failures.jsonl"
USAGE = "usage.jsonl"
RESCORED = "rescored.jsonl"  # entries re-scored by `hermes-score` (each pointed at by a `rescored` record)
TIMELINE = "timeline.jsonl"  # every prompt attempt's model and tool calls, timed (read by the report)
# output.tokens: every prompt attempt's token ids and logprobs per assistant turn, keyed like the ledger
# ({key, inv, turns, drift}; trajectory/tokens.py)
TOKENS = "tokens/turns.jsonl"
# feed=atropos: every group pushed to the trainer, its intent before the push and its acknowledgement after
# ({group, state: intent|pushed|skipped, ...}; run/feed.py)
FEED = "feed.jsonl"
# model.batch.enabled: every provider batch sent, its requests' keys, each reply fetched (model/batch_journal.py)
BATCH_JOURNAL = "provider_batches.jsonl"
BATCH_RE = re.compile(r"^batch_(\d+)\.jsonl$")  # batch files of a hermes-agent run dir
BATCH_GLOB = "batch_*.jsonl"
BATCH_FILE = "batch_{}.jsonl"  # .format(batch number)
LOCK = ".lock"  # held by the one invocation that owns the run dir
HYDRA_DIR = ".hydra"  # the composed config, Hydra's, the overrides: written on accepting the run dir (commands/job)

# The manifest and the invocations log (rundir/manifest.py)
MANIFEST = "run.json"
INVOCATIONS = "invocations.jsonl"
HASHES = "hashes.jsonl"  # hash -> what it stands for, of facts recorded by hash (the scorers of a hermes-score pass)

# The outputs rebuilt from the ledger at the end of each invocation
CHECKPOINT = "checkpoint.json"
TRAJECTORIES = "trajectories.jsonl"
STATISTICS = "statistics.json"
FEATURES_FILE = "dataset_features.json"  # the datasets.Features of trajectories.jsonl
REJECTED = "rejected.jsonl"  # dataset lines that were not a valid prompt (plan.py)
MERGED = "merged.json"  # what a merged run dir was merged from (rundir/merge.py)
REPORT = "report.html"  # the report page (report/page.py)
JOBS_INDEX = "jobs.jsonl"  # a sweep dir's index of its jobs: dir, overrides, status (rundir/sweep.py)

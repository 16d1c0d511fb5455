"""Planning a run: which prompts of the dataset are done, which run (and in which batch), which images they need."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hermes_runner.config.root import RunConfig
from hermes_runner.dataset import Prompt, Rejected, read_prompts
from hermes_runner.errors import ENDPOINT_DOWN_ERRORS, ConfigError
from hermes_runner.rundir.layout import REJECTED
from hermes_runner.rundir.manifest import now
from hermes_runner.rundir.store import CHANGED, LedgerState, Ref, atomic_write, dumps_line

log = logging.getLogger(__name__)


@dataclass
class Plan:
    total: int = 0  # prompts in scope: good rows x samples_per_prompt
    done: int = 0  # already ok or discarded
    retry: int = 0  # failed before, to run again
    skipped_failed: int = 0  # failed before, left alone (retry_failed=false)
    to_run: int = 0
    rejected: int = 0
    changed: int = 0  # finished prompts whose row changed since (same id): kept, and noted in the ledger
    images: Counter = field(default_factory=Counter)
    chars_to_run: int = 0  # characters of the prompts to run (the dry run's estimate)
    current_index: dict[str, int] = field(default_factory=dict)  # recorded (terminal or failed) key -> index now


def _rows(cfg: RunConfig, on_reject=None) -> Iterator[Prompt]:
    """The rows in scope, streamed (each as its sample 0)."""
    return read_prompts(
        cfg.dataset_file,
        options=cfg.dataset,
        max_samples=cfg.max_samples,
        shard_index=cfg.shard.index,
        shard_count=cfg.shard.count,
        on_reject=on_reject,
    )


def recorded_samples(state: LedgerState) -> dict[str, list[int]]:
    """Row key -> the samples of it the ledger records (finished or failed): the plan counts the others
    without making them (samples_per_prompt may be huge)."""
    out: dict[str, list[int]] = {}
    for key in (*state.terminal, *state.failed):
        row, sep, sample = key.partition("~s")
        out.setdefault(row, []).append(int(sample) if sep and sample.isdigit() else 0)
    return out


def make_plan(cfg: RunConfig, state: LedgerState, run_dir: Path, note: Callable[[dict], None] | None = None) -> Plan:
    """First pass over the dataset: what is done, what runs, which images are needed. `note` gets a
    ledger note for each finished prompt whose row changed since it ran (rows with ids; None: dry run).

    Samples are counted, not made: a row's samples the ledger does not record are `samples_per_prompt`
    minus those it does, whatever k is."""
    plan = Plan()
    rejected: list[bytes] = []
    k = cfg.samples_per_prompt
    recorded = recorded_samples(state)

    def on_reject(r: Rejected) -> None:
        plan.rejected += 1
        log.warning("%s %s %d rejected: %s", cfg.dataset_file, r.unit, r.line, r.reason)
        rejected.append(dumps_line({r.unit: r.line, "reason": r.reason, "text": r.text}))

    for row in _rows(cfg, on_reject):
        plan.total += k
        samples = sorted({s for s in recorded.get(row.key, ()) if s < k})
        new = k - len(samples)
        for sample in samples:
            p = row.for_sample(sample)
            plan.current_index[p.key] = p.index
            if p.key in state.terminal:
                plan.done += 1
                _check_changed(cfg, plan, state.terminal[p.key], p, note)
                continue
            if _left_alone(cfg, state.failed[p.key]):
                plan.skipped_failed += 1
                continue
            plan.retry += 1
            new += 1
        plan.to_run += new
        plan.chars_to_run += new * len(row.prompt)
        image = row.image or cfg.sandbox.image
        if image and new:
            plan.images[image] += new
    atomic_write(run_dir / REJECTED, b"".join(rejected))
    if plan.changed:
        log.warning(
            "%d finished prompts of %s have rows that changed since they ran (same %s): their trajectories are "
            "kept as they ran (not run again); ledger.jsonl notes each (status %r)",
            plan.changed, cfg.dataset_file, f"dataset.fields.id {cfg.dataset.fields.id!r}", CHANGED,
        )  # fmt: skip
    if plan.total == 0:
        raise ConfigError(
            f"{cfg.dataset_file} has no usable prompt"
            + (f" ({plan.rejected} bad lines, see {run_dir / REJECTED})" if plan.rejected else "")
        )
    return plan


def pending(cfg: RunConfig, state: LedgerState, first_batch: int) -> Iterator[tuple[Prompt, int]]:
    """Second pass: the prompts to run, each with the batch file it belongs to, made one at a time."""
    i = 0
    for row in _rows(cfg):
        for sample in range(cfg.samples_per_prompt):
            p = row.for_sample(sample)
            if p.key in state.terminal or (p.key in state.failed and _left_alone(cfg, state.failed[p.key])):
                continue
            yield p, first_batch + i // cfg.batch_size
            i += 1


def _check_changed(cfg: RunConfig, plan: Plan, ref: Ref, p: Prompt, note: Callable[[dict], None] | None) -> None:
    """A finished prompt whose row (same id) now gives the model something else: counted, and noted once."""
    if not p.digest or p.digest == ref.digest or not ref.digest:
        return
    plan.changed += 1
    if plan.changed <= 3:
        log.info("prompt %d (id key %s) changed since it ran: now %r", p.index, p.key, p.prompt[:80])
    if note is not None:
        note(
            {"key": p.key, "index": p.index, "ts": now(), "what": "prompt", "was": ref.digest, "digest": p.digest,
             "prompt": p.prompt[:200]}
        )  # fmt: skip
        ref.digest = p.digest


def _left_alone(cfg: RunConfig, failure: dict) -> bool:
    """A failed prompt is not run again with retry_failed=false, unless the endpoint was down (it never ran)."""
    return not cfg.retry_failed and failure.get("error_type") not in ENDPOINT_DOWN_ERRORS

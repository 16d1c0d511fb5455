"""Planning a run: which prompts of the dataset are done, which run (and in which batch), which images they need."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hermes_runner.config import RunConfig
from hermes_runner.dataset import Prompt, Rejected, read_prompts
from hermes_runner.errors import ENDPOINT_DOWN_ERRORS, ConfigError
from hermes_runner.rundir.layout import REJECTED
from hermes_runner.rundir.store import LedgerState, atomic_write, dumps_line

log = logging.getLogger(__name__)


@dataclass
class Plan:
    total: int = 0  # good rows in scope
    done: int = 0  # already ok or discarded
    retry: int = 0  # failed before, to run again
    skipped_failed: int = 0  # failed before, left alone (retry_failed=false)
    to_run: int = 0
    rejected: int = 0
    images: Counter = field(default_factory=Counter)
    current_index: dict[str, int] = field(default_factory=dict)  # recorded (terminal or failed) key -> index now


def _prompts(cfg: RunConfig, on_reject=None) -> Iterator[Prompt]:
    return read_prompts(
        cfg.dataset_file,
        max_samples=cfg.max_samples,
        shard_index=cfg.shard.index,
        shard_count=cfg.shard.count,
        on_reject=on_reject,
    )


def make_plan(cfg: RunConfig, state: LedgerState, run_dir: Path) -> Plan:
    """First pass over the dataset: what is done, what runs, which images are needed."""
    plan = Plan()
    rejected: list[bytes] = []

    def on_reject(r: Rejected) -> None:
        plan.rejected += 1
        log.warning("%s line %d rejected: %s", cfg.dataset_file, r.line, r.reason)
        rejected.append(dumps_line({"line": r.line, "reason": r.reason, "text": r.text}))

    for p in _prompts(cfg, on_reject):
        plan.total += 1
        if p.key in state.terminal:
            plan.done += 1
            plan.current_index[p.key] = p.index
            continue
        if p.key in state.failed:
            plan.current_index[p.key] = p.index
            if _left_alone(cfg, state.failed[p.key]):
                plan.skipped_failed += 1
                continue
            plan.retry += 1
        plan.to_run += 1
        image = p.image or cfg.sandbox.image
        if image:
            plan.images[image] += 1
    atomic_write(run_dir / REJECTED, b"".join(rejected))
    if plan.total == 0:
        raise ConfigError(
            f"{cfg.dataset_file} has no usable prompt"
            + (f" ({plan.rejected} bad lines, see {run_dir / REJECTED})" if plan.rejected else "")
        )
    return plan


def pending(cfg: RunConfig, state: LedgerState, first_batch: int) -> Iterator[tuple[Prompt, int]]:
    """Second pass: the prompts to run, each with the batch file it belongs to."""
    i = 0
    for p in _prompts(cfg):
        if p.key in state.terminal or (p.key in state.failed and _left_alone(cfg, state.failed[p.key])):
            continue
        yield p, first_batch + i // cfg.batch_size
        i += 1


def _left_alone(cfg: RunConfig, failure: dict) -> bool:
    """A failed prompt is not run again with retry_failed=false, unless the endpoint was down (it never ran)."""
    return not cfg.retry_failed and failure.get("error_type") not in ENDPOINT_DOWN_ERRORS

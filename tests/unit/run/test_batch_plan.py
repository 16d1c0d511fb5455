"""Batch mode's config rules and its dry-run plan: rounds x batches, hours at the stated turnaround, the saving."""

from __future__ import annotations

import pytest

from hermes_runner.config import BatchConfig, ExecutorConfig, PriceConfig, check
from hermes_runner.errors import ConfigError
from hermes_runner.run.estimate import Estimate, batch_plan

from tests.helpers.inprocess import run_cfg


def batch_cfg(tmp_path, **values):
    cfg = run_cfg(tmp_path, **values)
    cfg.model.batch = BatchConfig(enabled=True, max_requests=300, turnaround_h=2.0)
    cfg.model.price = PriceConfig(prompt_per_mtok=2.0, completion_per_mtok=8.0)
    return cfg


def test_the_plan_counts_rounds_batches_hours_and_the_saving(tmp_path):
    cfg = batch_cfg(tmp_path, num_workers=500, max_turns=3)
    plan = batch_plan(cfg, Estimate(1000, 1000, 3000, 0, 0, 1.0, 3.0))
    assert "2-6 rounds (turns x 2 waves of 500 sessions) x 2 batches of up to 300 requests" in plan
    assert "~4-12 h at model.batch.turnaround_h=2 h a round" in plan
    assert "cost at the batch price (x0.5): $0.5000-$1.5000, saving $0.5000-$1.5000 against direct calls" in plan


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"executor": ExecutorConfig(backend="ray")}, "needs every session in one process"),
        ({"executor": ExecutorConfig(processes=4)}, "executor.processes=4"),
    ],
)
def test_batch_mode_needs_every_session_in_one_process(tmp_path, change, said):
    with pytest.raises(ConfigError, match=said):
        check(batch_cfg(tmp_path, **change))


def test_batch_mode_sends_no_streams(tmp_path):
    cfg = batch_cfg(tmp_path)
    cfg.model.stream = True
    with pytest.raises(ConfigError, match="sends no streams: set model.stream=false"):
        check(cfg)
    cfg.model.stream = False
    check(cfg)

"""Planning (issue 29): samples are counted, not made (samples_per_prompt=10**9 plans at once, and the run
streams its prompts), and a dataset whose ids repeat is refused before anything is written."""

from __future__ import annotations

import itertools

import pytest

from hermes_runner.config import DatasetConfig, DatasetFields
from hermes_runner.dataset import read_prompts
from hermes_runner.errors import ConfigError
from hermes_runner.run.plan import make_plan, pending
from hermes_runner.rundir.store import LedgerState, Ref

from tests.helpers.inprocess import run_cfg
from tests.helpers.run import write_jsonl

HUGE = 10**9


def cfg_for(tmp_path, rows: list, **values):
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = run_cfg(tmp_path, **values)
    cfg.dataset_file = str(ds)
    return cfg


@pytest.mark.timeout(60)  # (making 10**9 samples would take hours)
def test_a_huge_samples_per_prompt_is_counted_not_made(tmp_path):
    cfg = cfg_for(tmp_path, [{"prompt": "abc", "image": "img"}, {"prompt": "de"}], samples_per_prompt=HUGE)
    plan = make_plan(cfg, LedgerState(), tmp_path)
    assert (plan.total, plan.to_run, plan.done) == (2 * HUGE, 2 * HUGE, 0)
    assert plan.chars_to_run == 5 * HUGE and plan.images == {"img": HUGE}
    first = list(itertools.islice(pending(cfg, LedgerState(), 0), 3))  # the run's prompts: one at a time
    assert [p.sample for p, _ in first] == [0, 1, 2] and first[1][0].key.endswith("~s1")


def test_counting_gives_what_making_every_sample_gave(tmp_path):
    cfg = cfg_for(tmp_path, [{"prompt": f"p{i}"} for i in range(3)], samples_per_prompt=4, retry_failed=False)
    rows = list(read_prompts(cfg.dataset_file))
    keys = [r.for_sample(s).key for r in rows for s in range(4)]
    state = LedgerState()
    for n, key in enumerate(keys[:6]):  # samples 0-3 of row 0, 0-1 of row 1: finished, or failed
        if n % 2:
            state.failed[key] = {"key": key, "error_type": "ModelCallError"}
        else:
            state.terminal[key] = Ref("ok", "batch_0.jsonl", 0, 1, n // 4, 0, "", n % 4)
    state.terminal["gone-0~s2"] = Ref("ok", "batch_0.jsonl", 0, 1, 9, 0)  # a row no longer in the dataset
    plan = make_plan(cfg, state, tmp_path)
    assert (plan.total, plan.done, plan.skipped_failed, plan.retry, plan.to_run) == (12, 3, 3, 0, 6)
    assert sorted(plan.current_index) == sorted(keys[:6])
    assert [p.key for p, _ in pending(cfg, state, 0)] == keys[6:]
    cfg.retry_failed = True
    plan = make_plan(cfg, state, tmp_path)
    assert (plan.done, plan.skipped_failed, plan.retry, plan.to_run) == (3, 0, 3, 9)
    assert [p.key for p, _ in pending(cfg, state, 0)] == [k for k in keys if k not in state.terminal]


def test_a_repeated_id_refuses_the_plan_before_anything_is_written(tmp_path):
    cfg = cfg_for(tmp_path, [{"id": 1, "prompt": "a"}, "not json", {"id": 1, "prompt": "b"}])
    cfg.dataset = DatasetConfig(fields=DatasetFields(id="id"))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with pytest.raises(ConfigError, match=r"'id' is 1 in line 1 and in line 3"):
        make_plan(cfg, LedgerState(), run_dir)
    assert list(run_dir.iterdir()) == []  # (not even rejected.jsonl for the bad line)

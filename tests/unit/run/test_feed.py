"""feed=atropos's pure parts: the scored group of a row's samples and feed.jsonl's intents and acknowledgements."""

from __future__ import annotations

import pytest

from hermes_runner.config import FeedKind, check
from hermes_runner.errors import ConfigError
from hermes_runner.run.feed import MASKED_LOGPROB, FeedLog, digest, scored_group
from hermes_runner.trajectory.tokens import IGNORE_INDEX

from tests.helpers.run import compose_cfg

END = 99
# turn 0: prompt [1, 2], samples [5, 6, END]; turn 1's prompt re-renders it with a separator 7 and a tool result 8
T0 = {"turn": 0, "prompt_ids": [1, 2], "completion_ids": [5, 6, END], "logprobs": [-0.1, -0.2, -0.3], "finish": "stop"}
T1 = {
    "turn": 1,
    "prompt_ids": [1, 2, 5, 6, 7, 8],
    "completion_ids": [9, END],
    "logprobs": [-0.4, -0.5],
    "finish": "stop",
}


def test_a_group_carries_each_sample_s_final_sequence_with_atropos_masks_and_logprobs():
    g = scored_group([([T0, T1], 1), ([T0], 0.5)])
    assert g["tokens"] == [[1, 2, 5, 6, 7, 8, 9, END], [1, 2, 5, 6, END]]
    x = IGNORE_INDEX
    assert g["masks"] == [[x, x, 5, 6, x, x, 9, END], [x, x, 5, 6, END]]  # the stop token of turn 0 was re-rendered
    m = MASKED_LOGPROB
    assert g["inference_logprobs"] == [[m, m, -0.1, -0.2, m, m, -0.4, -0.5], [m, m, -0.1, -0.2, -0.3]]
    assert g["scores"] == [1.0, 0.5] and all(isinstance(s, float) for s in g["scores"])


def test_a_drifting_turn_is_masked_not_retokenized():
    drifted = {**T1, "prompt_ids": [1, 2, 5, 7, 8]}  # the history came back without the sampled 6
    g = scored_group([([T0, drifted], 1.0)])
    assert g["masks"] == [[IGNORE_INDEX] * 5 + [9, END]]


def test_the_digest_is_of_tokens_and_scores_whatever_else_the_server_returns():
    g = scored_group([([T0], 1.0)])
    assert digest(g) == digest({**g, "env_id": 3, "messages": None, "advantages": None})
    assert digest(g) != digest({**g, "scores": [0.0]})


def test_feed_log_keeps_an_unacknowledged_intent_pending_and_skips_a_torn_line(tmp_path):
    log = FeedLog(tmp_path)
    log.write("a", "intent", digest="d1")
    log.write("a", "pushed", env_id=0)
    log.write("b", "skipped", why="no token ids")
    log.write("c", "intent", digest="d3")
    with (tmp_path / "feed.jsonl").open("a") as fp:
        fp.write('{"group": "c", "sta')  # a kill mid-line
    again = FeedLog(tmp_path)
    assert again.done == {"a", "b"} and again.pending == {"c": "d3"}


def test_feed_atropos_sets_output_tokens_and_its_url_must_be_http():
    cfg = compose_cfg(["feed=atropos", "run_name=t"])
    assert cfg.output.tokens and cfg.feed.kind == FeedKind.atropos
    assert not compose_cfg(["run_name=t"]).output.tokens  # feed=none: as configured
    with pytest.raises(ConfigError, match=r"feed.url must be an http:// or https:// URL"):
        check(compose_cfg(["feed=atropos", "feed.url=localhost:8000", "run_name=t"]))
    with pytest.raises(ConfigError, match=r"feed=atropos sets output.tokens\) needs model.stream=false"):
        check(compose_cfg(["feed=atropos", "model.stream=true", "run_name=t"]))

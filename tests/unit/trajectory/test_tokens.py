"""The prefix-consistency check and the training rows of token ids (trajectory/tokens.py), by hand."""

from __future__ import annotations

from hermes_runner.trajectory.tokens import IGNORE_INDEX, DriftPolicy, drift, token_rows, training_row

END, SEP = 99, 98  # the engine's stop token; the template's separator that may stand in its place


def turn(n: int, prompt: list[int], completion: list[int], finish: str = "stop", lp: float = -0.5) -> dict:
    logprobs = [lp] * len(completion)
    return {"turn": n, "finish": finish, "prompt_ids": prompt, "completion_ids": completion, "logprobs": logprobs}


# turn 0 samples 5 6 END; the template renders it back as 5 6 SEP, then the tool result 7, the next header 8
T0 = turn(0, [1, 2], [5, 6, END])
T1 = turn(1, [1, 2, 5, 6, SEP, 7, 8], [9, END], lp=-0.1)


def test_a_turn_extends_the_last_one_up_to_its_stop_token():
    assert drift([T0, T1]) == []
    same_stop = turn(1, [1, 2, 5, 6, END, 7, 8], [9, END])  # the template keeps the stop token itself
    assert drift([T0, same_stop]) == []


def test_a_changed_token_of_the_sampled_completion_is_drift():
    resplit = turn(1, [1, 2, 56, SEP, 7, 8], [9, END])  # the history re-tokenized: 5 6 became 56
    edited = turn(2, [1, 2, 56, SEP, 7, 8, 9, SEP, 3], [4, END])
    assert drift([T0, resplit, edited]) == [1]  # turn 2 extends turn 1: only turn 1 drifts
    assert drift([T0, turn(1, [1, 3, 5, 6, SEP], [9])]) == [1]  # the prompt itself changed


def test_a_turn_cut_by_length_keeps_its_last_token():
    cut = turn(0, [1, 2], [5, 6], finish="length")
    assert drift([cut, turn(1, [1, 2, 5, 6, 7], [9])]) == []
    assert drift([cut, turn(1, [1, 2, 5, SEP, 7], [9])]) == [1]  # its last token is no stop token


def test_the_training_row_masks_every_sampled_token_in_place():
    row = training_row([T0, T1])
    assert row["input_ids"] == [1, 2, 5, 6, SEP, 7, 8, 9, END]
    assert row["loss_mask"] == [0, 0, 1, 1, 0, 0, 0, 1, 1]  # the stop token replaced by SEP: no loss there
    assert row["labels"] == [IGNORE_INDEX, IGNORE_INDEX, 5, 6, IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX, 9, END]
    assert row["logprobs"] == [0.0, 0.0, -0.5, -0.5, 0.0, 0.0, 0.0, -0.1, -0.1]
    assert row["attention_mask"] == [1] * 9 and row["masked_turns"] == []


def test_the_training_row_masks_a_turn_whose_tokens_are_not_in_the_final_sequence():
    resplit = turn(1, [1, 2, 56, SEP, 7, 8], [9, END])
    row = training_row([T0, resplit])
    assert row["input_ids"] == [1, 2, 56, SEP, 7, 8, 9, END]
    assert row["loss_mask"] == [0, 0, 0, 0, 0, 0, 1, 1] and row["masked_turns"] == [0]


def test_token_rows_mask_or_drop_drifting_rows_and_count_entries_without_ids():
    good = {"key": "a", "turns": [T0, T1], "drift": []}
    bad = {"key": "b", "turns": [T0, turn(1, [1, 2, 56, SEP], [9, END])], "drift": [1]}
    entries = [{"prompt_index": i, "metadata": {"prompt_key": k}, "reward": 1.0} for i, k in enumerate("abc")]
    rows, counts = token_rows(entries, {"a": good, "b": bad}, DriftPolicy.mask)
    assert [r["prompt_key"] for r in rows] == ["a", "b"] and rows[1]["drift"] == [1]
    assert counts == {"rows": 2, "no_tokens": 1, "drifting": 1, "dropped": 0}
    rows, counts = token_rows(entries, {"a": good, "b": bad}, DriftPolicy.drop)
    assert [r["prompt_key"] for r in rows] == ["a"] and counts["dropped"] == 1

"""Token-level rows for trainers (output.tokens): the prefix-consistency check across turns and the layout
TRL/verl-style trainers read (`input_ids`, `attention_mask`, `labels`, `loss_mask`, `logprobs`).

Each assistant turn n of a trajectory has the prompt ids P(n) and the sampled completion ids C(n) the engine
reported (rundir layout TOKENS). The history is re-rendered and re-tokenized by the engine for every call, so
turn n+1 is *consistent* when its prompt starts with what turn n saw and sampled:

    P(n+1)[: len(P(n)) + len(C'(n))] == P(n) + C'(n)

where C'(n) is C(n) without its last token when turn n ended by a stop (finish_reason other than "length"):
that token is the stop token (end of turn, EOS, the last token of a stop string), which the chat template
may render as its own separator. A turn that is not consistent *drifts*: the text the engine saw again is not
the tokens it sampled (a re-serialized tool call, a stripped space, another BPE split), and a trainer that
re-tokenizes would learn from tokens the policy never produced.

A training row is the last turn's sequence, P(last) + C(last); the loss mask covers each turn's sampled tokens
where they stand in it, so a turn whose tokens are not there (it or a later turn drifted) is masked, never
re-tokenized (`mask`); `drop` leaves a drifting row out.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

IGNORE_INDEX = -100  # labels of the tokens without loss (the value PyTorch's cross entropy ignores)


class DriftPolicy(Enum):
    mask = "mask"  # keep the row; the tokens of turns that are not in the final sequence have no loss
    drop = "drop"  # leave a row with any drifting turn out


def kept_completion(turn: dict) -> list[int]:
    """C'(n): the completion without its stop token (a turn cut by length has none)."""
    ids = turn["completion_ids"]
    return ids if turn.get("finish") == "length" else ids[:-1]


def extends(turn: dict, prompt_ids: Sequence[int]) -> bool:
    """Whether `prompt_ids` starts with the turn's prompt and its sampled completion (up to the stop token)."""
    head = [*turn["prompt_ids"], *kept_completion(turn)]
    return list(prompt_ids[: len(head)]) == head


def drift(turns: list[dict]) -> list[int]:
    """The turns (their `turn` ordinals) whose prompt does not extend the previous turn's prompt and completion."""
    return [cur["turn"] for prev, cur in zip(turns, turns[1:], strict=False) if not extends(prev, cur["prompt_ids"])]


def training_row(turns: list[dict]) -> dict:
    """input_ids, attention_mask, labels, loss_mask (1 on sampled tokens found in place) and logprobs (the
    engine's, 0.0 without loss) of the final sequence, and `masked_turns`: the turns whose tokens are not in it."""
    last = turns[-1]
    input_ids = [*last["prompt_ids"], *last["completion_ids"]]
    loss_mask, logprobs, masked = [0] * len(input_ids), [0.0] * len(input_ids), []
    for t in turns:
        start, ids = len(t["prompt_ids"]), t["completion_ids"]
        if input_ids[:start] != t["prompt_ids"] or not extends(t, input_ids):
            masked.append(t["turn"])
            continue
        n = len(ids) if input_ids[start : start + len(ids)] == ids else len(kept_completion(t))
        lp = t.get("logprobs") or [0.0] * len(ids)
        loss_mask[start : start + n] = [1] * n
        logprobs[start : start + n] = lp[:n]
    labels = [i if m else IGNORE_INDEX for i, m in zip(input_ids, loss_mask, strict=True)]
    return {
        "input_ids": input_ids,
        "attention_mask": [1] * len(input_ids),
        "labels": labels,
        "loss_mask": loss_mask,
        "logprobs": logprobs,
        "masked_turns": masked,
    }


def token_rows(entries: list[dict], sidecar: dict[str, dict], policy: DriftPolicy) -> tuple[list[dict], dict]:
    """The training rows of the entries whose prompt has token ids (`sidecar`: prompt key -> its record), and
    the counts: rows written, `no_tokens` (entries without ids), `drifting` (rows with a drifting turn),
    `dropped` (those left out by `drop`)."""
    rows, counts = [], {"rows": 0, "no_tokens": 0, "drifting": 0, "dropped": 0}
    for e in entries:
        meta = e.get("metadata") or {}
        rec = sidecar.get(str(meta.get("prompt_key") or ""))
        if rec is None or not rec.get("turns"):
            counts["no_tokens"] += 1
            continue
        if rec.get("drift"):
            counts["drifting"] += 1
            if policy == DriftPolicy.drop:
                counts["dropped"] += 1
                continue
        row = training_row(rec["turns"])
        rows.append(
            {"prompt_key": rec["key"], "prompt_index": e.get("prompt_index"), "reward": e.get("reward", 0.0),
             "drift": rec.get("drift") or [], **row}
        )  # fmt: skip
    counts["rows"] = len(rows)
    return rows, counts

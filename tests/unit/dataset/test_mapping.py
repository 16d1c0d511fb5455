"""dataset/mapping: from a row's columns to a prompt (fields, template, message lists) or the reason it is refused."""

from __future__ import annotations

import pytest

from hermes_runner.config import DatasetConfig, DatasetFields
from hermes_runner.dataset.mapping import Mapping, RowError


def prompt(row: dict, **opts):
    m = Mapping(DatasetConfig(**opts))
    return m.prompt(row, 0, m.base_key(row))


def test_the_default_columns_and_the_rest_of_the_row_as_its_fields():
    p = prompt({"prompt": "fix it", "docker_image": "img:1", "target": 42, "level": 3})
    assert (p.prompt, p.image, p.target, p.fields) == ("fix it", "img:1", "42", {"target": 42, "level": 3})


def test_named_columns_and_an_id_that_makes_the_identity():
    opts = {"fields": DatasetFields(prompt="question", id="qid", target="answer")}
    a = prompt({"qid": "q1", "question": "2+2?", "answer": "4"}, **opts)
    b = prompt({"qid": "q1", "question": "2+2, again?", "answer": "4"}, **opts)
    assert a.prompt == "2+2?" and a.target == "4" and a.key == b.key and a.digest != b.digest
    with pytest.raises(RowError, match="missing 'qid'"):
        prompt({"question": "x"}, **opts)


def test_a_template_renders_the_prompt_and_refuses_a_row_it_cannot_render():
    tpl = "Fix this issue in {{ repo }}:\n{{ problem }}"
    assert prompt({"repo": "r", "problem": "p"}, prompt_template=tpl).prompt == "Fix this issue in r:\np"
    assert Mapping(DatasetConfig(prompt_template=tpl)).missing(["repo"]) == [
        "dataset.prompt_template variable 'problem'"
    ]
    with pytest.raises(RowError, match="prompt_template"):
        prompt({"repo": "r"}, prompt_template=tpl)


def test_a_message_list_opens_the_conversation_up_to_its_last_user_turn():
    msgs = [{"from": "system", "value": "be brief"}, {"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"},
            {"role": "user", "content": [{"type": "text", "text": "and "}, {"type": "text", "text": "now?"}]},
            {"role": "assistant", "content": "done"}]  # fmt: skip
    p = prompt({"conversations": msgs})
    assert p.prompt == "and now?" and p.system == "be brief"
    assert [m["role"] for m in p.messages] == ["user", "assistant", "user"]


@pytest.mark.parametrize(
    ("row", "why"),
    [
        ({"text": "no prompt column"}, "missing 'prompt'"),
        ({"prompt": "   "}, "'prompt' is empty"),
        ({"prompt": 7}, "is int, not a string"),
        ({"prompt": "a\x00b"}, "NUL character"),
        ({"prompt": "ok", "image": 5}, "'image' is int"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "only system, user, assistant"),
        ({"messages": [{"role": "assistant", "content": "x"}]}, "holds no user message"),
    ],
)
def test_a_row_that_cannot_be_a_prompt_says_why(row, why):
    with pytest.raises(RowError, match=why):
        prompt(row)

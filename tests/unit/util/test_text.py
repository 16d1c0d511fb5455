"""util.text: the one head/tail clipper and the first line of an exception."""

from __future__ import annotations

import pytest

from hermes_runner.util.text import clip, first_line


def test_a_short_text_is_kept_as_is():
    assert clip("abc", 3) == "abc"


def test_the_default_split_keeps_40_percent_head_and_the_rest_from_the_end_within_the_limit():
    text = "".join(chr(65 + i % 26) for i in range(1000))
    out = clip(text, 200, "[{n} cut]")
    room = 200 - len("[1000 cut]")
    head, tail = out.split(f"[{1000 - room} cut]")
    assert head == text[: int(room * 0.4)] and tail == text[-(room - len(head)) :] and len(out) <= 200


def test_head_one_keeps_the_start_and_lines_ends_it_at_a_line_end():
    text = "a" * 60 + "\n" + "b" * 100
    assert clip(text, 90, " [{n} more]", head=1) == text[: 90 - len(" [161 more]")] + " [82 more]"
    assert clip(text, 90, " [{n} more]", head=1, lines=True) == "a" * 60 + " [101 more]"


def test_a_notice_counts_with_thousands_separators():
    assert clip("x" * 5000, 30, "…{n:,}", head=1).endswith("…4,976")


@pytest.mark.parametrize(
    ("message", "expected"),
    [("boom\nline two", "boom"), ("\n  \n  spaced  \n", "spaced"), ("Call log:\n  - step\nmore", "Call log: - step")],
)
def test_first_line(message, expected):
    assert first_line(RuntimeError(message)) == expected


def test_first_line_of_an_empty_exception_is_its_type_and_a_long_one_is_cut():
    assert first_line(TimeoutError()) == "TimeoutError"
    assert first_line(ValueError("x" * 400)) == "x" * 300 and first_line(ValueError("x" * 400), None) == "x" * 400

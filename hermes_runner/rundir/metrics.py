"""Score estimators over n samples per dataset row: mean, pass@k and pass^k for every k, each with a standard error.

Pure functions, shared by the run's statistics (rundir/stats.py) and the report. Every estimate averages
per row first, then over rows, and its standard error is taken across rows (the rows are the independent
draws; a row's samples are not). For a row with n samples of which c pass:

- pass@k (some of k samples passes) is the unbiased estimator of Chen et al. 2021 ("Evaluating Large
  Language Models Trained on Code"): 1 - C(n-c, k) / C(n, k);
- pass^k (all k samples pass: consistency, Yao et al. 2024, tau-bench) is its twin: C(c, k) / C(n, k).

Both are the chance for k of the row's samples drawn without replacement, so they exist for k <= n only.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DIGITS = 6  # the estimates in statistics.json are rounded to this many decimals


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that k of a row's n samples, drawn without replacement, hold at least one of its c passes."""
    if not 0 <= c <= n:
        raise ValueError(f"passes c={c} must be within 0..n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be within 1..n={n}")
    if n - c < k:
        return 1.0
    # C(n-c, k) / C(n, k) as a product: exact for any n, and no huge integers.
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The chance that k of a row's n samples, drawn without replacement, are all among its c passes."""
    if not 0 <= c <= n:
        raise ValueError(f"passes c={c} must be within 0..n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be within 1..n={n}")
    return math.prod((c - i) / (n - i) for i in range(k)) if c >= k else 0.0


def mean_se(values: Sequence[float]) -> tuple[float | None, float | None]:
    """(mean, standard error of the mean); the error needs two values at least (None below)."""
    n = len(values)
    if n == 0:
        return None, None
    m = math.fsum(values) / n
    if n < 2:
        return m, None
    var = math.fsum((v - m) ** 2 for v in values) / (n - 1)
    return m, math.sqrt(var / n)


@dataclass(slots=True)
class RowTally:
    """One row's scored samples for one scorer."""

    n: int = 0  # samples scored
    passed: int = 0  # of them, passed
    total: float = 0.0  # sum of their values

    def add(self, value: float, passed: bool, sign: int = 1) -> None:
        """Count one sample (`sign=-1` takes one back)."""
        self.n += sign
        self.passed += sign * bool(passed)
        self.total += sign * float(value)


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, DIGITS)


def by_k(rows: Sequence[RowTally], k_max: int) -> list[dict]:
    """pass@k and pass^k for k = 1..k_max, each over the rows with n >= k samples (`rows` of them) ± its error."""
    counts = Counter((r.n, r.passed) for r in rows)  # rows of one (n, c) share their values: few distinct pairs
    at: list[list[float]] = [[] for _ in range(k_max)]
    hat: list[list[float]] = [[] for _ in range(k_max)]
    for (n, c), times in counts.items():
        for j in range(min(n, k_max)):
            at[j] += [pass_at_k(n, c, j + 1)] * times
            hat[j] += [pass_hat_k(n, c, j + 1)] * times
    out = []
    for j in range(k_max):
        (pa, pa_err), (ph, ph_err) = mean_se(at[j]), mean_se(hat[j])
        out.append(
            {
                "k": j + 1,
                "rows": len(at[j]),
                "pass_at_k": _round(pa),
                "pass_at_k_se": _round(pa_err),
                "pass_hat_k": _round(ph),
                "pass_hat_k_se": _round(ph_err),
            }
        )
    return out


def estimate(rows: Iterable[RowTally], k: int) -> dict:
    """mean, pass@1, pass@k and pass^k over rows, each with its standard error across rows, and `by_k`: pass@j
    and pass^j for every j <= k.

    pass@k and pass^k count only the rows with n >= k samples (`rows_at_k` of them); rows without samples are
    ignored."""
    rows = [r for r in rows if r.n > 0]
    mean, mean_err = mean_se([r.total / r.n for r in rows])
    p1, p1_err = mean_se([r.passed / r.n for r in rows])
    curve = by_k(rows, max(k, 1))
    at_k = curve[-1]
    return {
        "rows": len(rows),
        "samples": sum(r.n for r in rows),
        "passed": sum(r.passed for r in rows),
        "mean": _round(mean),
        "mean_se": _round(mean_err),
        "pass_at_1": _round(p1),
        "pass_at_1_se": _round(p1_err),
        "k": k,
        "pass_at_k": at_k["pass_at_k"],
        "pass_at_k_se": at_k["pass_at_k_se"],
        "pass_hat_k": at_k["pass_hat_k"],
        "pass_hat_k_se": at_k["pass_hat_k_se"],
        "rows_at_k": at_k["rows"],
        "by_k": curve,
    }

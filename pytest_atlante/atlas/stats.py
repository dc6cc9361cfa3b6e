"""Robust summary statistics shared by ``summarize`` and ``score``.

Median of an even count is the mean of the two middle values; MAD is the median of the absolute
deviations from the median (unscaled, no 1.4826 normal-consistency factor), so hand-computed
expectations stay simple.  An empty sample has median and MAD ``0.0``: callers report
``samples: 0`` beside it so the zero cannot be mistaken for a measurement.

Cost: one sort (linear when the caller passes sorted runs, as ``summarize`` does), then the MAD
without building or sorting the deviations: on sorted data the deviations below and above the
median are two ascending sequences, and the k-th smallest of two sorted sequences is a binary
search.  On a million receipts this is the difference between one pass and three.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import TypedDict


class Distribution(TypedDict):
    samples: int
    median: float
    mad: float


def _median_sorted(ordered: Sequence[float]) -> float:
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[mid])
    return (ordered[mid - 1] + ordered[mid]) / 2.0


def _kth_of_two(a_at: Callable[[int], float], a_len: int, b_at: Callable[[int], float], b_len: int, k: int) -> float:
    """The k-th smallest (0-based) element of two ascending sequences, by binary search."""
    lo, hi = max(0, k + 1 - b_len), min(a_len, k + 1)
    while True:
        taken_a = (lo + hi) // 2
        taken_b = k + 1 - taken_a
        if taken_a < a_len and taken_b > 0 and b_at(taken_b - 1) > a_at(taken_a):
            lo = taken_a + 1
        elif taken_a > 0 and taken_b < b_len and a_at(taken_a - 1) > b_at(taken_b):
            hi = taken_a - 1
        else:
            candidates = []
            if taken_a > 0:
                candidates.append(a_at(taken_a - 1))
            if taken_b > 0:
                candidates.append(b_at(taken_b - 1))
            return max(candidates)


def _mad_sorted(ordered: Sequence[float], centre: float) -> float:
    split = bisect_left(ordered, centre)
    below = split                      # deviations centre - ordered[split-1-i], ascending in i
    above = len(ordered) - split       # deviations ordered[split+i] - centre, ascending in i

    def low(i: int) -> float:
        return centre - ordered[split - 1 - i]

    def high(i: int) -> float:
        return ordered[split + i] - centre

    n = len(ordered)
    upper = _kth_of_two(low, below, high, above, n // 2)
    if n % 2:
        return float(upper)
    return (_kth_of_two(low, below, high, above, n // 2 - 1) + upper) / 2.0


def median(values: Sequence[float]) -> float:
    return _median_sorted(sorted(values)) if values else 0.0


def mad(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return _mad_sorted(ordered, _median_sorted(ordered))


def distribution(values: Sequence[float]) -> Distribution:
    if not values:
        return {"samples": 0, "median": 0.0, "mad": 0.0}
    ordered = sorted(values)
    centre = _median_sorted(ordered)
    return {"samples": len(ordered), "median": centre, "mad": _mad_sorted(ordered, centre)}

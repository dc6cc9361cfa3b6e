"""Robust summary statistics shared by ``summarize`` and ``score``.

Median of an even count is the mean of the two middle values; MAD is the median of the absolute
deviations from the median (unscaled, no 1.4826 normal-consistency factor), so hand-computed
expectations stay simple.  An empty sample has median and MAD ``0.0``: callers report
``samples: 0`` beside it so the zero cannot be mistaken for a measurement.
"""

from __future__ import annotations

from typing import Sequence, TypedDict


class Distribution(TypedDict):
    samples: int
    median: float
    mad: float


def median(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[mid])
    return (ordered[mid - 1] + ordered[mid]) / 2.0


def mad(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    centre = median(values)
    return median([abs(v - centre) for v in values])


def distribution(values: Sequence[float]) -> Distribution:
    return {"samples": len(values), "median": median(values), "mad": mad(values)}

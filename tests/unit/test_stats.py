"""The fast median/MAD agree with the textbook definition on any sample (hypothesis)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pytest_atlante.atlas.stats import distribution, mad, median


def textbook_median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


values = st.lists(st.one_of(st.integers(min_value=0, max_value=6), st.floats(min_value=0, max_value=1e6)), min_size=1, max_size=40)


@given(values)
def test_distribution_matches_the_definition(sample: list[float]) -> None:
    centre = textbook_median(sample)
    expected_mad = textbook_median([abs(v - centre) for v in sample])
    result = distribution(sample)
    assert result["samples"] == len(sample)
    assert result["median"] == centre == median(sample)
    assert abs(result["mad"] - expected_mad) <= 1e-9 * max(1.0, expected_mad)
    assert abs(mad(sample) - expected_mad) <= 1e-9 * max(1.0, expected_mad)


def test_hand_computed_values() -> None:
    assert distribution([1, 2, 3, 4]) == {"samples": 4, "median": 2.5, "mad": 1.0}
    assert distribution([5, 5, 5, 9]) == {"samples": 4, "median": 5.0, "mad": 0.0}
    assert distribution([1, 1, 2, 2, 4, 6, 9]) == {"samples": 7, "median": 2.0, "mad": 1.0}
    assert distribution([]) == {"samples": 0, "median": 0.0, "mad": 0.0}

"""The price table: costs for hosts that report tokens only, unpriced (None) when a model is missing."""

from __future__ import annotations

import pytest

from pytest_atlante.hosts.prices import ceiling_cost, estimate_cost, parse_table, shipped_table

TABLE = parse_table({"version": 3, "date": "2026-11-30", "models": {
    "gpt-x": {"input": 2.0, "cachedInput": 0.5, "output": 10.0, "source": "https://example.invalid/pricing"}}})


def test_cached_input_is_priced_apart_from_the_rest_of_the_input() -> None:
    # 1M input of which 400k cached, 100k output: 600k*2 + 400k*0.5 + 100k*10 per million
    assert estimate_cost("gpt-x", 1_000_000, 400_000, 100_000, TABLE) == pytest.approx(1.2 + 0.2 + 1.0)


def test_a_model_the_table_does_not_list_is_unpriced_not_free() -> None:
    assert estimate_cost("gpt-unknown", 1000, 0, 1000, TABLE) is None
    assert estimate_cost(None, 1000, 0, 1000, TABLE) is None


def test_a_provider_prefixed_name_finds_its_entry() -> None:
    assert estimate_cost("openai/gpt-x", 1_000_000, 0, 0, TABLE) == pytest.approx(2.0)


def test_cached_tokens_beyond_the_input_do_not_make_a_negative_cost() -> None:
    assert estimate_cost("gpt-x", 10, 50, 0, TABLE) == pytest.approx(10 * 0.5 / 1_000_000)


def test_a_negative_price_is_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        parse_table({"version": 1, "date": "d", "models": {"m": {"input": -1, "cachedInput": 0, "output": 0, "source": "s"}}})


def test_the_shipped_table_loads_and_names_a_source_for_every_model() -> None:
    table = shipped_table()
    assert table.version >= 1 and table.label.startswith("price-table v")
    assert all(price.source.startswith("https://") for price in table.models.values())



def test_a_dated_snapshot_a_provider_answers_with_finds_its_entry() -> None:
    # Responses name the snapshot that answered (gpt-x-2026-03-05, claude-…-20250929).
    assert estimate_cost("gpt-x-2026-03-05", 1_000_000, 0, 0, TABLE) == pytest.approx(2.0)
    assert estimate_cost("gpt-x-20260305", 1_000_000, 0, 0, TABLE) == pytest.approx(2.0)
    assert estimate_cost("gpt-x-mini", 1_000_000, 0, 0, TABLE) is None


def test_the_ceiling_prices_tokens_at_the_listed_model_that_makes_them_dearest() -> None:
    table = parse_table({"version": 1, "date": "2026-12-01", "models": {
        "cheap": {"input": 1.0, "cachedInput": 0.1, "output": 50.0, "source": "s"},
        "dear-input": {"input": 10.0, "cachedInput": 1.0, "output": 10.0, "source": "s"}}})
    assert ceiling_cost(1_000_000, 0, 0, table) == (10.0, "dear-input")
    assert ceiling_cost(0, 0, 1_000_000, table) == (50.0, "cheap")
    cost, model = ceiling_cost(1000, 0, 1000)  # the shipped table: never free
    assert cost > 0 and model in shipped_table().models

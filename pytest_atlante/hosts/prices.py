"""Model prices for hosts whose stream reports tokens but no cost (Codex, Gemini CLI).

The table ships in the package (``prices.json`` beside this module): dated, versioned, one entry
per model with input, cached-input and output prices in US dollars per million tokens and the page
each figure was read from.  A cost computed from it is an estimate (the provider's bill is the
truth: discounts, tiers and long-context surcharges are not modelled), and a model the table does
not list is unpriced: ``None``, never 0, so a budget or forecast built on it says so instead of
counting the trial as free.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

PRICE_FILE = "prices.json"
#: A dated snapshot's suffix, as providers' responses name the model that answered.
_SNAPSHOT = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8})$")


@dataclass(frozen=True)
class ModelPrice:
    input_per_mtok: float          # uncached input tokens
    cached_input_per_mtok: float   # input tokens served from the provider's prompt cache
    output_per_mtok: float         # output tokens, reasoning/thinking tokens included
    source: str                    # the page the figures were read from


@dataclass(frozen=True)
class PriceTable:
    version: int
    date: str                      # the day the figures were read (ISO 8601)
    models: dict[str, ModelPrice]

    @property
    def label(self) -> str:
        """What a report names as the estimate's basis: ``price-table v1 (2026-12-01)``."""
        return f"price-table v{self.version} ({self.date})"

    def price_for(self, model: str | None) -> ModelPrice | None:
        """The entry for ``model``, also when the host names it with its provider (``openai/gpt-5.5``)
        or a provider's response names a dated snapshot of it (``gpt-5.5-2026-03-05``)."""
        if not model:
            return None
        return self.models.get(model) or self.models.get(model.rsplit("/", 1)[-1]) or self.models.get(model_base(model))


def model_base(model: str) -> str:
    """A model's name without its provider (``openai/``) and dated-snapshot suffix: how a host's
    name for a model and a provider's name for the snapshot that answered are compared."""
    return _SNAPSHOT.sub("", model.rsplit("/", 1)[-1])


def parse_table(document: dict[str, Any]) -> PriceTable:
    """A table from its JSON form; a malformed shipped table is a packaging bug, so it raises."""
    models = {
        name: ModelPrice(float(entry["input"]), float(entry["cachedInput"]), float(entry["output"]), str(entry["source"]))
        for name, entry in document["models"].items()
    }
    for name, price in models.items():
        if min(price.input_per_mtok, price.cached_input_per_mtok, price.output_per_mtok) < 0:
            raise ValueError(f"{PRICE_FILE}: negative price for {name!r}")
    return PriceTable(int(document["version"]), str(document["date"]), models)


@lru_cache(maxsize=1)
def shipped_table() -> PriceTable:
    text = resources.files(__package__).joinpath(PRICE_FILE).read_text(encoding="utf-8")
    return parse_table(json.loads(text))


def estimate_cost(model: str | None, input_tokens: int, cached_input_tokens: int, output_tokens: int,
                  table: PriceTable | None = None) -> float | None:
    """US dollars for one session's tokens, or None when ``model`` is not in the table.

    ``input_tokens`` counts every input token, cached ones included (how Codex and Gemini CLI
    report them); ``cached_input_tokens`` is the cached share of it."""
    price = (table or shipped_table()).price_for(model)
    if price is None:
        return None
    cached = min(max(cached_input_tokens, 0), max(input_tokens, 0))
    uncached = max(input_tokens, 0) - cached
    return (uncached * price.input_per_mtok + cached * price.cached_input_per_mtok
            + max(output_tokens, 0) * price.output_per_mtok) / 1_000_000


def ceiling_cost(input_tokens: int, cached_input_tokens: int, output_tokens: int,
                 table: PriceTable | None = None) -> tuple[float, str]:
    """The tokens priced at the listed model that makes them dearest, and that model: what a trial
    whose cost cannot be established counts under ``--atlante-max-cost`` (never free)."""
    table = table or shipped_table()
    priced = [(cost, name) for name in table.models
              if (cost := estimate_cost(name, input_tokens, cached_input_tokens, output_tokens, table)) is not None]
    return max(priced, default=(0.0, ""))

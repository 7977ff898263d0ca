"""What a run costs: a price table per model, in USD per million tokens, that users can extend.

The built-in table holds list prices of a few well-known API models, as published by their
providers in mid-2025. Prices change: check your provider's page and override or extend the table
with ``--prices FILE.json`` or ``$CASEBENCH_PRICES`` (same format). casebench never invents a
price: a model that is in no table costs 0 and is flagged ``"unknown"`` in the manifest, and
models of a backend that runs on this machine (its description says ``local=True``: ``hf/``;
``backends.registry``) are flagged ``"local"``. A backend's description may carry a price lookup
of its own (``@backend(..., price=...)``), consulted after the tables (status ``"backend"``).

File format (JSON object; keys are a full spec or a model name, a dated variant such as
``gpt-4o-mini-2024-07-18`` matches the longest key it starts with)::

    {"gpt-4o-mini": {"input": 0.15, "output": 0.60},
     "openai/my-finetune": {"input": 0.30, "output": 1.20, "batch_input": 0.15, "batch_output": 0.60}}

Batch prices (``casebench run --batch``: OpenAI's Batch API, Anthropic's Message Batches) are half
the list prices, as both providers publish them; an entry's optional ``batch_input`` and
``batch_output`` override that. ``PriceTable.lookup(spec, batch=True)`` gives them.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..jsonutil import json_error_where

ENV_VAR = "CASEBENCH_PRICES"
#: Batch APIs (OpenAI Batch, Anthropic Message Batches) charge half the list price.
BATCH_DISCOUNT = 0.5


@dataclass(frozen=True)
class Price:
    """USD per million input (prompt) and output (completion) tokens; the batch prices default
    to ``BATCH_DISCOUNT`` times the list prices."""

    input: float
    output: float
    batch_input: float | None = None
    batch_output: float | None = None

    def for_batch(self) -> "Price":
        """The price through a provider's batch API."""
        return Price(self.input * BATCH_DISCOUNT if self.batch_input is None else self.batch_input,
                     self.output * BATCH_DISCOUNT if self.batch_output is None else self.batch_output)

    def cost(self, prompt_tokens: float, completion_tokens: float) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


#: List prices (USD / 1M tokens) as of 2025-06; check the providers' pages before relying on them.
BUILTIN_PRICES: dict[str, Price] = {
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "o4-mini": Price(1.10, 4.40),
    "gpt-3.5-turbo": Price(0.50, 1.50),
    "claude-3-haiku": Price(0.25, 1.25),
    "claude-3-5-haiku": Price(0.80, 4.00),
    "claude-3-5-sonnet": Price(3.00, 15.00),
    "claude-3-7-sonnet": Price(3.00, 15.00),
    "claude-sonnet-4": Price(3.00, 15.00),
    "claude-opus-4": Price(15.00, 75.00),
}


class PricingError(ValueError):
    """A price file is unreadable or malformed (the message names the file and key)."""


@dataclass(frozen=True)
class PriceMatch:
    """The price found for a model spec, and how: ``table`` (matched key), ``backend`` (the
    backend's own price lookup), ``local`` or ``unknown`` (cost 0 in both of the latter)."""

    price: Price
    status: str
    key: str | None = None
    batch: bool = False  # the price is the batch API's

    def to_dict(self) -> dict[str, Any]:
        out = {"status": self.status, "key": self.key,
               "input_per_mtok": self.price.input, "output_per_mtok": self.price.output}
        if self.batch:
            out["batch"] = True
        return out


ZERO = Price(0.0, 0.0)


class PriceTable:
    """Built-in prices overlaid with user entries (user entries win)."""

    def __init__(self, extra: Mapping[str, Price] | None = None, builtin: bool = True):
        self.prices: dict[str, Price] = dict(BUILTIN_PRICES) if builtin else {}
        self.prices.update(extra or {})

    @classmethod
    def load(cls, path: str | Path | None = None) -> "PriceTable":
        """Built-ins, then ``$CASEBENCH_PRICES``, then ``path`` (each overriding the one before)."""
        extra: dict[str, Price] = {}
        env = os.environ.get(ENV_VAR)
        if env:
            extra.update(read_price_file(env))
        if path:
            extra.update(read_price_file(path))
        return cls(extra)

    def lookup(self, spec: str, batch: bool = False) -> PriceMatch:
        """The price of ``spec``; with ``batch=True`` the batch API's (half, unless the entry says)."""
        match = self._lookup(spec)
        if not batch:
            return match
        return PriceMatch(match.price.for_batch(), match.status, match.key, batch=True)

    def _lookup(self, spec: str) -> PriceMatch:
        from ..backends.registry import info_for

        info = info_for(spec)
        if info is not None and info.local and spec not in self.prices:
            return PriceMatch(ZERO, "local")
        if spec in self.prices:
            return PriceMatch(self.prices[spec], "table", spec)
        name = spec.rstrip("/").split("/")[-1]
        if name in self.prices:
            return PriceMatch(self.prices[name], "table", name)
        # dated or suffixed variants: the longest key the name starts with, at a '-' boundary
        best = None
        for key in self.prices:
            if "/" in key:
                continue
            if name.startswith(key + "-") and (best is None or len(key) > len(best)):
                best = key
        if best is not None:
            return PriceMatch(self.prices[best], "table", best)
        own = info.price(spec.split("/", 1)[1] if "/" in spec else spec) if info is not None and info.price else None
        if own is not None:
            return PriceMatch(Price(float(own[0]), float(own[1])), "backend", info.prefix if info else None)
        return PriceMatch(ZERO, "unknown")


def read_price_file(path: str | Path) -> dict[str, Price]:
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PricingError(f"{p}: price file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PricingError(f"{p}: cannot read price file ({e})") from None
    except json.JSONDecodeError as e:
        raise PricingError(f"{p}: not valid JSON: {json_error_where(e)}") from None
    if not isinstance(data, dict):
        raise PricingError(f"{p}: the top level must be an object of model -> {{\"input\": x, \"output\": y}}")
    out: dict[str, Price] = {}
    for key, entry in data.items():
        if not isinstance(entry, dict):
            raise PricingError(f"{p}: model '{key}': must be an object with 'input' and 'output' (USD per 1M tokens)")
        vals: list[float | None] = []
        for fld in ("input", "output"):
            v = entry.get(fld)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise PricingError(f"{p}: model '{key}', field '{fld}': must be a number >= 0 "
                                   f"(USD per 1M tokens), found {v!r}")
            vals.append(float(v))
        for fld in ("batch_input", "batch_output"):
            v = entry.get(fld)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                                  or v < 0):
                raise PricingError(f"{p}: model '{key}', field '{fld}': must be a number >= 0 "
                                   f"(USD per 1M tokens), found {v!r}")
            vals.append(None if v is None else float(v))
        out[str(key)] = Price(float(vals[0] or 0.0), float(vals[1] or 0.0), vals[2], vals[3])
    return out

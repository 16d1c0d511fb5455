"""Token usage and its cost: the provider's reported cost, else the model's price table."""

from __future__ import annotations

from dataclasses import dataclass, fields

from hermes_runner.config import PriceConfig


@dataclass(slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, other: Usage) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict | None) -> Usage:
        d = d or {}
        return cls(**{f.name: d.get(f.name, 0) for f in fields(cls)})

    @classmethod
    def from_openai(cls, u: dict | None) -> Usage:
        """From an OpenAI `usage` object (its `cost` is what OpenRouter-style providers report)."""
        u = u or {}
        pt = int(u.get("prompt_tokens") or 0)
        ct = int(u.get("completion_tokens") or 0)
        return cls(
            prompt_tokens=pt,
            completion_tokens=ct,
            cached_tokens=int((u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0),
            reasoning_tokens=int((u.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0),
            total_tokens=int(u.get("total_tokens") or pt + ct),
            cost_usd=float(u.get("cost") or 0.0),
        )


def has_prices(price: PriceConfig) -> bool:
    return bool(price.prompt_per_mtok or price.completion_per_mtok)


def price_cost(usage: Usage, price: PriceConfig) -> float:
    """USD for these tokens at the table's prices (cached prompt tokens at their own price)."""
    cached_rate = price.cached_prompt_per_mtok if price.cached_prompt_per_mtok is not None else price.prompt_per_mtok
    uncached = max(0, usage.prompt_tokens - usage.cached_tokens)
    return (
        uncached * price.prompt_per_mtok
        + usage.cached_tokens * cached_rate
        + usage.completion_tokens * price.completion_per_mtok
    ) / 1e6


def fill_cost(usage: Usage, price: PriceConfig) -> Usage:
    """Set usage.cost_usd from the price table when the provider reported none."""
    if not usage.cost_usd and has_prices(price):
        usage.cost_usd = price_cost(usage, price)
    return usage

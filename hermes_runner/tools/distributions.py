"""Toolset distributions: independent per-toolset draws, seeded per prompt."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Collection, Iterable

from hermes_runner.config import DistributionConfig
from hermes_runner.errors import ConfigError


def validate(dist: DistributionConfig, known_toolsets: Iterable[str]) -> None:
    known = set(known_toolsets)
    unknown = sorted(set(dist.toolsets) - known)
    if unknown:
        raise ConfigError(
            f"distribution {dist.name!r} names unknown toolset(s) {', '.join(unknown)}; "
            f"known toolsets: {', '.join(sorted(known))}"
        )
    if not dist.toolsets:
        raise ConfigError(f"distribution {dist.name!r} has no toolsets")
    for name, p in dist.toolsets.items():
        if not 0 <= p <= 100:
            raise ConfigError(f"distribution {dist.name!r}: probability of {name!r} is {p}, not within 0..100")


def sample(dist: DistributionConfig, seed: int, prompt_key: str, exclude: Collection[str] = ()) -> list[str]:
    """Flip each toolset with its own probability; if none comes up, take the most probable.

    The draw depends only on (seed, prompt key), so it is the same on every resume and
    whatever the order in which prompts run. Toolsets in `exclude` (no backend) are still
    flipped, so the others draw as they would with them, but never chosen.
    """
    digest = hashlib.blake2b(f"{seed}:{prompt_key}".encode(), digest_size=8).digest()
    rng = random.Random(int.from_bytes(digest, "big"))
    chosen = [name for name, p in dist.toolsets.items() if rng.random() * 100 < p and name not in exclude]
    if not chosen:
        left = [n for n in dist.toolsets if n not in exclude]
        chosen = [max(left, key=lambda n: dist.toolsets[n])] if left else []  # first maximum in order
    return chosen


def describe(dists: list[DistributionConfig]) -> str:
    lines = ["Available toolset distributions", "=" * 70]
    for d in sorted(dists, key=lambda d: d.name):
        lines.append(f"\n{d.name}: {d.description}")
        for name, p in sorted(d.toolsets.items(), key=lambda kv: -kv[1]):
            lines.append(f"    {name:15} : {p:5g}% chance")
    lines.append("\nUse one with: python run.py distribution=<name>")
    return "\n".join(lines)

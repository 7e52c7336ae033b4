"""The contract's awards read literally, sharing nothing with `arena.engine.prizes`: a loop over the
ranks of a table, the first tier that matches, and `top_percent` in integer arithmetic
(rank ≤ ⌈P·size/100⌉ ⇔ (rank − 1)·100·d < n·size for P = n/d)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any


def awards(rows: Sequence[tuple[str, int]], order: str, tiers: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``rows``: (member, score) in rank order; ``tiers`` as a definition writes them
    (``top_percent`` a number or a Fraction: read through its text, as written)."""
    size = len(rows)
    won = []
    for rank, (member, score) in enumerate(rows, 1):
        for tier in tiers:
            if tier.get("ranks") is not None:
                hit = tier["ranks"][0] <= rank <= tier["ranks"][1]
            elif tier.get("top_percent") is not None:
                p = Fraction(str(tier["top_percent"]))
                hit = (rank - 1) * 100 * p.denominator < p.numerator * size
            else:
                hit = score >= tier["score"] if order == "desc" else score <= tier["score"]
            if hit:
                won.append({"rank": rank, "member": member, "score": score, "reward": tier["reward"]})
                break
    return won


def sha256(won: Sequence[Mapping[str, Any]]) -> str:
    text = "".join(f"{a['rank']}\t{a['member']}\t{a['score']}\t{a['reward']}\n" for a in won)
    return hashlib.sha256(text.encode()).hexdigest()

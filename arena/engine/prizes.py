"""Prize tiers and the awards of a table: who wins what when it closes (DESIGN.md "Seasons:
settlement and prizes").

A board's definition holds tiers per period kind, in order; each tier names a reward and one
rule: a rank range, a top percentage, or a score threshold. A member gets the reward of the first
tier it matches; a table holds each member once, so at most one reward per member. Everything here
is a pure function of the table's entries in rank order, its size, the board's order and the
tiers, so the live settlement, a preview and a rebuild can never disagree.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

from arena.engine.scoring import Order
from arena.engine.table import Entry


@dataclass(frozen=True, slots=True)
class PrizeTier:
    """One tier: ``reward`` and exactly one of ``ranks`` (A ≤ rank ≤ B), ``top_percent``
    (rank ≤ ⌈P·size/100⌉, P exact as written) or ``score`` (S or better in the board's order)."""

    reward: str
    ranks: tuple[int, int] | None = None
    top_percent: Fraction | None = None
    score: int | None = None
    tier: str | None = None
    """On a league board: the one tier whose divisions award it (None: every division's)."""

    def last_rank(self, size: int) -> int | None:
        """The last rank this tier may award in a table of ``size`` members; None: a score tier,
        which any rank may meet."""
        if self.ranks is not None:
            return self.ranks[1]
        if self.top_percent is not None:
            return math.ceil(self.top_percent * size / 100)
        return None

    def as_json(self) -> dict[str, object]:
        """The tier as the definition's JSON writes it (a float ``top_percent`` reads back exactly:
        the parser keeps only what a double's shortest repr gives back, `arena.config`)."""
        rule: dict[str, object]
        if self.ranks is not None:
            rule = {"ranks": list(self.ranks)}
        elif self.top_percent is not None:
            p = self.top_percent
            rule = {"top_percent": p.numerator if p.denominator == 1 else float(p)}
        else:
            rule = {"score": self.score}
        return {"reward": self.reward, **rule, **({} if self.tier is None else {"tier": self.tier})}

    @classmethod
    def from_json(cls, tier: dict[str, object]) -> PrizeTier:
        """A tier as `as_json` wrote it (a journaled settlement's tiers read back)."""
        reward = str(tier["reward"])
        ranks, percent, score = tier.get("ranks"), tier.get("top_percent"), tier.get("score")
        league_tier = None if tier.get("tier") is None else str(tier["tier"])
        if isinstance(ranks, list):
            return cls(reward, ranks=(int(ranks[0]), int(ranks[1])), tier=league_tier)
        if isinstance(percent, int | float):
            return cls(reward, top_percent=Fraction(repr(percent)), tier=league_tier)
        assert isinstance(score, int)
        return cls(reward, score=score, tier=league_tier)


Prizes = tuple[tuple[str, tuple[PrizeTier, ...]], ...]
"""A board's tiers by period name, in the definition's order; a kind without prizes is absent."""


class Award(NamedTuple):
    rank: int
    member: str
    score: int
    reward: str


def rank_bound(tiers: Sequence[PrizeTier], size: int) -> int:
    """The last rank a `ranks` or `top_percent` tier of ``tiers`` may award in a table of
    ``size`` members, at most ``size`` (0: none may). A `score` tier may reach past it. O(tiers)."""
    return min(max((r for r in (tier.last_rank(size) for tier in tiers) if r is not None), default=0), size)


class Awarding:
    """The tiers applied to one table of ``size`` members, made once per table. `awards` reads
    the table's entries in rank order, a run at a time if the caller likes (a settlement of a big
    table lets its event loop run between runs)."""

    def __init__(self, tiers: Sequence[PrizeTier], size: int, order: Order) -> None:
        self._rules = [(tier.reward, _rule(tier, size, order)) for tier in tiers]
        self._bound = rank_bound(tiers, size)
        self._better_or_equal = _BETTER_OR_EQUAL[order]
        self._thresholds = [tier.score for tier in tiers if tier.score is not None]

    def awards(self, entries: Iterable[Entry]) -> tuple[list[Award], bool]:
        """The awards of ``entries`` (the next consecutive entries in rank order): each member
        the reward of the first tier it matches; and True once an entry that no tier can match,
        nor any after it (scores only get worse down the ranks), was read: it reads no further.
        O(entries read × tiers)."""
        rules, bound, better_or_equal, thresholds = self._rules, self._bound, self._better_or_equal, self._thresholds
        won: list[Award] = []
        for entry in entries:
            rank, score = entry.rank, entry.score
            if rank > bound and not any(better_or_equal(score, s) for s in thresholds):
                return won, True
            for reward, matches in rules:
                if matches(rank, score):
                    won.append(Award(rank, entry.member, score, reward))
                    break
        return won, False


def awards(entries: Iterable[Entry], size: int, order: Order, tiers: Sequence[PrizeTier]) -> list[Award]:
    """The awards of a table whose ``entries`` (rank order) number ``size``, in one go; it reads
    no entry past the last one that can win, so a top-10 % tier of a 10**6-member table reads 10 %
    of it. O(entries read × tiers)."""
    return Awarding(tiers, size, order).awards(entries)[0]


_BETTER_OR_EQUAL: dict[Order, Callable[[int, int], bool]] = {
    Order.DESC: lambda score, threshold: score >= threshold,
    Order.ASC: lambda score, threshold: score <= threshold,
}


def _rule(tier: PrizeTier, size: int, order: Order) -> Callable[[int, int], bool]:
    """The tier's test of (rank, score) in a table of ``size`` members, made once per table."""
    if tier.ranks is not None:
        first, last = tier.ranks
        return lambda rank, score: first <= rank <= last
    if tier.top_percent is not None:
        cut = math.ceil(tier.top_percent * size / 100)
        return lambda rank, score: rank <= cut
    threshold, better_or_equal = tier.score, _BETTER_OR_EQUAL[order]
    assert threshold is not None
    return lambda rank, score: better_or_equal(score, threshold)


def award_text(awards: Iterable[Award]) -> bytes:
    """The canonical text of awards: one line ``f"{rank}\\t{member}\\t{score}\\t{reward}\\n"``
    each, in the order given (rank order), UTF-8. Neither a member nor a reward holds a tab or
    a newline (category Cc is refused in both), so the text names the awards unambiguously."""
    return "".join(f"{a.rank}\t{a.member}\t{a.score}\t{a.reward}\n" for a in awards).encode()


def sha256_of(awards: Iterable[Award]) -> str:
    """The settlement's ``sha256``: of `award_text` (no awards: sha256 of the empty string)."""
    return hashlib.sha256(award_text(awards)).hexdigest()


def changes(before: Iterable[Award], after: Iterable[Award]) -> list[dict[str, str | None]]:
    """``[{"member","before","after"}]`` for the members whose reward differs between two
    revisions' awards (a grant: before null; a revocation: after null), in member order."""
    was = {a.member: a.reward for a in before}
    now = {a.member: a.reward for a in after}
    return [
        {"member": member, "before": was.get(member), "after": now.get(member)}
        for member in sorted(was.keys() | now.keys())
        if was.get(member) != now.get(member)
    ]

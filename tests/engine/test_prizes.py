"""Prize tiers and awards (`arena.engine.prizes`) against a tiny oracle written from the contract
alone (`support.prize_oracle`: a loop over ranks, the first matching tier, `top_percent` in
integer arithmetic)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from fractions import Fraction

from hypothesis import example, given
from hypothesis import strategies as st

from arena.engine.prizes import Award, PrizeTier, award_text, awards, changes, rank_bound, sha256_of
from arena.engine.scoring import Order
from arena.engine.table import Entry
from support import prize_oracle

Row = tuple[str, int]


def oracle(rows: list[Row], order: Order, tiers: list[PrizeTier]) -> list[tuple[int, str, int, str]]:
    plain = [{"reward": t.reward, "ranks": t.ranks, "top_percent": t.top_percent, "score": t.score} for t in tiers]
    return [(a["rank"], a["member"], a["score"], a["reward"]) for a in prize_oracle.awards(rows, order.value, plain)]


def ranked(scores: list[int], order: Order) -> list[Row]:
    """Members m0.. with these scores in a table's order: score, then member (ties in score)."""
    rows = [(f"m{i:03d}", s) for i, s in enumerate(scores)]
    return sorted(rows, key=lambda r: (-r[1] if order is Order.DESC else r[1], r[0]))


def entries(rows: list[Row]) -> list[Entry]:
    return [Entry(rank, member, score, 0) for rank, (member, score) in enumerate(rows, 1)]


percents = st.one_of(
    st.just(Fraction(100)),
    st.integers(1, 100).map(Fraction),
    st.integers(1, 100_000).map(lambda k: Fraction(k, 1000)),
    st.integers(1, 10**6).map(lambda k: Fraction(k, 10**7)),
)
rank_ranges = st.tuples(st.integers(1, 40), st.integers(0, 40)).map(lambda ab: (ab[0], ab[0] + ab[1]))
tier = st.one_of(
    st.builds(lambda r, ranks: PrizeTier(r, ranks=ranks), st.sampled_from("abc"), rank_ranges),
    st.builds(lambda r, p: PrizeTier(r, top_percent=p), st.sampled_from("def"), percents),
    st.builds(lambda r, s: PrizeTier(r, score=s), st.sampled_from("ghi"), st.integers(-3, 12)),
)
scores = st.lists(st.integers(-2, 10), max_size=60)  # few values: many ties in score


@given(scores, st.sampled_from(Order), st.lists(tier, max_size=5))
@example([], Order.DESC, [PrizeTier("all", top_percent=Fraction(100))])
@example([5, 5, 5], Order.DESC, [PrizeTier("all", top_percent=Fraction(100))])
@example([1, 2], Order.ASC, [PrizeTier("far", ranks=(3, 9))])
def test_awards_are_the_oracles(values: list[int], order: Order, tiers: list[PrizeTier]) -> None:
    rows = ranked(values, order)
    got = list(awards(entries(rows), len(rows), order, tiers))
    assert [tuple(a) for a in got] == oracle(rows, order, tiers)
    assert len({a.member for a in got}) == len(got)  # one reward per member


@given(scores, st.sampled_from(Order), st.lists(tier, max_size=5))
def test_awards_read_no_entry_past_the_one_after_the_last_that_can_win(
    values: list[int], order: Order, tiers: list[PrizeTier]
) -> None:
    rows = ranked(values, order)
    read = []

    def reading() -> Iterator[Entry]:
        for e in entries(rows):
            read.append(e.rank)
            yield e

    got = list(awards(reading(), len(rows), order, tiers))
    assert [tuple(a) for a in got] == oracle(rows, order, tiers)
    ranks_end = min(max([t.ranks[1] for t in tiers if t.ranks is not None]
                        + [-(-t.top_percent * len(rows) // 100) for t in tiers if t.top_percent is not None], default=0),
                        len(rows))
    assert rank_bound(tiers, len(rows)) == ranks_end
    thresholds = [t.score for t in tiers if t.score is not None]

    def may_win(rank: int, score: int) -> bool:
        return rank <= ranks_end or any(score >= s if order is Order.DESC else score <= s for s in thresholds)

    # the scan stops at the first entry that no tier can match, nor any entry after it
    stop = next((rank for rank, (_m, score) in enumerate(rows, 1) if not may_win(rank, score)), None)
    assert read == list(range(1, (stop if stop is not None else len(rows)) + 1))


def test_top_percent_is_exact_in_rationals() -> None:
    # 7 % of 100 members is 7 exactly (in doubles, 7 / 100 * 100 is 7.000000000000001: ceil 8)
    rows = ranked(list(range(100)), Order.DESC)
    got = list(awards(entries(rows), 100, Order.DESC, [PrizeTier("x", top_percent=Fraction(7))]))
    assert [a.rank for a in got] == [1, 2, 3, 4, 5, 6, 7]
    rows = ranked(list(range(30)), Order.DESC)
    # ceil: 1 % of 30 members is 0.3, which the top 1 wins
    got = list(awards(entries(rows), 30, Order.DESC, [PrizeTier("x", top_percent=Fraction(1))]))
    assert [a.rank for a in got] == [1]


def test_the_first_matching_tier_wins_and_ties_in_score_keep_their_ranks() -> None:
    rows = ranked([50, 50, 40, 40, 10], Order.DESC)
    tiers = [PrizeTier("gold", ranks=(1, 1)), PrizeTier("silver", score=40), PrizeTier("all", top_percent=Fraction(100))]
    assert list(awards(entries(rows), 5, Order.DESC, tiers)) == [
        Award(1, "m000", 50, "gold"), Award(2, "m001", 50, "silver"), Award(3, "m002", 40, "silver"),
        Award(4, "m003", 40, "silver"), Award(5, "m004", 10, "all"),
    ]
    low = ranked([3, 1, 2], Order.ASC)  # asc: "S or better" is S or lower
    assert [(a.member, a.reward) for a in awards(entries(low), 3, Order.ASC, [PrizeTier("low", score=2)])] == [
        ("m001", "low"), ("m002", "low"),
    ]


def test_the_sha256_is_of_one_line_per_award_in_rank_order() -> None:
    won = [Award(1, "ann", 90, "gold-crown"), Award(2, "bob é", -5, "silver")]
    text = "1\tann\t90\tgold-crown\n2\tbob é\t-5\tsilver\n"
    assert award_text(won) == text.encode()
    assert sha256_of(won) == hashlib.sha256(text.encode()).hexdigest() == prize_oracle.sha256([a._asdict() for a in won])
    assert sha256_of([]) == hashlib.sha256(b"").hexdigest()


rewards = st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), st.sampled_from(["gold", "silver"]))


@given(rewards, rewards)
def test_changes_are_the_members_whose_reward_differs(was: dict[str, str], now: dict[str, str]) -> None:
    def as_awards(won: dict[str, str]) -> list[Award]:
        return [Award(rank, member, 0, reward) for rank, (member, reward) in enumerate(sorted(won.items()), 1)]

    expected = [{"member": m, "before": was.get(m), "after": now.get(m)}
                for m in sorted(set(was) | set(now)) if was.get(m) != now.get(m)]
    assert changes(as_awards(was), as_awards(now)) == expected


def test_a_tier_writes_itself_as_the_definition_reads_it() -> None:
    assert PrizeTier("g", ranks=(1, 3)).as_json() == {"reward": "g", "ranks": [1, 3]}
    assert PrizeTier("s", top_percent=Fraction(10)).as_json() == {"reward": "s", "top_percent": 10}
    assert PrizeTier("s", top_percent=Fraction(125, 10)).as_json() == {"reward": "s", "top_percent": 12.5}
    assert PrizeTier("t", score=-7).as_json() == {"reward": "t", "score": -7}

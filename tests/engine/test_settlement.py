"""A settlement's revisions and body (`arena.engine.settlement`): made in steps or in one go alike,
from a ranked table's copy as from its entries, revised only when an award changes; its journal
text the same document whether encoded in pieces or at once."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

import orjson
from hypothesis import given
from hypothesis import strategies as st

from arena.engine import settlement
from arena.engine.periods import ALLTIME_WINDOW, PeriodKind, Window
from arena.engine.prizes import Award, PrizeTier, awards, rank_bound, sha256_of
from arena.engine.scoring import Aggregation, Order, ScoringRule, Tie
from arena.engine.table import Entry, RankedTable

TIERS = (PrizeTier("gold", ranks=(1, 1)), PrizeTier("silver", top_percent=Fraction(25, 2)), PrizeTier("tin", score=900))


def table_of(scores: dict[str, int], order: Order = Order.DESC) -> RankedTable:
    table = RankedTable(ScoringRule.for_board(Aggregation.BEST, order, Tie.EARLIEST), ALLTIME_WINDOW)
    for i, (member, score) in enumerate(scores.items()):
        table.apply(member, score, 1_000 + i, "")
    return table


members = st.dictionaries(st.text("abcdef", min_size=1, max_size=4), st.integers(0, 1000), max_size=80)


@given(members, st.integers(1, 7))
def test_a_settlement_made_in_steps_is_the_one_made_at_once(scores: dict[str, int], step: int) -> None:
    table = table_of(scores)
    whole = settlement.first(TIERS, table.entries(), len(table), Order.DESC)
    assert list(whole.awards) == list(awards(table.entries(), len(table), Order.DESC, TIERS))
    assert whole.sha256 == sha256_of(whole.awards) and whole.revision == 0 and whole.changes == ()
    # from a copy of only the entries that can win, when no tier is a score tier
    tiers = TIERS[:2]
    settling = settlement.Settling(tiers, table.decoded(table.snapshot(rank_bound(tiers, len(table)))), len(table), Order.DESC)
    while not settling.run(step):
        pass
    assert settling.settlement() == settlement.first(tiers, table.entries(), len(table), Order.DESC)


def test_a_run_reads_at_most_the_entries_it_is_given_whatever_the_tiers() -> None:
    # ranks 900..1000 win: the entries above them are read too, a run's worth at a time
    table = table_of({f"m{i:04d}": i for i in range(1200)})
    read = []

    def reading() -> Iterator[Entry]:
        for entry in table.entries():
            read.append(entry.rank)
            yield entry

    settling = settlement.Settling([PrizeTier("late", ranks=(900, 1000))], reading(), len(table), Order.DESC)
    runs = 1
    while not settling.run(64):
        assert len(read) == 64 * runs
        runs += 1
    assert [a.rank for a in settling.settlement().awards] == list(range(900, 1001))
    assert len(read) <= 1001 + 64


def test_a_revision_comes_only_when_an_award_changes() -> None:
    before = settlement.first(TIERS, table_of({"a": 950, "b": 920, "c": 10}).entries(), 3, Order.DESC)
    assert [(a.member, a.reward) for a in before.awards] == [("a", "gold"), ("b", "tin")]
    same = table_of({"a": 950, "b": 920, "c": 10, "d": 5})  # d wins nothing; no award changes
    assert settlement.revise(before, list(awards(same.entries(), 4, Order.DESC, before.tiers))) is None
    voided = table_of({"b": 920, "c": 10})  # a's events voided: b moves up to gold
    after = settlement.revise(before, list(awards(voided.entries(), 2, Order.DESC, before.tiers)))
    assert after is not None and after.revision == 1 and after.tiers == TIERS
    assert after.awards == (Award(1, "b", 920, "gold"),)
    assert after.changes == ({"member": "a", "before": "gold", "after": None}, {"member": "b", "before": "tin", "after": "gold"})
    assert after.sha256 == sha256_of(after.awards)
    scored = table_of({"b": 921, "c": 10})  # only b's score changed: a revision, with no reward change
    again = settlement.revise(after, list(awards(scored.entries(), 2, Order.DESC, after.tiers)))
    assert again is not None and again.revision == 2 and again.changes == ()


def test_the_body_pages_the_awards_and_hashes_them_all() -> None:
    table = table_of({f"m{i:02d}": 1000 - i for i in range(40)})
    made = settlement.first(TIERS, table.entries(), len(table), Order.DESC)
    fields = {"board": "b", "period": "weekly", "period_id": "2026-W49", "closed": False, "size": 40, "seq": 7}
    body = settlement.body(fields, made, 2, 1, preview=True)
    assert body == {**fields, "preview": True, "revision": 0, "sha256": made.sha256,
                    "tiers": [{"reward": "gold", "ranks": [1, 1]}, {"reward": "silver", "top_percent": 12.5},
                              {"reward": "tin", "score": 900}],
                    "awards_total": 40, "awards": [{"rank": 2, "member": "m01", "score": 999, "reward": "silver"},
                                                   {"rank": 3, "member": "m02", "score": 998, "reward": "silver"}]}
    assert settlement.body(fields, made, 10, 40)["awards"] == []
    voided = table_of({f"m{i:02d}": 1000 - i for i in range(1, 40)})
    revised = settlement.revise(made, list(awards(voided.entries(), 39, Order.DESC, made.tiers)))
    assert revised is not None
    body = settlement.body(fields, revised, 1000, 0)
    assert "preview" not in body and body["revision"] == 1 and body["changes"] == [
        {"member": "m00", "before": "gold", "after": None}, {"member": "m01", "before": "silver", "after": "gold"},
        {"member": "m05", "before": "tin", "after": "silver"},  # 12.5 % of 39 is still 5 ranks: m05 moves into them
    ]


@given(members, st.sampled_from([Fraction(25, 2), Fraction(9, 10), Fraction(100), Fraction(333, 10)]), st.booleans())
def test_a_journaled_record_reads_back_as_it_was_made(scores: dict[str, int], percent: Fraction, revised: bool) -> None:
    """The text a board journals is read back by every load: the same settlement, tiers exact."""
    written = (PrizeTier("gold", ranks=(1, 2)), PrizeTier("silver", top_percent=percent), PrizeTier("tin", score=900))
    tiers = tuple(PrizeTier.from_json(t.as_json()) for t in written)  # as a definition's JSON gives them
    assert tiers == written
    table = table_of(scores)
    made = settlement.first(tiers, table.entries(), len(table), Order.DESC)
    if revised and made.awards:
        made = settlement.revise(made, made.awards[1:]) or made
    window = Window(PeriodKind.WEEKLY, "2027-W01", 1_799_020_800_000, 1_799_625_600_000)
    record = settlement.SettlementRecord(7, window, len(table), made)
    again = settlement.SettlementRecord.parse(7, record.text())
    assert again == record and again.key == (PeriodKind.WEEKLY, "2027-W01")
    s = record.settlement
    document = {"period": "weekly", "period_id": "2027-W01", "start": window.start_ms, "end": window.end_ms, "partition": None,
                "size": len(table), "revision": s.revision, "sha256": s.sha256, "tiers": [t.as_json() for t in s.tiers],
                "awards": [a._asdict() for a in s.awards], **({"changes": list(s.changes)} if s.revision else {})}
    assert record.text() == orjson.dumps(document).decode()  # one JSON document, in pieces or not
    for step in (1, 2, 3, 1000):
        assert "".join(record.text_pieces(step)) == record.text()
    assert [t.top_percent for t in again.settlement.tiers if t.top_percent is not None] == [percent]

"""The snapshot format (`arena.snapshot`): what is written reads back the same, a damaged, foreign
or future snapshot is refused with a reason, the validity rules; and `Freeze`: a table's
standings as of the moment a freeze began, however the table changes while it is copied."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.engine.periods import ALLTIME_WINDOW, Calendar, PeriodKind
from arena.engine.scoring import Aggregation, Order, ScoringRule, Standing, Tie
from arena.engine.table import Freeze, RankedTable
from arena.snapshot import FORMAT, MAGIC, Snapshot, SnapshotInvalid, TableImage, decode, encode, rejection

BEST = ScoringRule.for_board(Aggregation.BEST, Order.DESC, Tie.EARLIEST)
LATEST = ScoringRule.for_board(Aggregation.LATEST, Order.DESC, Tie.EARLIEST)
SUM = ScoringRule.for_board(Aggregation.SUM, Order.DESC, Tie.EARLIEST)
RULES = [BEST, LATEST, SUM]
DAY = Calendar("UTC").window_at(PeriodKind.DAILY, 86_400_000 * 20_000)

members = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=8)
standings = st.dictionaries(members, st.tuples(st.integers(-(2**70), 2**70), st.integers(0, 2**40), st.text(max_size=4)))


def table_with(rule: ScoringRule, standings: dict[str, Standing]) -> RankedTable:
    table = RankedTable(rule, ALLTIME_WINDOW)
    for member, standing in standings.items():
        table.set_standing(member, standing)
    return table


def image_of(table: RankedTable) -> TableImage:
    freeze = Freeze(table)
    freeze.copy_entries()
    freeze.copy_keys()
    entries, keys = freeze.standings()
    return TableImage(table.window, entries, keys)


def snapshot_of(*tables: RankedTable) -> Snapshot:
    return Snapshot("b", '{"x":1}', 42, "event k42", {"alltime": None, "daily": DAY.start_ms},
                    {(PeriodKind.DAILY, DAY.period_id): 3}, [image_of(t) for t in tables])


def rows(table: RankedTable) -> list[tuple[str, Standing | None]]:
    return [(e.member, table.standing(e.member)) for e in table.entries()]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(RULES), standings)
def test_a_snapshot_reads_back_to_the_same_tables(rule: ScoringRule, given_standings: dict[str, Standing]) -> None:
    table = table_with(rule, given_standings)
    back = decode(encode(snapshot_of(table, RankedTable(rule, DAY))))
    assert (back.board, back.seq, back.record, back.floors) == ("b", 42, "event k42", {"alltime": None, "daily": DAY.start_ms})
    assert back.disputes == {(PeriodKind.DAILY, DAY.period_id): 3}
    assert [image.window for image in back.tables] == [ALLTIME_WINDOW, DAY]
    loaded = RankedTable.from_entries(rule, ALLTIME_WINDOW, back.tables[0].entries, back.tables[0].keys)
    assert rows(loaded) == rows(table)
    assert loaded.digest() == table.digest()


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(RULES), standings, standings, st.lists(members, max_size=5))
def test_a_freeze_sees_the_table_as_it_began_whatever_changes_meanwhile(
    rule: ScoringRule, before: dict[str, Standing], during: dict[str, Standing], removed: list[str]
) -> None:
    table = table_with(rule, before)
    expected = rows(table)
    freeze = Freeze(table)
    half = dict(list(during.items())[: len(during) // 2])
    for member, standing in half.items():
        table.set_standing(member, standing)
    freeze.copy_entries()
    for member, standing in during.items():
        table.set_standing(member, standing)
    for member in removed:
        table.set_standing(member, None)
    freeze.copy_keys()
    table.set_standing("after the freeze", (1, 1, "k"))
    entries, keys = freeze.standings()
    assert rows(RankedTable.from_entries(rule, ALLTIME_WINDOW, entries, keys)) == expected


def test_a_freeze_sees_merged_updates_as_they_were() -> None:
    table = RankedTable(BEST, ALLTIME_WINDOW)
    table.apply_updates([("a", BEST.update("a", 5, 1, "k1")), ("b", BEST.update("b", 3, 1, "k2"))])
    expected = rows(table)
    freeze = Freeze(table)
    table.apply_updates([("a", BEST.update("a", 9, 2, "k3")), ("c", BEST.update("c", 1, 2, "k4"))])
    freeze.copy_entries()
    freeze.copy_keys()
    entries, _keys = freeze.standings()
    assert rows(RankedTable.from_entries(BEST, ALLTIME_WINDOW, entries, None)) == expected


def damaged(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 1]) + data[middle + 1 :]


@pytest.mark.parametrize(("change", "reason"), [
    (damaged, "checksum"),
    (lambda data: data[: len(data) - 7], "checksum"),
    (lambda data: b"PK\x03\x04" + data[4:], "not an Arena snapshot"),
    (lambda data: b"", "not an Arena snapshot"),
    (lambda data: MAGIC + struct.pack("<I", FORMAT + 1) + data[len(MAGIC) + 4 :], f"format {FORMAT + 1}"),
])
def test_a_damaged_or_future_snapshot_is_refused_with_its_reason(change: object, reason: str) -> None:
    data = encode(snapshot_of(table_with(BEST, {"a": (1, 2, ""), "b": (3, 4, "")})))
    with pytest.raises(SnapshotInvalid, match=reason):
        decode(change(data))  # type: ignore[operator]


FLOORS = {PeriodKind.ALLTIME: None, PeriodKind.DAILY: DAY.start_ms}


def test_a_snapshot_serves_its_own_board_definition_and_record() -> None:
    assert rejection(snapshot_of(), "b", '{"x":1}', "event k42", FLOORS) is None


@pytest.mark.parametrize(("board", "definition", "record", "floors", "reason"), [
    ("c", '{"x":1}', "event k42", FLOORS, "board 'b'"),
    ("b", '{"x":2}', "event k42", FLOORS, "another board definition"),
    ("b", '{"x":1}', None, FLOORS, "no record at its seq 42"),
    ("b", '{"x":1}', "event other", FLOORS, "another record at its seq 42"),
    ("b", '{"x":1}', "event k42", {**FLOORS, PeriodKind.DAILY: (DAY.start_ms or 0) - 86_400_000}, "keep_closed"),
    ("b", '{"x":1}', "event k42", {**FLOORS, PeriodKind.WEEKLY: 0}, "no weekly tables"),
])
def test_a_snapshot_is_refused_when_it_does_not_match_the_journal_and_config(
    board: str, definition: str, record: str | None, floors: dict[PeriodKind, int | None], reason: str
) -> None:
    assert reason in (rejection(snapshot_of(), board, definition, record, floors) or "")


def test_a_later_floor_is_served_by_an_older_snapshot() -> None:
    later = {**FLOORS, PeriodKind.DAILY: (DAY.start_ms or 0) + 86_400_000}
    assert rejection(snapshot_of(), "b", '{"x":1}', "event k42", later) is None

"""The snapshot format (`arena.engine.snapshot`): what is written reads back the same, a damaged, foreign
or future snapshot is refused with a reason, the validity rules; and `Freeze`: a table's
standings as of the moment a freeze began, however the table changes between its runs."""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.engine.periods import ALLTIME_WINDOW, Calendar, PeriodKind, Window
from arena.engine.scoring import Aggregation, Order, ScoringRule, Standing, Tie
from arena.engine.snapshot import FORMAT, MAGIC, Snapshot, SnapshotInvalid, TableImage, TableSource, decode, encode, rejection, seal
from arena.engine.table import Freeze, RankedTable
from support.oracle import OBoard, engine_rows, ranked

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


def read(freeze: Freeze, between: Callable[[], None] = lambda: None) -> Frozen:
    """What a freeze reads (its runs in rank order, then in code point order), calling ``between``
    after each run."""
    entries: list[bytes] = []
    for run in freeze.runs():
        entries += run
        between()
    names: list[str] = []
    named: list[bytes] = []
    keys: list[str] | None = None
    for run_names, run_entries, run_keys in freeze.named():
        names += run_names
        named += run_entries
        if run_keys is not None:
            keys = (keys or []) + run_keys
        between()
    freeze.end()
    return Frozen(freeze.window, entries, names, named, keys)


@dataclass(frozen=True)
class Frozen:
    """A table as a freeze reads it (a `TableSource`): its entries in rank order, and its members in
    code point order with their entries and keys."""

    window: Window
    entries: list[bytes]
    names: list[str]
    named_entries: list[bytes]
    keys: list[str] | None
    partition: str | None = None

    def runs(self) -> list[list[bytes]]:
        return [self.entries]

    def named(self) -> list[tuple[list[str], list[bytes], list[str] | None]]:
        return [(self.names, self.named_entries, self.keys)]


def frozen(table: RankedTable, window: Window | None = None) -> Frozen:
    return replace(read(Freeze(table)), window=window or table.window)


def encoded(snapshot: Snapshot[TableSource, Sequence[bytes]]) -> bytes:
    body: list[bytes] = []
    for _ in encode(snapshot, body):
        pass
    return b"".join(seal(body))


def snapshot_of(*tables: RankedTable | Frozen) -> Snapshot[TableSource, Sequence[bytes]]:
    return Snapshot("b", '{"x":1}', 42, "event k42", {"alltime": None, "daily": DAY.start_ms},
                    {(PeriodKind.DAILY, DAY.period_id): 3},
                    [t if isinstance(t, Frozen) else frozen(t) for t in tables])


def loaded(rule: ScoringRule, image: TableImage) -> RankedTable:
    return RankedTable.from_sorted(rule, image.window, image.names, image.entries, image.order, image.keys)


def rows(table: RankedTable) -> list[tuple[str, Standing | None]]:
    return [(e.member, table.standing(e.member)) for e in table.entries()]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(RULES), standings)
def test_a_snapshot_reads_back_to_the_same_tables(rule: ScoringRule, given_standings: dict[str, Standing]) -> None:
    table = table_with(rule, given_standings)
    back = decode(encoded(snapshot_of(table, RankedTable(rule, DAY))))
    assert (back.board, back.seq, back.record, back.floors) == ("b", 42, "event k42", {"alltime": None, "daily": DAY.start_ms})
    assert back.disputes == {(PeriodKind.DAILY, DAY.period_id): 3}
    assert [image.window for image in back.tables] == [ALLTIME_WINDOW, DAY]
    table_back = loaded(rule, back.tables[0])
    assert rows(table_back) == rows(table)
    assert table_back.digest() == table.digest()


# Any member the protocol accepts (no Cc), lone surrogates included: their UTF-8 order is code point order too.
any_members = st.text(st.characters(blacklist_categories=["Cc"]), min_size=1, max_size=6)
any_standings = st.dictionaries(any_members, st.tuples(st.integers(-(2**70), 2**70), st.integers(0, 2**40), st.text(max_size=3)))


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(RULES), any_standings, any_standings, st.lists(st.integers(0, 2), min_size=1, max_size=5))
def test_tables_read_back_with_their_search_index_and_a_repeated_table_is_written_once(
    rule: ScoringRule, first: dict[str, Standing], second: dict[str, Standing], picks: list[int]
) -> None:
    """Each table reads back with every member's standing and its search index (the members in
    code point order, loaded without a sort); a table whose entries and keys repeat an earlier
    table's has no section of its own and loads as a copy that changes apart from it."""
    sources = [table_with(rule, first), table_with(rule, second), RankedTable(rule, DAY)]
    chosen = [frozen(sources[i], Calendar("UTC").window_at(PeriodKind.DAILY, 86_400_000 * (20_000 + n)))
              for n, i in enumerate(picks)]
    back = decode(encoded(snapshot_of(*chosen)))
    built: list[RankedTable] = []
    for n, (image, i) in enumerate(zip(back.tables, picks, strict=True)):
        repeated = next((j for j in range(n) if (chosen[j].entries, chosen[j].keys) == (chosen[n].entries, chosen[n].keys)), None)
        assert (image.window, image.same_as) == (chosen[n].window, repeated)
        table = loaded(rule, image) if repeated is None else built[repeated].copy(image.window)
        built.append(table)
        original = sources[i]
        assert rows(table) == rows(original) and table.digest() == original.digest()
        assert table.search("", len(original) + 1) == original.search("", len(original) + 1)
        table._sorted._check()
        table._names._check()
    copy = built[0].copy(DAY)
    copy.set_standing("joins the copy", (1, 1, "k"))
    copy.set_standing(next(iter(copy._items), "joins the copy"), None)
    assert rows(built[0]) == rows(sources[picks[0]])


POPULATION: dict[str, Standing] = {f"p{i:04d}": ((i * 7919) % 3000, i % 97, f"k{i}") for i in range(2500)}
"""Members enough for a table's lists to hold several sublists (of about 1,000)."""
changes = st.lists(st.tuples(st.integers(0, 2), st.sampled_from(sorted(POPULATION)[::97]) | members,
                             st.none() | st.tuples(st.integers(-5, 3005), st.integers(0, 100), st.text(max_size=2))),
                   max_size=40)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(RULES), changes)
def test_tables_loaded_as_repeats_change_apart_from_the_table_they_repeat_and_each_other(
    rule: ScoringRule, given_changes: list[tuple[int, str, Standing | None]]
) -> None:
    """A start's tables (`arena.board.load`): the first loaded from its section, the two that
    repeat it as its copies, which share its lists' sublists (`arena.engine.sublists`). Members
    joining, moving and leaving any of the three, in any order, show in that one alone: each
    stays the oracle's ranking of its own standings."""
    week = Calendar("UTC").window_at(PeriodKind.WEEKLY, 86_400_000 * 20_000)
    source = table_with(rule, POPULATION)
    back = decode(encoded(snapshot_of(source, frozen(source, week), frozen(source, DAY))))
    assert [image.same_as for image in back.tables] == [None, 0, 0]
    first = loaded(rule, back.tables[0])
    tables = [first, first.copy(week), first.copy(DAY)]
    models = [dict(POPULATION) for _ in tables]
    for which, member, standing in given_changes:
        tables[which].set_standing(member, standing)
        if standing is None:
            models[which].pop(member, None)
        else:
            models[which][member] = standing
    for table, model in zip(tables, models, strict=True):
        assert engine_rows(table) == ranked(OBoard(), [(m, score, reached) for m, (score, reached, _key) in model.items()])
        assert [e.member for e in table.search("", len(model) + 1)] == sorted(model)
        if rule.aggregation is Aggregation.LATEST:
            assert {m: table.standing(m) for m in model} == model
        table._sorted._check()
        table._names._check()


def test_a_partition_table_reads_back_with_its_partition_and_may_repeat_the_global_one() -> None:
    """A region's table equal to its window's global table (every event in that region) has no
    section of its own, and each table keeps its partition; a header without one is global."""
    rule = RULES[0]
    table = table_with(rule, {"a": (5, 1, "k1"), "b": (7, 2, "k2")})
    global_, region = frozen(table, DAY), replace(frozen(table, DAY), partition="eu")
    back = decode(encoded(snapshot_of(global_, region)))
    assert [(image.partition, image.same_as) for image in back.tables] == [(None, None), ("eu", 0)]
    assert loaded(rule, back.tables[1]).digest() == table.digest()


def test_a_member_holding_a_line_break_is_refused_never_misread() -> None:
    """No member the protocol accepts holds one (DESIGN.md); a table of such a member written
    all the same reads as a snapshot that may not serve."""
    data = encoded(snapshot_of(table_with(BEST, {"a\nb": (1, 2, ""), "c": (3, 4, "")})))
    with pytest.raises(SnapshotInvalid, match="names"):
        decode(data)


# Few names, so that changes mostly hit members the table holds.
names = st.one_of(st.sampled_from("abcdefgh"), members)
few = st.dictionaries(names, st.tuples(st.integers(-(10**6), 10**6), st.integers(0, 10**6), st.text(max_size=2)))
# One change to a table: set a standing, remove a member, merge events in, or set a merged state.
changes = st.one_of(
    st.tuples(st.just("set"), names, st.tuples(st.integers(-(10**6), 10**6), st.integers(0, 10**6), st.text(max_size=2))),
    st.tuples(st.just("remove"), names, st.none()),
    st.tuples(st.just("merge"), st.lists(st.tuples(names, st.integers(-(10**6), 10**6), st.integers(0, 10**6)), max_size=6), st.none()),
    st.tuples(st.just("state"), names, st.tuples(st.integers(-(10**6), 10**6), st.integers(0, 10**6))),
)


def change(table: RankedTable, what: tuple[str, Any, Any]) -> None:
    kind, first, second = what
    rule = table.rule
    if kind == "set":
        table.set_standing(first, second)
    elif kind == "remove":
        table.set_standing(first, None)
    elif kind == "merge":
        table.apply_updates([(m, rule.update(m, value, at, f"k{at}")) for m, value, at in first])
    else:
        table.set_state(first, rule.merge(None, rule.update(first, second[0], second[1], "k")))


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(RULES), few, st.integers(1, 4), st.lists(st.lists(changes, max_size=4), max_size=12))
def test_a_freeze_sees_the_table_as_it_began_whatever_changes_between_its_runs(
    rule: ScoringRule, before: dict[str, Standing], step: int, batches: list[list[tuple[str, Any, Any]]]
) -> None:
    table = table_with(rule, before)
    expected, found = rows(table), table.search("", len(table) + 1)
    freeze = Freeze(table)
    freeze.step = step
    pending = iter(batches)
    for what in next(pending, []):  # changes before the first run too
        change(table, what)

    def between() -> None:
        for what in next(pending, []):
            change(table, what)

    back = loaded(rule, decode(encoded(snapshot_of(read(freeze, between)))).tables[0])
    assert rows(back) == expected and back.search("", len(back) + 1) == found  # the search index too
    table.set_standing("after the freeze", (1, 1, "k"))  # the freeze has ended: no longer told


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
    data = encoded(snapshot_of(table_with(BEST, {"a": (1, 2, ""), "b": (3, 4, "")})))
    with pytest.raises(SnapshotInvalid, match=reason):
        decode(change(data))  # type: ignore[operator]


FLOORS: dict[str, int | None] = {PeriodKind.ALLTIME: None, PeriodKind.DAILY: DAY.start_ms}


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
    board: str, definition: str, record: str | None, floors: dict[str, int | None], reason: str
) -> None:
    assert reason in (rejection(snapshot_of(), board, definition, record, floors) or "")


def test_a_later_floor_is_served_by_an_older_snapshot() -> None:
    later = {**FLOORS, PeriodKind.DAILY: (DAY.start_ms or 0) + 86_400_000}
    assert rejection(snapshot_of(), "b", '{"x":1}', "event k42", later) is None

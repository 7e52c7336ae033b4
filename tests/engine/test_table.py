"""RankedTable: queries at and past both ends, the digest's exact text, and a seeded stress test
that checks the table's internal invariants after random operations."""

from __future__ import annotations

import hashlib
import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedList

from arena.engine.events import Status
from arena.engine.periods import ALLTIME_WINDOW, PeriodKind
from arena.engine.rankkey import unpack
from arena.engine.scoring import Aggregation, Order, ScoringRule, Standing, Tie
from arena.engine.spec import BoardSpec
from arena.engine.sublists import share
from arena.engine.table import Entry, RankedTable
from arena.engine.times import MAX_MS, parse_rfc3339_ms
from support.engine_harness import EngineHarness

BEST = ScoringRule.for_board(Aggregation.BEST, Order.DESC, Tie.EARLIEST)
JSON_SAFE = 2**53 - 1


def table_of(scores: dict[str, int], rule: ScoringRule = BEST) -> RankedTable:
    table = RankedTable(rule, ALLTIME_WINDOW)
    for member, score in scores.items():
        table.set_standing(member, (score, 1000, ""))
    return table


def members(entries: list[Entry] | None) -> list[str]:
    assert entries is not None
    return [e.member for e in entries]


@pytest.fixture
def ten() -> RankedTable:
    """m0 (score 100) ranks 1 ... m9 (score 10) ranks 10."""
    return table_of({f"m{i}": 100 - 10 * i for i in range(10)})


# -- top, offsets --------------------------------------------------------------------------------


def test_top_returns_ranks_offset_plus_one_onwards(ten: RankedTable) -> None:
    assert [(e.rank, e.member, e.score) for e in ten.top(3)] == [(1, "m0", 100), (2, "m1", 90), (3, "m2", 80)]
    assert [e.rank for e in ten.top(3, offset=8)] == [9, 10]


def test_top_past_the_end_is_empty(ten: RankedTable) -> None:
    assert ten.top(10, offset=10) == []
    assert ten.top(5, offset=1000) == []
    assert RankedTable(BEST, ALLTIME_WINDOW).top(10) == []


def test_top_with_a_limit_beyond_the_size_returns_everything(ten: RankedTable) -> None:
    assert len(ten.top(1000)) == 10


# -- around --------------------------------------------------------------------------------------


def test_around_a_member_in_the_middle(ten: RankedTable) -> None:
    assert members(ten.around_member("m5", 2)) == ["m3", "m4", "m5", "m6", "m7"]
    assert [e.rank for e in ten.around_member("m5", 2) or []] == [4, 5, 6, 7, 8]


def test_around_is_clipped_at_the_top(ten: RankedTable) -> None:
    assert members(ten.around_member("m0", 3)) == ["m0", "m1", "m2", "m3"]
    assert members(ten.around_member("m1", 3)) == ["m0", "m1", "m2", "m3", "m4"]
    assert [e.rank for e in ten.around_rank(1, 2)] == [1, 2, 3]


def test_around_is_clipped_at_the_bottom(ten: RankedTable) -> None:
    assert members(ten.around_member("m9", 3)) == ["m6", "m7", "m8", "m9"]
    assert [e.rank for e in ten.around_rank(10, 2)] == [8, 9, 10]


def test_around_is_clipped_at_both_ends_on_a_small_table() -> None:
    table = table_of({"a": 3, "b": 2, "c": 1})
    assert members(table.around_member("b", 100)) == ["a", "b", "c"]


def test_around_radius_zero_is_the_entry_alone(ten: RankedTable) -> None:
    assert members(ten.around_member("m4", 0)) == ["m4"]
    assert [e.rank for e in ten.around_rank(7, 0)] == [7]


def test_around_a_rank_past_the_end_keeps_what_is_within_the_radius(ten: RankedTable) -> None:
    assert [e.rank for e in ten.around_rank(12, 3)] == [9, 10]
    assert ten.around_rank(20, 3) == []


def test_a_window_wholly_before_rank_one_is_empty_not_counted_from_the_end(ten: RankedTable) -> None:
    assert ten.around_rank(-5, 2) == []
    assert [e.rank for e in ten.around_rank(-1, 3)] == [1, 2]  # ranks -4..2
    assert ten.top(5, -8) == []


def test_around_an_unknown_member_is_none(ten: RankedTable) -> None:
    assert ten.around_member("nobody", 5) is None


# -- single lookups ------------------------------------------------------------------------------


def test_at_rank_at_both_ends_and_past_them(ten: RankedTable) -> None:
    assert ten.at_rank(1) == Entry(1, "m0", 100, 1000)
    assert ten.at_rank(10) == Entry(10, "m9", 10, 1000)
    assert ten.at_rank(0) is None and ten.at_rank(11) is None and ten.at_rank(-1) is None


def test_entry_and_rank_index(ten: RankedTable) -> None:
    assert ten.entry("m3") == Entry(4, "m3", 70, 1000)
    assert ten.rank_index("m3") == 3
    assert ten.entry("nobody") is None and ten.rank_index("nobody") is None


def test_set_standing_none_removes_the_member_and_ranks_close_up(ten: RankedTable) -> None:
    ten.set_standing("m2", None)
    assert len(ten) == 9 and ten.entry("m2") is None and ten.standing("m2") is None
    assert ten.entry("m3") == Entry(3, "m3", 70, 1000)
    assert [e.rank for e in ten.entries()] == list(range(1, 10))
    ten.set_standing("m2", None)  # removing an absent member is a no-op
    assert len(ten) == 9


def test_set_standing_replaces_and_moves_the_member(ten: RankedTable) -> None:
    ten.set_standing("m9", (1000, 5, ""))
    assert ten.entry("m9") == Entry(1, "m9", 1000, 5)
    assert len(ten) == 10


def test_apply_folds_and_says_whether_the_standing_changed() -> None:
    table = RankedTable(BEST, ALLTIME_WINDOW)
    assert table.apply("a", 5, 100, "k1")
    assert not table.apply("a", 4, 50, "k2")  # lower: no change
    assert not table.apply("a", 5, 200, "k3")  # same score later: keeps the earliest
    assert table.apply("a", 5, 50, "k4")  # same score earlier: reached_at moves back
    assert table.standing("a") == (5, 50, "")


def test_latest_keeps_the_deciding_key_per_member() -> None:
    rule = ScoringRule.for_board(Aggregation.LATEST, Order.DESC, Tie.EARLIEST)
    table = RankedTable(rule, ALLTIME_WINDOW)
    table.apply("a", 5, 100, "k2")
    assert not table.apply("a", 9, 100, "k1")  # same instant, smaller key: loses
    assert table.apply("a", 1, 100, "k3")
    assert table.standing("a") == (1, 100, "k3")
    table.set_standing("a", None)
    assert table.standing("a") is None


# -- digest --------------------------------------------------------------------------------------


def test_the_digest_of_an_empty_table_is_sha256_of_nothing() -> None:
    assert RankedTable(BEST, ALLTIME_WINDOW).digest() == hashlib.sha256(b"").hexdigest()


def test_the_digest_text_is_one_tab_separated_line_per_entry_in_rank_order() -> None:
    rule = ScoringRule.for_board(Aggregation.SUM, Order.DESC, Tie.EARLIEST)
    table = RankedTable(rule, ALLTIME_WINDOW)
    table.set_standing("zoë/1", (-5, 1_780_000_000_123, ""))
    table.set_standing("a%b", (12, 0, ""))
    table.set_standing("b", (12, 7, ""))
    text = "1\ta%b\t12\t0\n2\tb\t12\t7\n3\tzoë/1\t-5\t1780000000123\n"
    assert table.digest() == hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_the_digest_streams_large_tables_identically() -> None:
    table = table_of({f"m{i:05d}": i % 97 for i in range(10_000)})
    text = "".join(f"{e.rank}\t{e.member}\t{e.score}\t{e.reached_at}\n" for e in table.entries())
    assert table.digest() == hashlib.sha256(text.encode()).hexdigest()


def test_a_snapshot_keeps_its_standings_while_the_table_changes() -> None:
    table = table_of({f"m{i:05d}": i % 97 for i in range(10_000)})
    before = table.digest()
    snapshot = table.snapshot()
    pieces = table.canonical_text(snapshot, 1000)
    first = next(pieces)
    table.set_standing("m00000", (10**6, 0, ""))  # a new first place, mid-way through the text
    table.set_standing("m00001", None)
    h = hashlib.sha256(first)
    for piece in pieces:
        h.update(piece)
    assert h.hexdigest() == before != table.digest()


# -- sort keys -----------------------------------------------------------------------------------


RULES = [ScoringRule.for_board(a, o, t) for a in Aggregation for o in Order for t in Tie]
SCORES = st.one_of(st.integers(-JSON_SAFE, JSON_SAFE), st.integers(-(2**80), 2**80))  # sums may outgrow 2**53
INSTANTS = st.integers(0, MAX_MS - 1)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(RULES), SCORES, INSTANTS)
def test_a_sort_key_unpacks_to_its_standing(rule: ScoringRule, score: int, reached_at: int) -> None:
    assert rule.unpack(rule.sort_key(score, reached_at)) == (score, reached_at)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(RULES), st.tuples(SCORES, INSTANTS), st.tuples(SCORES, INSTANTS))
def test_sort_keys_order_like_the_contract(rule: ScoringRule, a: tuple[int, int], b: tuple[int, int]) -> None:
    def contract(s: tuple[int, int]) -> tuple[int, int]:
        score, reached = s
        return (-score if rule.order is Order.DESC else score, reached if rule.tie is Tie.EARLIEST else -reached)

    assert (rule.sort_key(*a) < rule.sort_key(*b)) == (contract(a) < contract(b))
    assert (rule.sort_key(*a) == rule.sort_key(*b)) == (a == b)


@settings(max_examples=500, deadline=None)
@given(st.sampled_from([r for r in RULES if r.improves_by_key]), st.tuples(SCORES, INSTANTS), st.tuples(SCORES, INSTANTS))
def test_improves_by_key_means_the_fold_changes_a_standing_exactly_when_the_key_is_smaller(
    rule: ScoringRule, standing: tuple[int, int], event: tuple[int, int]
) -> None:
    new = rule.fold((*standing, ""), *event, "k")
    assert (new is not None) == (rule.sort_key(*event) < rule.sort_key(*standing))
    assert new is None or new == (*event, "")


EVENTS = st.lists(st.tuples(st.sampled_from("abcd"), st.integers(-5, 5), st.integers(0, 5), st.text("xyz", max_size=2)))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(RULES), EVENTS, EVENTS)
def test_apply_updates_equals_folding_the_events_one_by_one(
    rule: ScoringRule, before: list[tuple[str, int, int, str]], batch: list[tuple[str, int, int, str]]
) -> None:
    table = RankedTable(rule, ALLTIME_WINDOW)
    model: dict[str, Standing] = {}
    for events in (before, batch):
        changed = set()
        for member, value, at, key in events:
            new = rule.fold(model.get(member), value, at, key)
            if new is not None:
                model[member] = new
                changed.add(member)
        assert table.apply_updates((m, rule.update(m, v, o, k)) for m, v, o, k in events) == len(changed)
        check_invariants(table, model)


# -- a set of members (friends) ------------------------------------------------------------------


def test_entries_of_a_set_are_in_rank_order_with_global_ranks(ten: RankedTable) -> None:
    found, missing = ten.entries_of(["m7", "nobody", "m2", "m7", "ghost", "nobody"])
    assert [(e.rank, e.member) for e in found] == [(3, "m2"), (8, "m7")]
    assert missing == ["nobody", "ghost"]


def test_entries_of_an_empty_table_are_all_missing() -> None:
    assert table_of({}).entries_of(["b", "a", "b"]) == ([], ["b", "a"])


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(RULES),
    st.dictionaries(st.text("abcdef", min_size=1, max_size=2), st.tuples(st.integers(-3, 3), st.integers(0, 3))),
    st.lists(st.text("abcdefg", min_size=1, max_size=2), max_size=30),
)
def test_entries_of_equals_picking_the_members_from_the_whole_table(
    rule: ScoringRule, standings: dict[str, tuple[int, int]], asked: list[str]
) -> None:
    table = RankedTable(rule, ALLTIME_WINDOW)
    for member, (score, reached_at) in standings.items():
        table.set_standing(member, (score, reached_at, ""))
    everyone = list(table.entries())  # the oracle: the table's entries, filtered
    in_table = {e.member for e in everyone}
    expected_missing: list[str] = []
    for member in asked:
        if member not in in_table and member not in expected_missing:
            expected_missing.append(member)
    assert table.entries_of(asked) == ([e for e in everyone if e.member in asked], expected_missing)


# -- prefix search -------------------------------------------------------------------------------


def test_search_lists_the_members_starting_with_a_prefix_in_code_point_order(ten: RankedTable) -> None:
    ten.set_standing("M1", (55, 1000, ""))
    ten.set_standing("m10", (5, 1000, ""))
    assert [(e.member, e.rank) for e in ten.search("m1", 20)] == [("m1", 2), ("m10", 12)]
    assert [e.member for e in ten.search("m", 3)] == ["m0", "m1", "m10"]
    assert [e.member for e in ten.search("M", 20)] == ["M1"]  # case-sensitive
    assert ten.search("x", 20) == []


_NAMES = st.text(st.sampled_from("aAbé/%\U0001f600"), min_size=1, max_size=3)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(RULES),
    st.dictionaries(_NAMES, st.tuples(st.integers(-3, 3), st.integers(0, 3))),
    st.lists(_NAMES, max_size=5),
    _NAMES,
    st.integers(1, 8),
)
def test_search_equals_filtering_the_sorted_members(
    rule: ScoringRule, standings: dict[str, tuple[int, int]], removed: list[str], prefix: str, limit: int
) -> None:
    table = RankedTable(rule, ALLTIME_WINDOW)
    for member, (score, reached_at) in standings.items():
        table.set_standing(member, (score, reached_at, ""))
    for member in removed:
        table.set_standing(member, None)
    everyone = {e.member: e for e in table.entries()}  # the oracle: a sorted list, filtered
    expected = [everyone[m] for m in sorted(everyone) if m.startswith(prefix)][:limit]
    assert table.search(prefix, limit) == expected
    kept = {m: standing for m in everyone if (standing := table.standing(m)) is not None}
    rebuilt = RankedTable.from_standings(rule, ALLTIME_WINDOW, kept)
    assert rebuilt.search(prefix, limit) == expected


# -- stress --------------------------------------------------------------------------------------


def check_invariants(table: RankedTable, model: dict[str, Standing]) -> None:
    """The table's two indexes agree with each other and with a plain dict of standings."""
    items = table._items
    ordered = list(table._sorted)
    table._sorted._check()  # sortedcontainers' own structural check
    assert len(items) == len(ordered) == len(table) == len(model)
    assert set(items.values()) == set(ordered)
    assert all(items[unpack(item)[1]] is item for item in ordered)  # shared entries, no copies
    assert ordered == sorted(ordered)
    assert all(a < b for a, b in itertools.pairwise(ordered))  # unique members make a strict order
    if table._keys is not None:
        assert set(table._keys) == set(items)
    table._names._check()
    assert list(table._names) == sorted(items)
    assert all(items.get(name) is not None for name in table._names)
    rule = table.rule
    expected = sorted(model, key=lambda m: (rule.sort_key(model[m][0], model[m][1]), m))
    entries = list(table.entries())
    assert [e.member for e in entries] == expected
    assert [e.rank for e in entries] == list(range(1, len(model) + 1))
    for e in entries:
        score, reached, key = model[e.member]
        assert (e.score, e.reached_at) == (score, reached)
        assert table.standing(e.member) == (score, reached, key if rule.aggregation is Aggregation.LATEST else "")
        assert table.rank_index(e.member) == e.rank - 1
        assert table.at_rank(e.rank) == e


@pytest.mark.parametrize("seed", range(len(RULES)))
def test_random_operations_keep_the_table_consistent(seed: int) -> None:
    rnd = random.Random(seed)
    rule = RULES[seed]  # one seed per aggregation x order x tie
    table = RankedTable(rule, ALLTIME_WINDOW)
    model: dict[str, Standing] = {}
    names = [f"p{i}" for i in range(rnd.choice([5, 50, 400]))]
    for step in range(3000):
        member = rnd.choice(names)
        op = rnd.random()
        if op < 0.6:  # an event, folded like the live path
            value, at, key = rnd.randint(-20, 20), rnd.randint(0, 50), f"k{rnd.randint(0, 9)}"
            changed = table.apply(member, value, at, key)
            new = rule.fold(model.get(member), value, at, key)
            assert changed == (new is not None)
            if new is not None:
                model[member] = new
        elif op < 0.85:  # a recompute (void) sets a standing from scratch
            standing = (rnd.randint(-20, 20), rnd.randint(0, 50), f"k{rnd.randint(0, 9)}")
            if rule.aggregation is not Aggregation.LATEST:
                standing = (standing[0], standing[1], "")
            table.set_standing(member, standing)
            model[member] = standing
        else:  # a removal (every event of the member voided)
            table.set_standing(member, None)
            model.pop(member, None)
        if step % 500 == 0:
            check_invariants(table, model)
    check_invariants(table, model)
    rebuilt = RankedTable.from_standings(rule, ALLTIME_WINDOW, model)
    check_invariants(rebuilt, model)
    assert rebuilt.digest() == table.digest()
    radius = rnd.randint(0, 10)
    for member in rnd.sample(sorted(model), min(20, len(model))):
        index = table.rank_index(member)
        assert index is not None
        around = table.around_member(member, radius)
        assert around == list(table.entries())[max(0, index - radius) : index + radius + 1]


def test_an_event_in_several_tables_is_packed_once_and_they_share_its_entry() -> None:
    # memory: on a board with the default rule, a member whose best event counts in the
    # alltime, weekly and daily tables costs one entry object, not three
    spec = BoardSpec("b", periods=(PeriodKind.ALLTIME, PeriodKind.WEEKLY, PeriodKind.DAILY))
    harness = EngineHarness({"b": spec})
    now = parse_rfc3339_ms("2026-06-03T12:00:00Z")
    event = {"board": "b", "member": "alice", "value": 5, "occurred_at": now, "idempotency_key": "k1"}
    assert [r.status for r in harness.submit("gs", [event], now)] == [Status.ACCEPTED]
    tables = list(harness.engines["b"].tables.values())
    assert len(tables) == 3
    assert tables[0]._items["alice"] is tables[1]._items["alice"] is tables[2]._items["alice"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 60), max_size=60), st.integers(1, 3),
       st.lists(st.tuples(st.integers(0, 2), st.booleans(), st.integers(0, 60)), max_size=150))
def test_sorted_lists_that_share_their_sublists_change_apart(
    values: list[int], copies: int, changes: list[tuple[int, bool, int]]
) -> None:
    """`share` against plain lists: a list and its copies (copies of copies too) share sublists,
    and an add or a removal on any of them (splits and merges included: a load of 4) shows in that
    one alone."""
    first = SortedList(values)
    first._reset(4)
    lists = [first]
    for n in range(copies):
        lists.append(share(lists[n // 2]))
    models = [sorted(values) for _ in lists]
    for which, add, value in changes:
        which %= len(lists)
        if add:
            lists[which].add(value)
            models[which] = sorted([*models[which], value])
        elif value in models[which]:
            lists[which].remove(value)
            models[which].remove(value)
        for sorted_list, model in zip(lists, models, strict=True):
            assert list(sorted_list) == model
            sorted_list._check()
    for sorted_list in lists:  # a plain SortedList again once it shares nothing
        assert (type(sorted_list) is SortedList) == (not getattr(sorted_list, "_shared", {}))


def test_a_copy_of_a_table_shares_its_sublists_until_either_changes_one() -> None:
    table = table_of({f"m{i:05d}": i for i in range(5000)})
    copy = table.copy(ALLTIME_WINDOW)
    assert [id(s) for s in copy._sorted._lists] == [id(s) for s in table._sorted._lists]
    table.set_standing("m00000", (10**6, 1000, ""))  # the last sublist (rank order) and the first (names)
    assert copy.entry("m00000") == Entry(5000, "m00000", 0, 1000)
    assert table.entry("m00000") == Entry(1, "m00000", 10**6, 1000)
    shared = [a is b for a, b in zip(table._sorted._lists, copy._sorted._lists, strict=False)]
    assert True in shared and False in shared  # the sublists the move touched are copied, the others still shared
    copy.set_standing("m04999", None)
    assert "m04999" in table._items and table.search("m0499", 20)[-1].member == "m04999"
    assert [e.member for e in copy.search("m0499", 20)][-1] == "m04998"


def test_a_sublist_is_copied_by_each_list_that_changes_it_but_the_last_that_holds_it() -> None:
    first = SortedList(range(100))
    first._reset(10)
    copy = share(first)
    held = id(first._lists[0])  # by id: a reference here would be one more holder
    copy.add(0)
    assert id(copy._lists[0]) != held and id(first._lists[0]) == held
    first.add(0)  # no other list holds it now (a copy would have been made while it lived: another id)
    assert id(first._lists[0]) == held
    assert list(first) == list(copy) == sorted([0, *range(100)])

"""Entries as bytes: byte order must be (sort_key, member) order, for any key and any member."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from arena.engine.rankkey import pack, pack_all, sort_key_of, split_all, unpack

# the inline form's edges (keys of scores within ±2**62), and the length-prefixed forms beyond
EDGES = [-(1 << 127) - 1, -(1 << 127), (1 << 127) - 1, 1 << 127, -(1 << 135), 1 << 135]
KEYS = st.one_of(
    st.integers(-(1 << 70), 1 << 70),
    st.integers(-(1 << 300), 1 << 300),
    st.sampled_from(EDGES).flatmap(lambda edge: st.integers(edge - 300, edge + 300)),
)
MEMBERS = st.text(st.characters(blacklist_categories=()), max_size=6)  # lone surrogates included


@settings(max_examples=1000, deadline=None)
@given(KEYS, MEMBERS)
def test_an_entry_unpacks_to_its_key_and_member(key: int, member: str) -> None:
    item = pack(key, member)
    assert unpack(item) == (key, member)
    assert sort_key_of(item) == key


@given(st.lists(st.tuples(KEYS, MEMBERS), max_size=30))
def test_split_all_gives_each_key_and_member_in_utf8(pairs: list[tuple[int, str]]) -> None:
    items = [pack(k, m) for k, m in pairs]
    assert list(split_all(items)) == [(k, m.encode("utf-8", "surrogatepass")) for k, m in pairs]


@settings(max_examples=2000, deadline=None)
@given(st.tuples(KEYS, MEMBERS), st.tuples(KEYS, MEMBERS))
@example((0, "\uffff"), (0, "\U00010000"))  # UTF-16 would order these the other way
@example((0, "\ud800"), (0, "\ue000"))
@example((0, "a"), (0, "a\x00"))
def test_entries_order_like_key_then_member(a: tuple[int, str], b: tuple[int, str]) -> None:
    assert (pack(*a) < pack(*b)) == (a < b)
    assert (pack(*a) == pack(*b)) == (a == b)


@given(st.lists(st.tuples(KEYS, MEMBERS), max_size=30))
def test_sorting_entries_sorts_by_key_then_member(pairs: list[tuple[int, str]]) -> None:
    assert [unpack(item) for item in sorted(pack(k, m) for k, m in pairs)] == sorted(pairs)


@given(st.lists(st.tuples(KEYS, MEMBERS), max_size=30))
def test_pack_all_packs_each_as_pack_does(pairs: list[tuple[int, str]]) -> None:
    assert pack_all([k for k, _ in pairs], [m for _, m in pairs]) == [pack(k, m) for k, m in pairs]

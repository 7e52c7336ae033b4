"""One ranked table: the standings of one period window of one board.

Members are kept twice, sharing objects: a dict ``member -> entry`` for O(1) lookup, and a
SortedList of those same entries for O(log n) rank and slicing. An entry is
`rankkey.pack(sort_key, member)` with ``sort_key`` from `ScoringRule.sort_key`, so entry order
is exactly rank order with the member string as the last tie-breaker.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from sortedcontainers import SortedList

from arena.engine.periods import Window
from arena.engine.rankkey import decode_member, member_of, pack, sort_key_of, split_all, unpack
from arena.engine.scoring import Aggregation, ScoringRule, Standing, State, Update


class Entry(NamedTuple):
    rank: int
    member: str
    score: int
    reached_at: int


class RankedTable:
    """Standings of one window. Every query is O(log n) plus the entries it returns."""

    __slots__ = ("rule", "window", "closed_at", "closed_seq", "disputes", "_items", "_sorted", "_keys", "_undo")

    def __init__(self, rule: ScoringRule, window: Window) -> None:
        self.rule = rule
        self.window = window
        self.closed_at: int | None = None
        self.closed_seq: int | None = None
        self.disputes = 0
        self._items: dict[str, bytes] = {}
        self._sorted: SortedList = SortedList()  # its default load (1000) suits ~10**6 entries
        # Only the latest aggregation needs each member's deciding key (ties on occurred_at).
        self._keys: dict[str, str] | None = {} if rule.aggregation is Aggregation.LATEST else None
        self._undo: dict[str, tuple[bytes | None, str]] | None = None
        """While a `Freeze` is under way: each member changed since it began, with its entry and
        deciding key from before its first change (None: the member had no entry)."""

    @classmethod
    def from_standings(cls, rule: ScoringRule, window: Window, standings: dict[str, Standing]) -> RankedTable:
        """Build a table in one sort instead of n inserts. O(n log n)."""
        table = cls(rule, window)
        sort_key = rule.sort_key
        items = table._items
        for member, (score, reached_at, _key) in standings.items():
            items[member] = pack(sort_key(score, reached_at), member)
        table._sorted = SortedList(items.values())
        if table._keys is not None:
            table._keys = {member: key for member, (_s, _r, key) in standings.items()}
        return table

    @classmethod
    def from_states(cls, rule: ScoringRule, window: Window, states: dict[str, State], like: RankedTable | None = None) -> RankedTable:
        """Build a table in one sort from member states merged by `ScoringRule.merge` (a replay);
        packed entries are taken with their dict. ``like``: a table whose entries these states
        are (`same_states`), whose order is taken instead of sorting again. O(n log n); O(n)
        with ``like``."""
        if not rule.improves_by_key:
            return cls.from_standings(rule, window, states)
        table = cls(rule, window)
        table._items = states
        # sorted() of a sorted run (the entries of ``like``) is one comparison per entry
        table._sorted = SortedList(like._sorted if like is not None else states.values())
        return table

    def same_states(self, states: dict[str, State]) -> bool:
        """True when ``states`` are this table's packed entries (only a rule that
        `improves_by_key` keeps them as they are). O(n), a few ns an entry when the states
        share their objects with the table's."""
        return self.rule.improves_by_key and self._items == states

    @classmethod
    def from_entries(cls, rule: ScoringRule, window: Window, entries: Sequence[bytes], keys: Sequence[str] | None) -> RankedTable:
        """A table holding ``entries`` (packed, in rank order, as `Freeze.standings` gives them)
        and, for the latest aggregation, each entry's deciding key. O(n)."""
        table = cls(rule, window)
        members = [member_of(item) for item in entries]
        table._items = dict(zip(members, entries, strict=True))
        table._sorted = SortedList(entries)  # already in order: the sort is one pass
        if table._keys is not None:
            assert keys is not None, "a latest table needs its keys"
            table._keys = dict(zip(members, keys, strict=True))
        return table

    @property
    def closed(self) -> bool:
        return self.closed_seq is not None

    def __len__(self) -> int:
        return len(self._items)

    def standing(self, member: str) -> Standing | None:
        item = self._items.get(member)
        if item is None:
            return None
        score, reached_at = self.rule.unpack(sort_key_of(item))
        return (score, reached_at, self._keys[member] if self._keys is not None else "")

    def apply(self, member: str, value: int, occurred_at: int, key: str) -> bool:
        """Fold one event into the member's standing; True when the standing changed. O(log n)."""
        return self.apply_updates([(member, self.rule.update(member, value, occurred_at, key))]) > 0

    def apply_updates(self, updates: Iterable[tuple[str, Update]]) -> int:
        """Merge events in, each given as ``(member, rule.update(member, ...))``: a member's entry
        moves once however many of its events there are (merges are order-independent), and its
        entry is looked up once. Returns how many members changed.
        O(events + changed members * log n)."""
        merge = self.rule.merge
        packed = self.rule.improves_by_key
        current = self._items.get if packed else self.standing
        pending: dict[str, State] = {}
        before: dict[str, State | None] = {}  # the member's state in the table
        for member, update in updates:
            if member in pending:
                new = merge(pending[member], update)
            else:
                old = current(member)
                new = merge(old, update)
                if new is not None:
                    before[member] = old
            if new is not None:
                pending[member] = new
        if not packed:
            for member, standing in pending.items():
                self.set_standing(member, standing)
            return len(pending)
        items, add, remove, undo = self._items, self._sorted.add, self._sorted.remove, self._undo
        for member, entry in pending.items():
            old = before[member]
            if undo is not None and member not in undo:
                undo[member] = (old, "")
            if old is not None:
                remove(old)
            items[member] = entry
            add(entry)
        return len(pending)

    def set_state(self, member: str, state: State | None) -> None:
        """Replace a member's state as `ScoringRule.merge` makes it (None removes the member).
        O(log n)."""
        if not self.rule.improves_by_key or state is None:
            self.set_standing(member, state)
            return
        old = self._items.get(member)
        self._remember(member, old)
        if old is not None:
            self._sorted.remove(old)
        self._items[member] = state
        self._sorted.add(state)

    def set_standing(self, member: str, standing: Standing | None) -> None:
        """Replace a member's standing (None removes the member). O(log n)."""
        old = self._items.get(member)
        self._remember(member, old)
        if old is not None:
            self._sorted.remove(old)
        if standing is None:
            if old is not None:
                del self._items[member]
                if self._keys is not None:
                    del self._keys[member]
            return
        item = pack(self.rule.sort_key(standing[0], standing[1]), member)
        self._items[member] = item
        self._sorted.add(item)
        if self._keys is not None:
            self._keys[member] = standing[2]

    def _remember(self, member: str, old: bytes | None) -> None:
        """Keep a member's entry from before its first change while a `Freeze` is under way."""
        undo = self._undo
        if undo is not None and member not in undo:
            undo[member] = (old, self._keys.get(member, "") if self._keys is not None else "")

    def _entry(self, index: int, item: bytes) -> Entry:
        sort_key, member = unpack(item)
        score, reached_at = self.rule.unpack(sort_key)
        return Entry(index + 1, member, score, reached_at)

    def _run(self, start: int, items: Iterable[bytes]) -> Iterator[tuple[int, bytes, int, int]]:
        """(rank, member in UTF-8, score, reached_at) of consecutive entries from index ``start``."""
        score_of = self.rule.unpack
        for rank, (sort_key, member) in enumerate(split_all(items), start + 1):
            score, reached_at = score_of(sort_key)
            yield rank, member, score, reached_at

    def _entries(self, start: int, items: Iterable[bytes]) -> Iterator[Entry]:
        for rank, member, score, reached_at in self._run(start, items):
            yield Entry(rank, decode_member(member), score, reached_at)

    def _slice(self, start: int, stop: int) -> list[Entry]:
        # clipped at both ends: a negative index would count from the end (and cost O(n))
        start, stop = max(start, 0), max(stop, 0)
        return list(self._entries(start, self._sorted.islice(start, stop)))

    def rank_index(self, member: str) -> int | None:
        """0-based position of a member, or None. O(log n)."""
        item = self._items.get(member)
        if item is None:
            return None
        return int(self._sorted.bisect_left(item))

    def entry(self, member: str) -> Entry | None:
        """A member's rank, score and reached_at, or None. O(log n)."""
        index = self.rank_index(member)
        if index is None:
            return None
        return self._entry(index, self._items[member])

    def entries_of(self, members: Iterable[str]) -> tuple[list[Entry], list[str]]:
        """The entries of those ``members`` in the table, in rank order, and the others (first
        occurrences, in the order given); a repeated member counts once. O(k log n) for k members."""
        found: list[bytes] = []
        missing: list[str] = []
        items = self._items
        for member in dict.fromkeys(members):
            item = items.get(member)
            if item is None:
                missing.append(member)
            else:
                found.append(item)
        found.sort()  # packed entries sort in rank order
        index = self._sorted.bisect_left
        return [self._entry(index(item), item) for item in found], missing

    def at_rank(self, rank: int) -> Entry | None:
        """The entry at a 1-based rank, or None past the end. O(log n)."""
        if not 1 <= rank <= len(self._items):
            return None
        return self._entry(rank - 1, self._sorted[rank - 1])

    def top(self, limit: int, offset: int = 0) -> list[Entry]:
        """Entries at ranks offset+1 .. offset+limit. O(log n + limit)."""
        return self._slice(offset, offset + limit)

    def around_rank(self, rank: int, radius: int) -> list[Entry]:
        """Entries within ``radius`` ranks of ``rank``, clipped at both ends. O(log n + radius)."""
        return self._slice(rank - 1 - radius, rank + radius)

    def around_member(self, member: str, radius: int) -> list[Entry] | None:
        """The member's neighbours (None if the member has no entry). O(log n + radius)."""
        index = self.rank_index(member)
        if index is None:
            return None
        return self.around_rank(index + 1, radius)

    def entries(self) -> Iterator[Entry]:
        """Every entry in rank order. O(n)."""
        return self._entries(0, self._sorted)

    def snapshot(self) -> list[bytes]:
        """Every entry in rank order, as a list the table's later changes do not touch (entries
        are immutable): a digest of it may be taken in steps. O(n), about 30 ms at 10**6."""
        return list(self._sorted)

    def canonical_text(self, entries: Iterable[bytes], lines: int = 4096) -> Iterator[bytes]:
        """The canonical standings text of ``entries`` (the whole table, in rank order), one
        line per entry, in pieces of ``lines`` lines. O(len(entries))."""
        piece: list[bytes] = []
        for line in self._run(0, entries):
            piece.append(b"%d\t%b\t%d\t%d\n" % line)
            if len(piece) >= lines:
                yield b"".join(piece)
                piece.clear()
        if piece:
            yield b"".join(piece)

    def digest(self) -> str:
        """sha256 of the canonical standings text. O(n): about 1 s of CPU at 10**6 entries."""
        h = hashlib.sha256()
        for piece in self.canonical_text(self._sorted):
            h.update(piece)
        return h.hexdigest()


class Freeze:
    """A table's standings as of the moment the freeze began, taken while the table goes on
    changing: the table remembers the entry (and deciding key) each member had before its first
    change since then, so that the entries can be copied in one turn of the event loop and the
    keys in another (each about 45 ms at 10**6 entries: one incref per entry, scattered in memory), and the rest (`standings`) can run in a
    thread. Call `copy_entries`, then `copy_keys` (which ends the freeze) from the loop."""

    def __init__(self, table: RankedTable) -> None:
        self.table = table
        self._changed: dict[str, tuple[bytes | None, str]] = {}
        table._undo = self._changed
        self._entries: list[bytes] = []
        self._rewind: list[tuple[bytes | None, bytes | None]] = []  # (entry at the copy, entry at the start)
        self._keys: dict[str, str] | None = None

    def copy_entries(self) -> None:
        """Copy the entries as they are now, and how the members changed so far differ. O(n)."""
        table = self.table
        self._entries = list(table._sorted)
        self._rewind = [(table._items.get(member), old) for member, (old, _key) in self._changed.items()]

    def copy_keys(self) -> None:
        """Copy the deciding keys (latest aggregation) and end the freeze. O(n) or O(1)."""
        table = self.table
        if table._keys is not None:
            self._keys = dict(table._keys)
            for member, (old, key) in self._changed.items():
                if old is None:
                    self._keys.pop(member, None)
                else:
                    self._keys[member] = key
        self.end()

    def end(self) -> None:
        """Stop remembering changes (also when the freeze is abandoned). O(1)."""
        if self.table._undo is self._changed:
            self.table._undo = None

    def standings(self) -> tuple[list[bytes], list[str] | None]:
        """The entries in rank order as of the start, and (latest aggregation) each one's
        deciding key. Touches no live state: may run in a thread. O(n + changed * log n)."""
        drop = sorted(now for now, _old in self._rewind if now is not None)
        add = sorted(old for _now, old in self._rewind if old is not None)
        entries = _with(_without(self._entries, drop), add)
        if self._keys is None:
            return entries, None
        keys = self._keys
        return entries, [keys[member_of(item)] for item in entries]


def _without(entries: list[bytes], drop: list[bytes]) -> list[bytes]:
    """``entries`` (sorted) less ``drop`` (sorted, each in it), in slices. O(n + k log n)."""
    if not drop:
        return entries
    out: list[bytes] = []
    start = 0
    for item in drop:
        index = bisect_left(entries, item, start)
        out += entries[start:index]
        start = index + 1
    out += entries[start:]
    return out


def _with(entries: list[bytes], add: list[bytes]) -> list[bytes]:
    """``entries`` (sorted) and ``add`` (sorted) merged, in slices. O(n + k log n)."""
    if not add:
        return entries
    out: list[bytes] = []
    start = 0
    for item in add:
        index = bisect_left(entries, item, start)
        out += entries[start:index]
        out.append(item)
        start = index
    out += entries[start:]
    return out

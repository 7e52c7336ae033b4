"""One ranked table: the standings of one period window of one board.

Members are kept three times, sharing objects: a dict ``member -> entry`` for O(1) lookup, a
SortedList of those same entries for O(log n) rank and slicing, and a SortedList of the member
names (the dict's own strings) for a prefix search in code point order. An entry is
`rankkey.pack(sort_key, member)` with ``sort_key`` from `ScoringRule.sort_key`, so entry order
is exactly rank order with the member string as the last tie-breaker. The names move only when
a member joins or leaves the table, never when its score changes.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Iterable, Iterator, Sequence
from itertools import filterfalse, islice
from typing import Any, NamedTuple, cast

from sortedcontainers import SortedList

from arena.engine.periods import Window
from arena.engine.rankkey import decode_member, pack, pack_all, sort_key_of, split_all, unpack
from arena.engine.scoring import Aggregation, ScoringRule, Standing, State, Update
from arena.engine.sublists import share


class Entry(NamedTuple):
    rank: int
    member: str
    score: int
    reached_at: int


class RankedTable:
    """Standings of one window. Every query is O(log n) plus the entries it returns."""

    __slots__ = ("rule", "window", "partition", "closed_at", "closed_seq", "disputes", "_items", "_sorted", "_names", "_keys", "_freeze")

    def __init__(self, rule: ScoringRule, window: Window) -> None:
        self.rule = rule
        self.window = window
        self.partition: str | None = None
        """The partition of the window's table this is (a region); None: the global table."""
        self.closed_at: int | None = None
        self.closed_seq: int | None = None
        self.disputes = 0
        self._items: dict[str, bytes] = {}
        self._sorted: SortedList = SortedList()  # its default load (1000) suits ~10**6 entries
        self._names: SortedList = SortedList()  # the members, in code point order (`search`)
        # Only the latest aggregation needs each member's deciding key (ties on occurred_at).
        self._keys: dict[str, str] | None = {} if rule.aggregation is Aggregation.LATEST else None
        self._freeze: Freeze | None = None
        """The freeze under way: told of each member's change before it is made."""

    @classmethod
    def from_standings(cls, rule: ScoringRule, window: Window, standings: dict[str, Standing]) -> RankedTable:
        """Build a table at once instead of n inserts: O(n log n), O(n) for the entries when
        ``standings`` come in rank order."""
        table = cls(rule, window)
        sort_key, members = rule.sort_key, list(standings)
        entries = pack_all([sort_key(score, reached_at) for score, reached_at, _key in standings.values()], members)
        table._items = dict(zip(members, entries, strict=True))
        table._sorted = _in_order(entries)
        table._names = _in_order(sorted(members))
        if table._keys is not None:
            table._keys = {member: key for member, (_s, _r, key) in standings.items()}
        return table

    @classmethod
    def from_states(cls, rule: ScoringRule, window: Window, states: dict[str, State], like: RankedTable | None = None) -> RankedTable:
        """Build a table from member states merged by `ScoringRule.merge` (a replay); packed
        entries are taken with their dict. ``like``: a table holding the same states, copied
        instead (the replay knows which tables were fed the same rows). O(n log n); O(n) for
        the entries when ``states`` come in rank order (PostgreSQL's fold), for the names when
        they come in code point order (sqlite's); O(n) with ``like``."""
        if like is not None:
            return like.copy(window)
        if not rule.improves_by_key:
            return cls.from_standings(rule, window, states)
        table = cls(rule, window)
        table._items = states
        table._sorted = _in_order(list(states.values()))
        table._names = _in_order(sorted(states))
        return table

    @classmethod
    def from_sorted(cls, rule: ScoringRule, window: Window, names: Sequence[str], entries: Sequence[bytes],
                    order: Sequence[int], keys: Sequence[str] | None) -> RankedTable:
        """A table of ``names`` (its members, in code point order), each with its packed entry
        in ``entries`` and (latest aggregation) its deciding key in ``keys``, whose entry at each
        rank is ``entries[order[rank]]`` (`arena.engine.snapshot`). No sort, no member decoded
        from an entry, and the objects visited in the order they were made but once: O(n),
        about 0.5 s at 10**6. Raises ValueError when ``names`` repeat a member."""
        table = cls(rule, window)
        table._items = dict(zip(names, entries, strict=True))
        if len(table._items) != len(order) or len(order) != len(names):
            raise ValueError("the names repeat a member, or the order is not of the names")
        entry = entries.__getitem__
        load = SortedList.DEFAULT_LOAD_FACTOR
        table._sorted = _of_sublists([list(map(entry, order[begin : begin + load])) for begin in range(0, len(order), load)])
        table._names = _of_sublists([list(names[begin : begin + load]) for begin in range(0, len(names), load)])
        if table._keys is not None:
            assert keys is not None, "a latest table needs its keys"
            table._keys = dict(zip(names, keys, strict=True))
        return table

    def copy(self, window: Window) -> RankedTable:
        """A table of ``window`` holding this one's entries, which it shares (they are immutable):
        a table of another window that a snapshot found equal. Its sorted lists share this
        table's sublists, each copied by whichever table changes it first (`share`): O(n) for
        the dicts (in C, in the order their objects were made), O(n / 1000) for the lists."""
        table = RankedTable(self.rule, window)
        table._items = self._items.copy()
        table._sorted = share(self._sorted)
        table._names = share(self._names)
        table._keys = None if self._keys is None else self._keys.copy()
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

    def state(self, member: str) -> State | None:
        """A member's state as `ScoringRule.merge` makes it (`set_state` takes it). O(1)."""
        return self._items.get(member) if self.rule.improves_by_key else self.standing(member)

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
        items, add, remove, freeze = self._items, self._sorted.add, self._sorted.remove, self._freeze
        for member, entry in pending.items():
            old = before[member]
            if freeze is not None:
                freeze.change(member, old, entry)
            if old is not None:
                remove(old)
            else:
                self._names.add(member)
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
        if self._freeze is not None:
            self._freeze.change(member, old, state)
        if old is not None:
            self._sorted.remove(old)
        else:
            self._names.add(member)
        self._items[member] = state
        self._sorted.add(state)

    def set_standing(self, member: str, standing: Standing | None) -> None:
        """Replace a member's standing (None removes the member). O(log n)."""
        old = self._items.get(member)
        item = None if standing is None else pack(self.rule.sort_key(standing[0], standing[1]), member)
        if self._freeze is not None:
            self._freeze.change(member, old, item)
        if old is not None:
            self._sorted.remove(old)
        if standing is None:
            if old is not None:
                del self._items[member]
                self._names.remove(member)
                if self._keys is not None:
                    del self._keys[member]
            return
        assert item is not None
        if old is None:
            self._names.add(member)
        self._items[member] = item
        self._sorted.add(item)
        if self._keys is not None:
            self._keys[member] = standing[2]

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

    def search(self, prefix: str, limit: int) -> list[Entry]:
        """The entries of the members whose name starts with ``prefix`` (code points as given,
        case-sensitive), in code point order of member, at most ``limit``, each with its rank.
        O(log n) to find the first name, then O(log n) a returned entry for its rank."""
        found: list[Entry] = []
        items, index = self._items, self._sorted.bisect_left
        for name in self._names.irange(prefix):
            if len(found) >= limit or not name.startswith(prefix):
                break
            item = items[name]
            found.append(self._entry(index(item), item))
        return found

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

    def snapshot(self, stop: int | None = None) -> list[bytes]:
        """Every entry in rank order (or the first ``stop``), as a list the table's later changes
        do not touch (entries are immutable): a digest of it may be taken in steps. O(n), about
        30 ms at 10**6."""
        return list(self._sorted if stop is None else self._sorted.islice(0, stop))

    def decoded(self, entries: Iterable[bytes]) -> Iterator[Entry]:
        """The entries of ``entries`` (a `snapshot`: packed, in rank order from rank 1), lazily."""
        return self._entries(0, entries)

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


def _in_order(items: list[Any]) -> SortedList:
    """The SortedList of ``items`` (taken), sorted first unless they are in order already, as
    a folding journal's rows come: one comparison an item instead of a sort and a copy."""
    if not all(map(operator.le, items, islice(items, 1, None))):
        items.sort()
    load = SortedList.DEFAULT_LOAD_FACTOR
    return _of_sublists([items[begin : begin + load] for begin in range(0, len(items), load)])


def _of_sublists(lists: list[list[Any]]) -> SortedList:
    """The SortedList whose sublists are ``lists`` (each in order, and the one after another)."""
    sorted_list = SortedList()
    sorted_list._lists = lists
    sorted_list._maxes = [sublist[-1] for sublist in lists]
    sorted_list._len = sum(map(len, lists))
    return sorted_list


class Freeze:
    """A table's standings as of the moment the freeze began, read a run at a time while the
    table goes on changing: its entries in rank order (`runs`) and its members in code point
    order with their entries and keys (`named`), both from the table's own sorted structures,
    without a sort. Beginning one is O(1); the table tells it of each change before making it
    (`change`, O(log changes)); `end` stops it. One freeze of a table at a time.

    Each run reads the live table in one step: a range's entries (members) as of the start are
    its live ones less those put in (joined) since the start, plus those the table held at the
    start and has let go since. No copy of the table is made: a copy in one turn of the event
    loop stalled it 45-86 ms at 10**6 entries, and copies of its sublists (copy-on-write) left
    young lists of entries for the garbage collector to walk, 20-80 ms a collection."""

    step = 1024
    """Entries a run: 1024 take about 1 ms with their encoding (`arena.engine.snapshot.encode`)."""

    def __init__(self, table: RankedTable) -> None:
        assert table._freeze is None, "one freeze of a table at a time"
        self.table = table
        self.window = table.window
        self.partition = table.partition
        self._read_to: bytes | None = None  # the last entry `runs` read; None: nothing read yet
        self._before: dict[str, bytes | None] = {}  # each member changed since the start: its entry then
        self._joined: set[str] = set()  # members changed since the start that the table did not hold then
        self._put: dict[bytes, None] = {}  # entries put in since the start above what `runs` read
        self._left = SortedList()  # entries at the start since left, above what `runs` read then
        self._gone = SortedList()  # members at the start the table has let go since
        self._keys: dict[str, str] = {}  # latest aggregation: deciding keys at the start of changed members
        table._freeze = self

    def change(self, member: str, old: bytes | None, new: bytes | None) -> None:
        """The table is about to replace ``member``'s entry ``old`` by ``new`` (None: none)."""
        read_to = self._read_to
        if new is not None and (read_to is None or new > read_to):
            self._put[new] = None
        if member not in self._before:
            self._before[member] = old
            if old is None:
                self._joined.add(member)
            else:
                if read_to is None or old > read_to:
                    self._left.add(old)
                if self.table._keys is not None:
                    self._keys[member] = self.table._keys[member]
        if new is None and self._before[member] is not None and member not in self._gone:
            self._gone.add(member)

    def runs(self) -> Iterator[list[bytes]]:
        """The entries as of the start in rank order, a run of about `step` at a time. The table
        may change between two runs. O(n + changes * log n) in all."""
        sorted_, left, put = self.table._sorted, self._left, self._put
        while True:
            read_to = self._read_to
            start = 0 if read_to is None else sorted_.bisect_right(read_to)
            live = list(sorted_.islice(start, start + self.step))
            last = start + self.step >= len(sorted_)
            high = None if last else live[-1]
            gone = list(left.irange(read_to, high, inclusive=(False, True)))
            run = list(filterfalse(put.__contains__, live)) if put else live
            if gone:
                run = sorted(run + gone)  # two sorted runs: one merge
            self._read_to = high
            yield run
            if last:
                return

    def named(self) -> Iterator[tuple[list[str], list[bytes], list[str] | None]]:
        """The members as of the start in code point order, a run of about `step` at a time,
        each run with their entries and (latest aggregation) deciding keys as of the start. The
        table may change between two runs. O(n + changes * log n) in all."""
        table = self.table
        names, items, now_keys = table._names, table._items, table._keys
        before, joined, gone, keys = self._before, self._joined, self._gone, self._keys
        read_to: str | None = None
        while True:
            start = 0 if read_to is None else names.bisect_right(read_to)
            live = list(names.islice(start, start + self.step))
            last = start + self.step >= len(names)
            high = None if last else live[-1]
            run = list(filterfalse(joined.__contains__, live)) if joined else live
            let_go = [name for name in gone.irange(read_to, high, inclusive=(False, True)) if name not in items]
            if let_go:
                run = sorted(run + let_go)  # two sorted runs: one merge
            # each member's entry (key) at the start: the one the freeze kept if it changed since, else
            # the table's; every member of the run has one or the other (those that joined are left out)
            entries = cast(list[bytes], list(map(before.get, run, map(items.get, run)))) if before else \
                list(map(items.__getitem__, run))
            run_keys = None if now_keys is None else cast(list[str], list(map(keys.get, run, map(now_keys.get, run))))
            read_to = high
            yield run, entries, run_keys
            if last:
                return

    def end(self) -> None:
        """Stop (also when the freeze is abandoned). O(1)."""
        if self.table._freeze is self:
            self.table._freeze = None

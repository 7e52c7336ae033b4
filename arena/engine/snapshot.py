"""A board's snapshot: its tables at one seq, as bytes, and the rules that say when a start may
use one (DESIGN.md, "Snapshots: a fast start"). Pure: no I/O; `arena.board.snapshots` takes and
loads snapshots, `arena.journal.snapshots` keeps them.

Layout (all integers little-endian)::

    MAGIC | u32 format | sha256 of the body (32 bytes) | body
    body = u32 length of the header | header (JSON) | each table's section, in header order
    section = u32 length of each entry | the entries | [u32 length of each key | the keys]
              | u32 name index of the entry at each rank | the names, a line feed between two

The header holds the board, its definition, the seq and the record at it, the retention floor of
each period kind, the dispute counts, each table's window, partition (none: the global table)
and sizes, and a league board's tiers and divisions (a member's tier, its first seq and division
in each window). A section lists the table's members in code point order (the order of its search index): their packed entries
(`arena.engine.rankkey`), their names in UTF-8 and (latest aggregation only) their deciding keys;
then, rank by rank, where in that order the entry is. A table is thus loaded without a sort,
without decoding a member from an entry (a member has no control character, DESIGN.md, so the
names split at line feeds), its objects made and visited in one order: at 10**6 members a cache
miss an object is most of what a load costs. A table whose entries and keys repeat an earlier
table's (a board's kinds whose windows all hold the same events) has no section: its header names
the table it repeats (``same_as``), and it is loaded as a copy sharing that table's entries.

Format 1 (entries in rank order, no names) is not read: such a snapshot is ignored with its
reason, the board replays in full and its next snapshot is of this format.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from array import array
from bisect import bisect_right
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Generic, Protocol, TypeVar

import orjson

from arena.engine.periods import Window, period_name
from arena.engine.records import BoardRecord, CloseRecord, Record, ScoreRecord
from arena.engine.routing import TableKey

Table = TypeVar("Table", covariant=True)
"""What a snapshot holds of each table: a `TableSource` to encode, a `TableImage` decoded."""
League = TypeVar("League", covariant=True)
"""What a snapshot holds of a league board's tiers and divisions (`arena.engine.league.League.image`):
its JSON text in pieces to encode (the header holds it, and it is written a piece at a time),
its values decoded."""
FORMAT = 2
"""The snapshot format this Arena writes and reads; a snapshot of another format is ignored."""
MAGIC = b"ARENA-SNAPSHOT\n\0"
_PIECE = 4_096
"""Entries per encoded piece at most."""
_STEP = 65_536
"""Entries compared per step (`_equal`): about 1 ms."""


class SnapshotInvalid(ValueError):
    """A snapshot that cannot be used: the message says why (it is logged, then a full replay)."""


Named = tuple[Sequence[str], Sequence[bytes], Sequence[str] | None]
"""Consecutive members of a table in code point order, each one's entry and (latest aggregation)
deciding key."""


class TableSource(Protocol):
    """A table to encode (`arena.engine.table.Freeze`): its window, its entries in rank order a
    run at a time, and its members in code point order a run at a time."""

    @property
    def window(self) -> Window: ...

    @property
    def partition(self) -> str | None: ...

    def runs(self) -> Iterable[Sequence[bytes]]: ...

    def named(self) -> Iterable[Named]: ...


@dataclass(frozen=True, slots=True)
class TableImage:
    """A table as decoded (`RankedTable.from_sorted` loads it): its members in code point order."""

    window: Window
    names: list[str]
    entries: list[bytes]
    """Each name's packed entry."""
    order: Sequence[int]
    """Rank by rank, the index in ``names`` of the entry at that rank."""
    keys: list[str] | None
    """The latest aggregation's deciding key of each name; None for the other rules."""
    same_as: int | None = None
    """The index of the earlier table of the snapshot that this one repeats (whose lists these
    are); None: its own."""
    partition: str | None = None
    """The partition of the window's table it is; None: the global table."""


@dataclass(frozen=True, slots=True)
class Snapshot(Generic[Table, League]):
    board: str
    definition: str
    """The board's definition text, as its journal stores it (`check_definition`)."""
    seq: int
    record: str
    """`record_identity` of the journal's record at ``seq``."""
    floors: dict[str, int | None]
    """Per period kind, the start of the oldest window whose table it holds (None: alltime)."""
    disputes: dict[TableKey, int]
    tables: Sequence[Table]
    league: League | None = None
    """A league board's tiers and divisions."""


def record_identity(record: Record) -> str:
    """What a snapshot remembers of the record at its seq: a score event by its idempotency key,
    a close marker by its window, a void by the key it voids, a board record by its kind."""
    if isinstance(record, ScoreRecord):
        return "event " + record.event.idempotency_key
    if isinstance(record, CloseRecord):
        return f"close {record.window.kind}/{record.window.period_id}"
    if isinstance(record, BoardRecord):
        return "board " + record.kind
    return "void " + record.idempotency_key


def encode(snapshot: Snapshot[TableSource, Sequence[bytes]], body: list[bytes]) -> Iterator[None]:
    """Fill ``body`` (empty) with the snapshot's body as pieces of bytes, pausing (yielding) after
    each run a table source reads and each piece of a section, a few ms at most; `seal` then
    makes the whole. Both orders a section holds are read from the table's own sorted structures
    (its entries, its search index), so nothing is sorted: what remains is one hash join, where
    in code point order each entry of the rank order is. O(entries): 1.5-2 s of CPU on a busy
    2-core VM at 10**6 entries of 16-byte members, half of it that join (cache misses); a table
    that repeats another costs a comparison."""
    sections: list[list[bytes]] = []
    tables = []
    taken: list[tuple[list[bytes], list[str] | None]] = []  # each table's entries (rank order) and keys (code point order)
    for table in snapshot.tables:
        ranked: list[bytes] = []
        for run in table.runs():
            ranked += run
            yield
        names: list[str] = []
        entries: list[bytes] = []
        keys: list[str] | None = None
        for run_names, run_entries, run_keys in table.named():
            names += run_names
            entries += run_entries
            if run_keys is not None:  # every run of a latest table has keys, even an empty run
                keys = [] if keys is None else keys
                keys += run_keys
            yield
        assert len(names) == len(ranked), f"a table source read {len(ranked)} entries and {len(names)} members"
        same_as = None
        for earlier, (other, other_keys) in enumerate(taken):
            if (yield from _equal(other, ranked)) and (yield from _equal(other_keys, keys)):
                same_as = earlier
                break
        taken.append((ranked, keys))
        section = [] if same_as is not None else (yield from _section(ranked, names, entries, keys))
        yield from _release(names)
        yield from _release(entries)
        tables.append({
            "kind": table.window.kind, "period_id": table.window.period_id,
            "start_ms": table.window.start_ms, "end_ms": table.window.end_ms, "partition": table.partition,
            "count": len(ranked), "same_as": same_as, "section_bytes": _size(section), "keys": keys is not None,
        })
        sections.append(section)
    for ranked, keys in taken:
        yield from _release(ranked)
        yield from _release(keys or [])
    header = [orjson.dumps({
        "board": snapshot.board, "definition": snapshot.definition, "seq": snapshot.seq, "record": snapshot.record,
        "floors": snapshot.floors, "disputes": [[str(k), p, n] for (k, p), n in snapshot.disputes.items()],
        "tables": tables, "league": None,
    })]
    if snapshot.league is not None:  # in its pieces, not copied whole: 37 MB at 10**6 members
        header = [header[0][: -len(b"null}")], *snapshot.league, b"}"]
    body += [struct.pack("<I", sum(map(len, header))), *header, *(piece for section in sections for piece in section)]


def _equal(a: Sequence[object] | None, b: Sequence[object] | None) -> Generator[None, None, bool]:
    """Whether ``a == b``, pausing every `_STEP` items compared."""
    if a is None or b is None or len(a) != len(b):
        return a is None and b is None
    for begin in range(0, len(a), _STEP):
        if a[begin : begin + _STEP] != b[begin : begin + _STEP]:
            return False
        yield
    return True


def _release(items: list[Any]) -> Generator[None, None, None]:
    """Empty ``items`` from the end, pausing every `_PIECE` items: freeing 10**6 references at once
    (a cache miss each) stalled the loop 100-250 ms at the end of a snapshot."""
    while items:
        del items[-_PIECE:]
        yield


def _section(ranked: list[bytes], names: list[str], entries: list[bytes], keys: list[str] | None
             ) -> Generator[None, None, list[bytes]]:
    """The section of a table of ``ranked`` entries (rank order), whose members are ``names`` (code
    point order) with each one's entry in ``entries`` and key in ``keys``, pausing after each piece."""
    placed: tuple[list[bytes], list[bytes]] = ([], [])
    key_pieces: tuple[list[bytes], list[bytes]] = ([], [])
    text: list[bytes] = []
    # Each entry's index in code point order, kept by the piece of the rank order it falls in:
    # a piece's lookups then stay in one small dict (in the CPU's cache), and no dict grows
    # past a piece (one dict of 10**6 entries stalled the loop 70-330 ms as it grew).
    firsts = ranked[_PIECE::_PIECE]
    parts: list[dict[bytes, int]] = [{} for _ in range(len(firsts) + 1)]
    for begin in range(0, len(names), _PIECE):
        piece = entries[begin : begin + _PIECE]
        for index, entry in enumerate(piece, begin):
            parts[bisect_right(firsts, entry)][entry] = index
        _blobs(piece, placed)
        if keys is not None:
            _blobs([key.encode("utf-8", "surrogatepass") for key in keys[begin : begin + _PIECE]], key_pieces)
        text.append((b"\n" if begin else b"") + "\n".join(names[begin : begin + _PIECE]).encode("utf-8", "surrogatepass"))
        yield
    order = array("I")
    for part, begin in zip(parts, range(0, len(ranked), _PIECE), strict=False):  # an empty table has a part, no piece
        order.extend(map(part.__getitem__, ranked[begin : begin + _PIECE]))
        part.clear()  # freed a piece at a time (below)
        yield
    if sys.byteorder != "little":
        order.byteswap()
    return [*placed[0], *placed[1], *key_pieces[0], *key_pieces[1], order.tobytes(), *text]


def seal(body: Sequence[bytes]) -> list[bytes]:
    """The snapshot's bytes, as pieces to be stored one after another: the head (magic, format,
    checksum) and ``body``. Hashes piece by piece, which releases the GIL: run it in a thread.
    O(bytes)."""
    checksum = hashlib.sha256()
    for piece in body:
        checksum.update(piece)
    return [MAGIC + struct.pack("<I", FORMAT) + checksum.digest(), *body]


def decode(data: bytes) -> Snapshot[TableImage, dict[str, object]]:
    """Read a snapshot back. Raises SnapshotInvalid: not a snapshot, another format, a checksum
    that does not hold (corrupt or truncated). O(entries)."""
    head = len(MAGIC) + 4 + 32
    if len(data) < head or not data.startswith(MAGIC):
        raise SnapshotInvalid("not an Arena snapshot")
    (version,) = struct.unpack_from("<I", data, len(MAGIC))
    if version != FORMAT:
        raise SnapshotInvalid(f"snapshot format {version}, this Arena reads format {FORMAT}")
    body = memoryview(data)[head:]
    if hashlib.sha256(body).digest() != data[head - 32 : head]:
        raise SnapshotInvalid("checksum does not hold (corrupt or truncated)")
    try:
        (size,) = struct.unpack_from("<I", body, 0)
        header = orjson.loads(body[4 : 4 + size])
        at = 4 + size
        images: list[TableImage] = []
        for t in header["tables"]:
            window = Window(period_name(t["kind"]), t["period_id"], t["start_ms"], t["end_ms"])
            count, same_as, partition = int(t["count"]), t["same_as"], t.get("partition")
            if same_as is not None:
                like = images[same_as] if 0 <= same_as < len(images) else None
                if like is None or len(like.entries) != count:
                    raise ValueError(f"table {len(images)} repeats no earlier table of its size")
                images.append(TableImage(window, like.names, like.entries, like.order, like.keys, same_as, partition))
                continue
            images.append(_image(window, body[at : at + t["section_bytes"]], count, bool(t["keys"]), partition))
            at += t["section_bytes"]
        if at != len(body):
            raise ValueError("the sections do not fill the body")
        disputes = {(period_name(kind), period_id): int(n) for kind, period_id, n in header["disputes"]}
        return Snapshot(header["board"], header["definition"], int(header["seq"]), header["record"],
                        dict(header["floors"]), disputes, images, header.get("league"))
    except (KeyError, ValueError, TypeError, struct.error) as exc:  # a checksum holding over a bad body: a bug
        raise SnapshotInvalid(f"unreadable snapshot body: {exc!r}") from exc


def _image(window: Window, section: memoryview, count: int, keyed: bool, partition: str | None) -> TableImage:
    """The table of ``window`` (its ``partition``) whose section is ``section``. Raises
    ValueError when its parts disagree."""
    entries, at = _blobs_at(section, 0, count)
    keys = None
    if keyed:
        raw, at = _blobs_at(section, at, count)
        keys = [key.decode("utf-8", "surrogatepass") for key in raw]
    order = _u32s_at(section, at, count)
    if count and max(order) >= count:
        raise ValueError("an order index past the names")
    names = str(section[at + 4 * count :], "utf-8", "surrogatepass").split("\n") if count else []
    if len(names) != count:
        raise ValueError("the names are not as many as the entries")
    return TableImage(window, names, entries, order, keys, partition=partition)


def _blobs(items: Sequence[bytes], into: tuple[list[bytes], list[bytes]]) -> None:
    """Add each item's u32 length to ``into[0]`` and the items to ``into[1]``: a part is
    ``into[0] + into[1]``."""
    into[0].append(_u32s(list(map(len, items))))
    into[1].append(b"".join(items))


def _u32s(values: list[int]) -> bytes:
    """``values`` as little-endian u32s."""
    packed = array("I", values)
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tobytes()


def _u32s_at(body: memoryview, at: int, count: int) -> array[int]:
    """The ``count`` little-endian u32s at ``at``."""
    values = array("I")
    values.frombytes(body[at : at + 4 * count])
    if len(values) != count:
        raise ValueError("a part runs past its section")
    if sys.byteorder != "little":
        values.byteswap()
    return values


def _size(pieces: list[bytes]) -> int:
    return sum(map(len, pieces))


def _blobs_at(section: memoryview, at: int, count: int) -> tuple[list[bytes], int]:
    """The ``count`` items of the `_blobs` part at ``at``, and where it ends."""
    sizes = _u32s_at(section, at, count)
    at += 4 * count
    ends = list(accumulate(sizes))
    end = at + (ends[-1] if ends else 0)
    if end > len(section):
        raise ValueError("a part runs past its section")
    blob = bytes(section[at:end])
    return [blob[a:b] for a, b in zip([0, *ends], ends, strict=False)], end


def rejection(
    snapshot: Snapshot[object, object], board: str, definition: str, record_at_seq: str | None, floors: Mapping[str, int | None]
) -> str | None:
    """Why a start may not use ``snapshot`` (None: it may), given the board, its definition text
    today, the identity of the journal's record at the snapshot's seq (None: the journal has no
    record there) and today's retention floor of each kind. O(kinds)."""
    if snapshot.board != board:
        return f"it is board {snapshot.board!r}'s"
    if snapshot.definition != definition:
        return "it was made under another board definition"
    if record_at_seq is None:
        return f"the journal holds no record at its seq {snapshot.seq}"
    if record_at_seq != snapshot.record:
        return f"the journal holds another record at its seq {snapshot.seq} ({record_at_seq!r}, not {snapshot.record!r})"
    for kind, floor in floors.items():
        if kind not in snapshot.floors:
            return f"it holds no {kind} tables"
        kept = snapshot.floors[kind]
        if floor is not None and kept is not None and floor < kept:
            return f"keep_closed retains {kind} tables older than it holds"
    return None


"""A board's snapshot: its tables at one seq, as bytes, and the rules that say when a start may
use one (DESIGN.md, "Snapshots: a fast start"). Pure: no I/O; `arena.board.snapshots` takes and
loads snapshots, `arena.journal.snapshots` keeps them.

Layout (all integers little-endian)::

    MAGIC | u32 format | sha256 of the body (32 bytes) | body
    body = u32 length of the header | header (JSON) | each table's section, in header order
    section = u32 length of each entry | the entries | [u32 length of each key | the keys]

The header holds the board, its definition, the seq and the record at it, the retention floor of
each period kind, the dispute counts and each table's window and sizes. Entries are the tables'
packed entries (`arena.engine.rankkey`) in rank order, so a table is loaded without a sort.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Generic, Protocol, TypeVar

import orjson

from arena.engine.periods import Window, period_name
from arena.engine.records import BoardRecord, CloseRecord, Record, ScoreRecord
from arena.engine.routing import TableKey

Table = TypeVar("Table", bound="TableSource", covariant=True)
FORMAT = 1
"""The snapshot format this Arena writes and reads; a snapshot of another format is ignored."""
MAGIC = b"ARENA-SNAPSHOT\n\0"
_PIECE = 4_096
"""Entries per encoded piece at most."""


class SnapshotInvalid(ValueError):
    """A snapshot that cannot be used: the message says why (it is logged, then a full replay)."""


Run = tuple[Sequence[bytes], Sequence[str] | None]
"""Consecutive entries of a table in rank order, and (latest aggregation) each one's deciding key."""


class TableSource(Protocol):
    """A table to encode: its window and its entries a run at a time (`arena.engine.table.Freeze`)."""

    @property
    def window(self) -> Window: ...

    @property
    def partition(self) -> str | None: ...

    def runs(self) -> Iterable[Run]: ...


@dataclass(frozen=True, slots=True)
class TableImage:
    """A table as decoded: every entry in one run."""

    window: Window
    entries: list[bytes]
    """Packed entries in rank order."""
    keys: list[str] | None
    """The latest aggregation's deciding key of each entry; None for the other rules."""
    partition: str | None = None
    """The partition of the window's table it is; None: the global table."""

    def runs(self) -> Iterable[Run]:
        return [(self.entries, self.keys)]


@dataclass(frozen=True, slots=True)
class Snapshot(Generic[Table]):
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


def encode(snapshot: Snapshot[TableSource], body: list[bytes]) -> Iterator[None]:
    """Fill ``body`` (empty) with the snapshot's body as pieces of bytes, pausing (yielding) after
    each run of entries; `seal` then makes the whole. O(entries): about 0.3 s and 34 MB at 10**6
    entries of 16-byte members."""
    sections: list[bytes] = []
    tables = []
    for table in snapshot.tables:
        count = 0
        entries: tuple[list[bytes], list[bytes]] = ([], [])
        keys: tuple[list[bytes], list[bytes]] | None = None
        for run, run_keys in table.runs():
            count += len(run)
            _blobs(run, entries)
            if run_keys is not None:
                keys = keys or ([], [])  # every run of a latest table has keys, even an empty run
                _blobs([k.encode("utf-8", "surrogatepass") for k in run_keys], keys)
            yield
        entry_pieces = entries[0] + entries[1]
        key_pieces = None if keys is None else keys[0] + keys[1]
        tables.append({
            "kind": table.window.kind, "period_id": table.window.period_id,
            "start_ms": table.window.start_ms, "end_ms": table.window.end_ms, "partition": table.partition, "count": count,
            "entries_bytes": _size(entry_pieces), "keys_bytes": None if key_pieces is None else _size(key_pieces),
        })
        sections += entry_pieces
        if key_pieces is not None:
            sections += key_pieces
    header = orjson.dumps({
        "board": snapshot.board, "definition": snapshot.definition, "seq": snapshot.seq, "record": snapshot.record,
        "floors": snapshot.floors, "disputes": [[str(k), p, n] for (k, p), n in snapshot.disputes.items()],
        "tables": tables,
    })
    body += [struct.pack("<I", len(header)), header, *sections]


def seal(body: Sequence[bytes]) -> list[bytes]:
    """The snapshot's bytes, as pieces to be stored one after another: the head (magic, format,
    checksum) and ``body``. Hashes piece by piece, which releases the GIL: run it in a thread.
    O(bytes)."""
    checksum = hashlib.sha256()
    for piece in body:
        checksum.update(piece)
    return [MAGIC + struct.pack("<I", FORMAT) + checksum.digest(), *body]


def decode(data: bytes) -> Snapshot[TableImage]:
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
        images = []
        for t in header["tables"]:
            window = Window(period_name(t["kind"]), t["period_id"], t["start_ms"], t["end_ms"])
            entries, at = _split(body, at, t["count"], t["entries_bytes"])
            keys = None
            if t["keys_bytes"] is not None:
                raw, at = _split(body, at, t["count"], t["keys_bytes"])
                keys = [k.decode("utf-8", "surrogatepass") for k in raw]
            images.append(TableImage(window, entries, keys, t.get("partition")))
        disputes = {(period_name(kind), period_id): int(n) for kind, period_id, n in header["disputes"]}
        return Snapshot(header["board"], header["definition"], int(header["seq"]), header["record"],
                        dict(header["floors"]), disputes, images)
    except (KeyError, ValueError, TypeError, struct.error) as exc:  # a checksum holding over a bad body: a bug
        raise SnapshotInvalid(f"unreadable snapshot body: {exc!r}") from exc


def _blobs(items: Sequence[bytes], into: tuple[list[bytes], list[bytes]]) -> None:
    """Add each item's u32 length to ``into[0]`` and the items to ``into[1]``, in pieces of at
    most `_PIECE` items: a section is ``into[0] + into[1]``."""
    for begin in range(0, len(items), _PIECE):
        piece = items[begin : begin + _PIECE]
        sizes = array("I", map(len, piece))
        if sys.byteorder != "little":
            sizes.byteswap()
        into[0].append(sizes.tobytes())
        into[1].append(b"".join(piece))


def _size(pieces: list[bytes]) -> int:
    return sum(map(len, pieces))


def _split(body: memoryview, at: int, count: int, size: int) -> tuple[list[bytes], int]:
    """The ``count`` items of the `_blobs` section of ``size`` bytes at ``at``, and where it ends."""
    sizes = array("I")
    sizes.frombytes(body[at : at + 4 * count])
    if sys.byteorder != "little":
        sizes.byteswap()
    blob = bytes(body[at + 4 * count : at + size])
    if sum(sizes) != len(blob):
        raise ValueError("section sizes disagree")
    ends = list(accumulate(sizes))
    return [blob[a:b] for a, b in zip([0, *ends], ends, strict=False)], at + size


def rejection(
    snapshot: Snapshot[TableImage], board: str, definition: str, record_at_seq: str | None, floors: Mapping[str, int | None]
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


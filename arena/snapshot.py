"""A board's snapshot: its tables at one seq, as bytes, and the rules that say when a start may
use one (DESIGN.md, "Snapshots: a fast start"). Pure: no I/O; `arena.snapshotter` takes and
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

import orjson

from arena.engine.periods import PeriodKind, Window
from arena.engine.records import CloseRecord, Record, ScoreRecord
from arena.engine.routing import TableKey

FORMAT = 1
"""The snapshot format this Arena writes and reads; a snapshot of another format is ignored."""
MAGIC = b"ARENA-SNAPSHOT\n\0"
_PIECE = 65_536
"""Entries per encoded piece: each piece is one C call that holds the GIL (about 2 ms), so that
encoding in a thread leaves the event loop its turns."""


class SnapshotInvalid(ValueError):
    """A snapshot that cannot be used: the message says why (it is logged, then a full replay)."""


@dataclass(frozen=True, slots=True)
class TableImage:
    window: Window
    entries: list[bytes]
    """Packed entries in rank order."""
    keys: list[str] | None
    """The latest aggregation's deciding key of each entry; None for the other rules."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    board: str
    definition: str
    """The board's definition text, as its journal stores it (`check_definition`)."""
    seq: int
    record: str
    """`record_identity` of the journal's record at ``seq``."""
    floors: dict[str, int | None]
    """Per period kind, the start of the oldest window whose table it holds (None: alltime)."""
    disputes: dict[TableKey, int]
    tables: list[TableImage]


def record_identity(record: Record) -> str:
    """What a snapshot remembers of the record at its seq: a score event by its idempotency key,
    a close marker by its window, a void by the key it voids."""
    if isinstance(record, ScoreRecord):
        return "event " + record.event.idempotency_key
    if isinstance(record, CloseRecord):
        return f"close {record.window.kind.value}/{record.window.period_id}"
    return "void " + record.idempotency_key


def encode(snapshot: Snapshot) -> bytes:
    """The snapshot as bytes. Touches nothing shared: run it in a thread for a large board.
    O(entries): about 0.2 s and 34 MB at 10**6 entries of 16-byte members."""
    sections: list[bytes] = []
    tables = []
    for image in snapshot.tables:
        entries = _blobs(image.entries)
        keys = None if image.keys is None else _blobs([k.encode("utf-8", "surrogatepass") for k in image.keys])
        tables.append({
            "kind": image.window.kind.value, "period_id": image.window.period_id,
            "start_ms": image.window.start_ms, "end_ms": image.window.end_ms,
            "count": len(image.entries), "entries_bytes": len(entries), "keys_bytes": None if keys is None else len(keys),
        })
        sections.append(entries)
        if keys is not None:
            sections.append(keys)
    header = orjson.dumps({
        "board": snapshot.board, "definition": snapshot.definition, "seq": snapshot.seq, "record": snapshot.record,
        "floors": snapshot.floors, "disputes": [[k.value, p, n] for (k, p), n in snapshot.disputes.items()],
        "tables": tables,
    })
    body = b"".join([struct.pack("<I", len(header)), header, *sections])
    return MAGIC + struct.pack("<I", FORMAT) + hashlib.sha256(body).digest() + body


def decode(data: bytes) -> Snapshot:
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
            window = Window(PeriodKind(t["kind"]), t["period_id"], t["start_ms"], t["end_ms"])
            entries, at = _split(body, at, t["count"], t["entries_bytes"])
            keys = None
            if t["keys_bytes"] is not None:
                raw, at = _split(body, at, t["count"], t["keys_bytes"])
                keys = [k.decode("utf-8", "surrogatepass") for k in raw]
            images.append(TableImage(window, entries, keys))
        disputes = {(PeriodKind(kind), period_id): int(n) for kind, period_id, n in header["disputes"]}
        return Snapshot(header["board"], header["definition"], int(header["seq"]), header["record"],
                        dict(header["floors"]), disputes, images)
    except (KeyError, ValueError, TypeError, struct.error) as exc:  # a checksum holding over a bad body: a bug
        raise SnapshotInvalid(f"unreadable snapshot body: {exc!r}") from exc


def _blobs(items: Sequence[bytes]) -> bytes:
    """Each item's u32 length, then the items, built in pieces (see `_PIECE`)."""
    lengths: list[bytes] = []
    blobs: list[bytes] = []
    for begin in range(0, len(items), _PIECE):
        piece = items[begin : begin + _PIECE]
        sizes = array("I", map(len, piece))
        if sys.byteorder != "little":
            sizes.byteswap()
        lengths.append(sizes.tobytes())
        blobs.append(b"".join(piece))
    return b"".join(lengths + blobs)


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
    snapshot: Snapshot, board: str, definition: str, record_at_seq: str | None, floors: Mapping[PeriodKind, int | None]
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
        if kind.value not in snapshot.floors:
            return f"it holds no {kind.value} tables"
        kept = snapshot.floors[kind.value]
        if floor is not None and kept is not None and floor < kept:
            return f"keep_closed retains {kind.value} tables older than it holds"
    return None


"""What a board needs of its journal, whatever stores it. No storage library is imported here:
`arena.journal.sqlite` is the first backend, and a second one replaces it without touching the
actor, the replay or `arena rebuild`.

A journal holds one board's score events, close markers, voids and board records (its
definitions and retirement) in one seq order; the actor assigns the seqs and is the journal's
only writer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import orjson
from prometheus_client import CollectorRegistry

from arena.config import parse_board
from arena.engine.events import Event, Fingerprint
from arena.engine.periods import Window, period_name
from arena.engine.records import BoardKind, BoardRecord, CloseRecord, Record, ScoreRecord, StoredEvent, Voided, VoidRecord
from arena.engine.routing import ScoreRow as ScoreRow  # re-exported: the journals scan these
from arena.engine.scoring import Aggregation, FoldRow, Order, Tie
from arena.engine.spec import BoardSpec
from arena.errors import BoardDefinitionChanged


class Journal(Protocol):
    """One board's open journal. Every method may raise JournalError; a read that finds the
    store unreadable raises JournalCorrupt, naming the journal. Reads without ``upto_seq`` stop
    at `last_seq`."""

    @property
    def path(self) -> str:
        """Names the journal in messages: a file, or a server and schema (never a password)."""

    @property
    def last_seq(self) -> int:
        """The greatest seq journaled: read at open, advanced by each `append`."""

    async def lookup(self, keys: Sequence[str]) -> dict[str, Fingerprint]:
        """Fingerprints of those of ``keys`` that are journaled, from the store's UNIQUE index
        (never from a cache alone: a retry is never counted twice, however old its key). May run
        while an `append` is under way, and then see the journal as it was before it. One read
        per few hundred keys."""

    async def append(self, records: Sequence[Record]) -> None:
        """Journal ``records`` (seqs following `last_seq`) in one transaction and advance
        `last_seq`; returns once they are committed as `durability` says, so an ack may follow.
        An empty sequence writes nothing. One commit (one fsync, with durability "full").

        The outcome rule, which every backend keeps and every caller follows:
        - it returns: every record is committed;
        - it raises JournalWriteFailed: the write failed, and as far as the backend knows
          nothing was written (disk full, read-only file, a refused transaction). A backend
          that cannot know (the connection broke during COMMIT) raises it too, so the caller
          settles every failed append with `committed_seq` before the next one: the seq before
          ``records`` means nothing was written (answer `unavailable`; a resend is accepted),
          the last record's seq means all of it was (ack; a resend is `duplicate`). A
          transaction is never partly written: any other answer is a corrupt journal;
        - any other exception leaves the journal unusable: it is closed and opened again
          (opening reads the committed seq) before anything else is appended.
        """

    async def committed_seq(self) -> int:
        """The greatest seq committed in the store, read from it (not from `last_seq`): what
        settles an `append` that raised. One read."""

    def scan(
        self,
        upto_seq: int | None = None,
        min_occurred_at: int | None = None,
        before_occurred_at: int | None = None,
        min_seq: int | None = None,
    ) -> AsyncIterator[list[ScoreRow]]:
        """Score events in seq order, in chunks of a few thousand, each cheap enough to fold in
        one turn of the event loop; ``min_occurred_at <= occurred_at < before_occurred_at`` and
        ``min_seq <= seq``."""

    def records(self, upto_seq: int | None = None) -> AsyncIterator[list[Record]]:
        """Every record (score events, close markers, voids) in seq order, in chunks of a few
        thousand, streamed: never the whole journal in memory (the markers and voids, few, are
        read first). What `arena migrate` copies."""

    async def append_all(self, chunks: AsyncIterable[Sequence[Record]]) -> None:
        """Journal every chunk of ``chunks`` (seqs following `last_seq`) in one transaction, and
        advance `last_seq`: all of them or none (`arena migrate` copies a board in one). An error
        raised by ``chunks`` rolls back and goes through; a failed write raises
        JournalWriteFailed."""

    async def close_markers(self, upto_seq: int | None = None) -> list[CloseRecord]:
        """Every close marker, in seq order."""

    async def voids(self, upto_seq: int | None = None) -> list[tuple[VoidRecord, int]]:
        """Every void with the occurred_at of the event it voids, in seq order."""

    async def board_records(self, upto_seq: int | None = None) -> list[BoardRecord]:
        """Every board record (definitions, retirement), in seq order: few per board."""

    async def event_by_key(self, key: str) -> StoredEvent | None:
        """The journaled event of an idempotency key (the UNIQUE index: one read)."""

    async def member_events(self, member: str, limit: int | None = None, before_seq: int | None = None) -> list[StoredEvent]:
        """A member's events, newest first. A scan of the whole journal (about 70 ns an event in
        sqlite): an index on member halves durable ingest, for two rare admin routes."""

    async def checked(self) -> None:
        """Wait until the integrity check begun at the open has passed (sqlite, a journal not
        closed cleanly, opened through the backend to write: the check runs in its own thread
        while the caller reads, `SqliteBackend.open`); at once where there is none. Raises
        JournalCorrupt (naming the journal) as often as it is awaited when the check failed.
        Every write waits for it; a load waits for it before a table answers."""

    async def close(self) -> None:
        """Release the journal; it is not used again."""


@runtime_checkable
class FoldingJournal(Journal, Protocol):
    """A journal that folds score events in its own query engine, one row per member instead of
    one per event: what makes a replay fast (`arena.board.load`). A bucket is a span of instants
    ``[start, end)`` (``end`` None: unbounded) and the events in it with ``seq < below_seq``
    and ``seq <= upto_seq`` that no void up to ``upto_seq`` names."""

    async def next_instant(self, at: int, before: int | None) -> int | None:
        """The least occurred_at of a score event in ``[at, before)``, or None. One index probe."""

    def fold(self, start: int, end: int | None, below_seq: int, upto_seq: int) -> AsyncIterator[list[FoldRow]]:
        """The bucket's events folded per member (`FoldRow`, one per member) by the board's aggregation, in
        chunks, members in no order. Exact at any size the store can hold. A scan of the bucket
        and a group-by, in one query (sqlite: two on a big bucket, one per range of members)."""


class JournalProxy:
    """A journal that delegates everything to ``journal``: a subclass changes what it needs (a
    wrapper of a backend's journals)."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    @property
    def path(self) -> str:
        return self.journal.path

    @property
    def last_seq(self) -> int:
        return self.journal.last_seq

    async def append(self, records: Sequence[Record]) -> None:
        await self.journal.append(records)

    async def append_all(self, chunks: AsyncIterable[Sequence[Record]]) -> None:
        await self.journal.append_all(chunks)

    def records(self, upto_seq: int | None = None) -> AsyncIterator[list[Record]]:
        return self.journal.records(upto_seq)

    async def lookup(self, keys: Sequence[str]) -> dict[str, Fingerprint]:
        return await self.journal.lookup(keys)

    async def committed_seq(self) -> int:
        return await self.journal.committed_seq()

    def scan(
        self,
        upto_seq: int | None = None,
        min_occurred_at: int | None = None,
        before_occurred_at: int | None = None,
        min_seq: int | None = None,
    ) -> AsyncIterator[list[ScoreRow]]:
        return self.journal.scan(upto_seq, min_occurred_at, before_occurred_at, min_seq)

    async def next_instant(self, at: int, before: int | None) -> int | None:
        assert isinstance(self.journal, FoldingJournal)  # the backends' journals are
        return await self.journal.next_instant(at, before)

    def fold(self, start: int, end: int | None, below_seq: int, upto_seq: int) -> AsyncIterator[list[FoldRow]]:
        assert isinstance(self.journal, FoldingJournal)
        return self.journal.fold(start, end, below_seq, upto_seq)

    async def close_markers(self, upto_seq: int | None = None) -> list[CloseRecord]:
        return await self.journal.close_markers(upto_seq)

    async def voids(self, upto_seq: int | None = None) -> list[tuple[VoidRecord, int]]:
        return await self.journal.voids(upto_seq)

    async def board_records(self, upto_seq: int | None = None) -> list[BoardRecord]:
        return await self.journal.board_records(upto_seq)

    async def event_by_key(self, key: str) -> StoredEvent | None:
        return await self.journal.event_by_key(key)

    async def member_events(self, member: str, limit: int | None = None, before_seq: int | None = None) -> list[StoredEvent]:
        return await self.journal.member_events(member, limit, before_seq)

    async def checked(self) -> None:
        await self.journal.checked()

    async def close(self) -> None:
        await self.journal.close()


def fold_order(spec: BoardSpec) -> str:
    """How PostgreSQL orders a fold's rows (columns ``score``, ``reached_at``, ``member``): in
    rank order, so that a table's entries are built from a sorted run (one comparison an entry)
    instead of sorted in Python. Any order gives the same tables. (sqlite's come in member order,
    which its GROUP BY gives without a second sort.)"""
    score = "DESC" if spec.order is Order.DESC else "ASC"
    reached = "ASC" if spec.tie is Tie.EARLIEST else "DESC"
    return f" ORDER BY score {score}, reached_at {reached}, member"


def fold_kind(spec: BoardSpec) -> str:
    """How a backend folds ``spec``'s events: "sum", "best_desc", "best_asc" or "latest"."""
    if spec.aggregation is Aggregation.BEST:
        return "best_desc" if spec.order is Order.DESC else "best_asc"
    return spec.aggregation.value


class JournalBackend(Protocol):
    """Where the journals are kept, as configured: it opens any board's journal. `arena serve`
    opens each board's journal to write; `arena rebuild` and `arena verify` open them read-only.
    `arena.journal.journal_backend` picks the one the config names."""

    def where(self, board: str) -> str:
        """Where ``board``'s journal is, for messages: what its `Journal.path` will say."""

    async def open(self, spec: BoardSpec, *, readonly: bool = False) -> Journal:
        """Open ``spec``'s journal (to write: created when missing), its definition checked by
        `check_definition` and its `last_seq` read from the store. A read-only journal never
        writes, not even a definition. Raises JournalCorrupt (unreadable, or missing when
        read-only; names the journal), BoardDefinitionChanged, JournalError. Reads the whole
        store's structure on sqlite (a check costing about 5% of a replay), unless the journal was
        closed cleanly; opened to write, the check runs beside what the caller reads next, and
        `Journal.checked` waits for it."""

    def watch(self, registry: CollectorRegistry, boards: Iterable[str]) -> None:
        """Register the metrics only this backend has (sqlite: each board's WAL size) for every
        one of ``boards``, opened or not. Once per registry; read at each scrape, ``boards``
        too: a live collection (the supervisor's handles), so boards added later are measured."""

    async def close(self) -> None:
        """Release what the backend holds beside its journals (PostgreSQL: the connections),
        after they are closed: at the end of `arena serve`, `rebuild` or `verify`."""


def definition_text(spec: BoardSpec) -> str:
    """The board's definition as journals store it (and snapshots record it): sorted-key JSON."""
    return orjson.dumps(spec.definition(), option=orjson.OPT_SORT_KEYS).decode()


def recorded_definitions(board: str, records: Iterable[BoardRecord]) -> list[str]:
    """The definition texts (`definition_text`) of the definition records among ``records``, in
    order: the last one is what a journal stores as its board's definition from then on, so that
    a start checks today's spec against the definition its journal last took."""
    return [definition_text(parse_board(board, orjson.loads(r.body))) for r in records if r.kind == BoardKind.DEFINITION]


def check_definition(spec: BoardSpec, stored: str | None, has_records: bool, journal: str) -> str | None:
    """The rule every backend applies when it opens a board's journal: the definition text to
    store (None: the stored one is this board's), given the stored text and whether the journal
    holds any record (close markers count: they name windows of the old timezone and periods).
    A journal without records takes a new definition when `arena serve` opens it; a read-only
    open stores nothing. Raises BoardDefinitionChanged, naming ``journal`` and what changed."""
    wanted = definition_text(spec)
    if stored == wanted:
        return None
    if stored is not None and has_records:
        old = orjson.loads(stored)
        new = orjson.loads(wanted)
        changed = ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in new if old.get(k) != new.get(k))
        raise BoardDefinitionChanged(
            f"board {spec.name!r}: definition changed while its journal {journal} holds records ({changed}); use a new board name"
        )
    return wanted


# The rows every backend stores and reads back, in one shape, so that they answer alike.

MarkerRow = tuple[str, str, str, int | None, int | None, str, str, int, int]
"""A close marker as stored: (id, period, period_id, period_start, period_end, aggregation,
tie_rule, closed_at, closed_seq), the columns of ``board_period``."""


def marker_row(spec: BoardSpec, marker: CloseRecord) -> MarkerRow:
    w = marker.window
    return (f"{w.kind}/{w.period_id}", str(w.kind), w.period_id, w.start_ms, w.end_ms,
            spec.aggregation.value, spec.tie.value, marker.closed_at, marker.seq)


def close_record(row: Sequence[Any]) -> CloseRecord:
    """A marker read back as (period, period_id, period_start, period_end, closed_at, closed_seq)."""
    period, period_id, start, end, closed_at, seq = row
    return CloseRecord(seq, Window(period_name(period), period_id, start, end), closed_at)


def stored_event(row: Sequence[Any]) -> StoredEvent:
    """An event read back as (seq, member, value, occurred_at, received_at, source,
    idempotency_key, meta, region) and its void's (seq, reason, admin, voided_at), all null when
    it was not voided (`STORED_COLUMNS`)."""
    seq, member, value, occurred_at, received_at, source, key, meta, region, void_seq, reason, admin, voided_at = row
    voided = None if void_seq is None else Voided(void_seq, reason, admin, voided_at)
    return StoredEvent(seq, member, value, occurred_at, received_at, source, key, meta, voided, region)


STORED_COLUMNS = ("e.seq, e.member, e.value, e.occurred_at, e.received_at, e.source, e.idempotency_key, e.meta,"
                  " e.region, v.seq, v.reason, v.admin, v.voided_at")
"""`stored_event`'s row from a score event ``e`` left-joined to its void ``v``."""


EventRow = tuple[int, str, int, int, int, str, str, str | None, str | None]
"""A score event as stored: (seq, member, value, occurred_at, received_at, source,
idempotency_key, meta, region)."""

EVENT_COLUMNS = "seq, member, value, occurred_at, received_at, source, idempotency_key, meta, region"


async def merged_records(
    board: str, events: AsyncIterator[Sequence[EventRow]], others: Iterable[CloseRecord | VoidRecord | BoardRecord]
) -> AsyncIterator[list[Record]]:
    """`Journal.records` from a journal's score events (chunks in seq order) and its markers,
    voids and board records: one seq order, a chunk of records per chunk of events."""
    pending = deque(sorted(others, key=lambda r: r.seq))
    async for rows in events:
        chunk: list[Record] = []
        for seq, member, value, occurred_at, received_at, source, key, meta, region in rows:
            while pending and pending[0].seq < seq:
                chunk.append(pending.popleft())
            chunk.append(ScoreRecord(seq, Event(board, member, value, occurred_at, key, meta, region), received_at, source))
        yield chunk
    if pending:
        yield list(pending)

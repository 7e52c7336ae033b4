"""A history checker, in the spirit of Jepsen and Porcupine: while faults run, writers record
every ack and readers record every answer with its seq; afterwards the boards' journals give
every record in seq order, and `check` holds each answer to the contract's "Never stale":

(a) its seq is at least the journal seq of every event whose ack (accepted or duplicate) was
    received before the query was sent, on any connection, through any node;
(b) its body is the oracle's standings (`support.oracle`) over the journal's records up to its
    seq;
(c) on one WS connection, answers about one board never go back in seq, and a subscription
    is never ended by an error (loading and failed boards are states of it, never a refusal);

and every acked event is in its journal exactly once, as it was sent (and no rejected one is).
A 503 ``not_ready`` or ``unavailable`` is allowed and counted. Times are this process's monotonic
clock: an ack is stamped after it is read and a query before it is sent, so both err on the
lenient side.

`record` runs the writers (`arena.client.ArenaClient`, which reconnects and resends unacked
events with the same keys) and readers (HTTP, WS query ops on `/v1/live`, a subscription) around
a fault; `journal_records` reads a journal on either backend; `check` judges. The checker knows
the alltime table only: the scenarios' boards have no other period. A board may have regions: its
events carry one (or none) and readers ask its regions' tables too (`Query.partition`), each held to
the oracle's table of that region at the answer's seq. A board may be a league (`Workload.leagues`)
whose season is one window longer than any run: readers ask its divisions (the first tier's, filled
in journal order of the members' first events), each held to those members' alltime standings at
the answer's seq. A workload may write only some
of its boards (the others are read only: activated on demand, they unload between answers), and
create some through the admin API (`Workload.api_boards`), which a fault may retire
(`Recorder.retire`): from then on their events are rejected, their table is closed, and their
answers are held to the same rules. A workload may also give every board a short tournament with
prizes (`Workload.cup`, `cup_workload`): readers then ask its settlement too, a poller reads the
settlement feed, and a fault may void its winners after the close (`settle_void_and`); those
answers, the journaled revisions and the feed are held to `support.settlement_history`.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import math
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import websockets

from arena.client import ArenaClient, ArenaClientError, ScoreEvent
from arena.config import JournalSettings
from arena.engine.league import LeagueSpec
from arena.engine.times import format_ms, parse_rfc3339_ms
from support import postgres
from support import settlement_history as settled
from support.faults import Fingerprint, journal_file, open_readonly
from support.oracle import OBoard, OEvent, Row, digest, ranked, standing
from support.server import ADMIN_TOKEN, Client, now_ms, token_for, until

UNAVAILABLE = ("not_ready", "unavailable")
"""The 503 answers a reader may get while a board comes up or moves: allowed, counted."""


# -- what happened ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ack:
    """One event's outcome, as its writer read it: ``status`` is accepted, duplicate or
    rejected:REASON; ``sent`` when its frame first left, ``acked`` when the answer was read."""

    board: str
    key: str
    status: str
    sent: float
    acked: float

    @property
    def recorded(self) -> bool:
        return self.status in ("accepted", "duplicate")


@dataclass(frozen=True)
class Query:
    """A query about a board's alltime table: ``kind`` is top, member, around, around_rank,
    percentile, score_at_percentile, digest, members or periods; or about its cup's settlement
    (`support.settlement_history.KINDS`); ``args`` its fields."""

    kind: str
    board: str
    args: Mapping[str, Any] = field(default_factory=dict)
    partition: str | None = None
    """A region or a league's division: the query asks that partition's table; None: the global table."""
    period: str = "alltime"


@dataclass(frozen=True)
class Answer:
    """One answer a reader got. ``via``: http, ws (a query op's answer) or update (a
    subscription's); ``connection`` numbers WS connections; ``sent`` is None for an update (no
    query was sent for it). ``error`` is the error code of an error answer."""

    via: str
    connection: int | None
    query: Query
    sent: float | None
    received: float
    body: Mapping[str, Any]
    error: str | None = None
    node: str = ""
    """The base URL the query (or subscription) went to."""

    @property
    def seq(self) -> int | None:
        seq = self.body.get("seq")
        return seq if type(seq) is int else None

    def describe(self, started: float) -> str:
        where = f"{self.via}#{self.connection}" if self.connection is not None else self.via
        sent = "" if self.sent is None else f" sent at +{self.sent - started:.3f}s"
        args = ",".join(f"{k}={v}" for k, v in self.query.args.items())
        table = self.query.board if self.query.partition is None else f"{self.query.board}/{self.query.partition}"
        asked = f"{self.query.kind}({table}{',' if args else ''}{args})"
        return f"{where} {asked}{sent}, answered at +{self.received - started:.3f}s"


@dataclass
class History:
    """Everything the writers and readers saw; ``sent``: every event ever sent, by key."""

    started: float = field(default_factory=time.monotonic)
    acks: list[Ack] = field(default_factory=list)
    sent: dict[str, tuple[str, Fingerprint]] = field(default_factory=dict)
    regions: dict[str, str] = field(default_factory=dict)
    """key -> the region of each event sent with one."""
    answers: list[Answer] = field(default_factory=list)
    no_answer: int = 0
    """Queries that got no answer at all (refused, reset, timed out): not a violation."""
    unanswered: list[tuple[str, float, float]] = field(default_factory=list)
    """(node URL, sent, given up) of each query counted in ``no_answer``: how long it waited."""
    recorded: Counter[str] = field(default_factory=Counter)
    """board -> how many of its events were acked accepted or duplicate."""
    voids: list[tuple[str, str, float]] = field(default_factory=list)
    """(board, idempotency key, when its 200 was read) of each event an admin voided."""
    feed: list[dict[str, Any]] = field(default_factory=list)
    """The settlement feed's items, in the order one poller read them."""

    def add(self, ack: Ack) -> None:
        self.acks.append(ack)
        self.recorded[ack.board] += ack.recorded


# -- what the journal holds --------------------------------------------------------------------------


@dataclass(frozen=True)
class Journaled:
    """A journal record: a score event (``event`` set, with its region), a void (``target``
    set), a close marker (``closes``: its period and period_id) or a board record (a definition,
    a retirement, a settlement revision: ``settlement``, its body; none changes the standings)."""

    seq: int
    event: OEvent | None = None
    target: int | None = None
    closes: tuple[str, str] | None = None
    settlement: Mapping[str, Any] | None = None


async def journal_records(journal: JournalSettings, data_dir: Path, board: str) -> list[Journaled]:
    """Every record of ``board``'s journal in seq order, read from its sqlite file in
    ``data_dir`` or from the tables of ``journal``'s schema."""
    events = "SELECT seq, idempotency_key, member, value, occurred_at, region FROM {t}score_event"
    voids = "SELECT seq, target_seq FROM {t}score_void"
    closes = "SELECT closed_seq, period, period_id FROM {t}board_period"
    others = "SELECT seq, kind, body FROM {t}board_record"
    if journal.backend == "sqlite":
        db = open_readonly(journal_file(data_dir, board))
        try:
            rows = [db.execute(sql.format(t="")).fetchall() for sql in (events, voids, closes, others)]
        finally:
            db.close()
    else:
        assert journal.url is not None
        where = f"{journal.schema}."
        rows = [[tuple(r) for r in await postgres.fetch(journal.url, sql.format(t=where) + " WHERE board = $1", board)]
                for sql in (events, voids, closes, others)]
    found = [Journaled(seq, OEvent(member, value, occurred_at, _key(key), region))
             for seq, key, member, value, occurred_at, region in rows[0]]
    found += [Journaled(seq, target=target) for seq, target in rows[1]]
    found += [Journaled(seq, closes=(period, period_id)) for seq, period, period_id in rows[2]]
    found += [Journaled(seq, settlement=orjson.loads(body) if kind == "settlement" else None) for seq, kind, body in rows[3]]
    return sorted(found, key=lambda r: r.seq)


def _key(key: str | bytes) -> str:
    return key if isinstance(key, str) else bytes(key).decode()


# -- the oracle, answer by answer ---------------------------------------------------------------------


class Standings:
    """The oracle's alltime table of one board (or of one of its regions or, on a ``league``
    board, of one of its season's divisions: ``partition``) as of a seq, walked forward through
    its journal: each member's standing is recomputed (`support.oracle.standing`) only when one of
    its events in the table is added or voided, and the table is ranked afresh at each seq asked
    (`ranked`)."""

    def __init__(self, board: OBoard, records: Sequence[Journaled], partition: str | None = None,
                 league: LeagueSpec | None = None) -> None:
        self.board = board
        self.records = records
        self.partition = partition
        self.league = league
        self._joined: dict[str, int] = {}
        """A league's members in the order of their first events (voided or not)."""
        self.last = records[-1].seq if records else 0
        self._next = 0
        self._seq = 0
        self._events: dict[str, list[OEvent]] = {}
        self._by_seq: dict[int, OEvent] = {}
        self._standing: dict[str, tuple[str, int, int]] = {}
        self._rows: list[Row] | None = []

    def at(self, seq: int) -> list[Row]:
        """The table after the records up to ``seq`` (seqs asked never go back)."""
        assert seq >= self._seq, "the standings only walk forward"
        self._seq = seq
        while self._next < len(self.records) and self.records[self._next].seq <= seq:
            self._apply(self.records[self._next])
            self._next += 1
        if self._rows is None:
            self._rows = ranked(self.board, list(self._standing.values()))
        return self._rows

    def _apply(self, record: Journaled) -> None:
        if record.event is not None:
            if self.partition is not None and self._partition_of(record.event) != self.partition:
                return
            self._by_seq[record.seq] = record.event
            self._events.setdefault(record.event.member, []).append(record.event)
            self._restand(record.event.member)
        elif record.target is not None and record.target in self._by_seq:
            gone = self._by_seq.pop(record.target)
            self._events[gone.member].remove(gone)
            self._restand(gone.member)

    def _partition_of(self, event: OEvent) -> str | None:
        if self.league is None:
            return event.region
        joined = self._joined.setdefault(event.member, len(self._joined))
        return f"{self.league.tiers[0]}-{joined // self.league.size + 1}"

    def _restand(self, member: str) -> None:
        events = self._events[member]
        if events:
            self._standing[member] = (member, *standing(self.board, events))
        else:
            self._standing.pop(member, None)
        self._rows = None


FIELDS = {
    "top": ("entries",), "member": ("entry",), "around": ("entries",), "around_rank": ("entries",),
    "percentile": ("entry", "top_percent"), "score_at_percentile": ("entry",), "digest": ("sha256",),
    "members": ("entries", "missing"), "periods": (),
}
"""The fields of each kind of answer that the checker compares, besides ``size``."""


def expected(query: Query, rows: list[Row]) -> dict[str, Any]:
    """What an answer to ``query`` says of a table whose entries are ``rows``: ``size`` and the
    kind's `FIELDS` (entries as oracle rows), or ``error``."""
    a = query.args
    size = len(rows)
    position = {row[1]: i for i, row in enumerate(rows)}
    if query.kind in ("member", "around", "percentile") and a["member"] not in position:
        return {"error": "member_not_found"}
    if query.kind == "top":
        return {"size": size, "entries": rows[a["offset"]:a["offset"] + a["limit"]]}
    if query.kind == "member":
        return {"size": size, "entry": rows[position[a["member"]]]}
    if query.kind == "around":
        i = position[a["member"]]
        return {"size": size, "entries": rows[max(0, i - a["radius"]):i + a["radius"] + 1]}
    if query.kind == "around_rank":
        i = a["rank"] - 1
        return {"size": size, "entries": rows[max(0, i - a["radius"]):max(0, i + a["radius"] + 1)]}
    if query.kind == "percentile":
        entry = rows[position[a["member"]]]
        return {"size": size, "entry": entry, "top_percent": 100 * entry[0] / size}
    if query.kind == "score_at_percentile":
        at = math.ceil(a["p"] * size / 100)
        return {"size": size, "entry": rows[at - 1] if at >= 1 else None}
    if query.kind == "digest":
        return {"size": size, "sha256": digest(rows)}
    if query.kind == "members":
        wanted = dict.fromkeys(a["members"])
        return {"size": size, "entries": [row for row in rows if row[1] in wanted],
                "missing": [m for m in wanted if m not in position]}
    assert query.kind == "periods", query.kind
    return {"size": size}


def observed(answer: Answer) -> dict[str, Any]:
    """The same fields of ``answer``, in `expected`'s shape."""
    if answer.error is not None:
        return {"error": answer.error}
    body = answer.body
    if answer.query.kind == "periods":
        return {"size": next((p["size"] for p in body.get("periods", []) if p.get("period_id") == "alltime"), None)}
    found: dict[str, Any] = {"size": body.get("size")}
    for name in FIELDS[answer.query.kind]:
        value = body.get(name)
        if name == "entries" and isinstance(value, list):
            value = [_row(e) for e in value]
        elif name == "entry" and isinstance(value, dict):
            value = _row(value)
        found[name] = value
    return found


def _row(entry: Mapping[str, Any]) -> Row:
    return (entry["rank"], entry["member"], int(entry["score"]), parse_rfc3339_ms(entry["reached_at"]))


# -- the checker -------------------------------------------------------------------------------------


KINDS = ("lost", "rejected but journaled", "journaled twice", "not as sent", "stale", "not the oracle's", "seq went back",
         "subscription ended", "seq past the journal", "no seq", "settlement not the oracle's", "feed not exactly once")
"""The kinds of violation, gravest first."""


@dataclass
class Report:
    answers: int = 0
    checked: int = 0
    """Answers held to (a), (b) and (c): every answer but the 503s."""
    unavailable: Counter[str] = field(default_factory=Counter)
    no_answer: int = 0
    acked: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    """How many violations of each kind (`KINDS`)."""
    _found: list[tuple[int, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self._found

    @property
    def violations(self) -> list[str]:
        """Every violation, the gravest kinds first (`KINDS`), each kind in the order found."""
        return [text for _, text in sorted(self._found, key=lambda found: found[0])]

    def flag(self, kind: str, violation: str) -> None:
        self.kinds[kind] += 1
        self._found.append((KINDS.index(kind), violation))

    def __str__(self) -> str:
        head = (f"{self.answers} answers ({self.checked} checked, 503: {dict(self.unavailable)}, "
                f"{self.no_answer} queries unanswered), {self.acked} events acked")
        if self.ok:
            return head + ": no violation"
        shown = "\n  ".join(self.violations[:12])
        more = f"\n  ... and {len(self.violations) - 12} more" if len(self.violations) > 12 else ""
        return f"{head}: {len(self.violations)} violations {dict(self.kinds)}, the first:\n  {shown}{more}"


def check(history: History, journals: Mapping[str, Sequence[Journaled]], boards: Mapping[str, OBoard],
          cup: Cup | None = None, leagues: Mapping[str, LeagueSpec] | None = None) -> Report:
    """Judge ``history`` against the journals (board -> its records in seq order) of ``boards``,
    whose tournament ``cup`` (if any) is held to `support.settlement_history` (``leagues``: the
    boards that are leagues, board -> its league)."""
    report = Report(answers=len(history.answers), no_answer=history.no_answer)
    cups = {b: cup_oracle(boards[b], records, cup) for b, records in journals.items()
            if cup is not None and b not in (leagues or {})}  # a league's prizes are its divisions'
    seq_of: dict[tuple[str, str], int] = {}
    for board, records in journals.items():
        keys = Counter(r.event.key for r in records if r.event is not None)
        for k, n in keys.items():
            if n > 1:
                report.flag("journaled twice", f"board {board}: event {k} is journaled {n} times")
        for r in records:
            if r.event is not None:
                seq_of[(board, r.event.key)] = r.seq
                sent = history.sent.get(r.event.key)
                if sent != (board, r.event.fingerprint) or r.event.region != history.regions.get(r.event.key):
                    report.flag("not as sent", f"board {board}: journaled event {r.event.key} {r.event.fingerprint} in region"
                                               f" {r.event.region} was sent as {sent} in {history.regions.get(r.event.key)}")
    floors = _ack_floors(history, seq_of, report, _void_floors(history, journals, seq_of))
    by_table: dict[tuple[str, str | None], list[Answer]] = {}
    last_on: dict[tuple[int, str], Answer] = {}
    for answer in history.answers:
        if answer.via == "update" and answer.error is not None:
            report.flag("subscription ended", f"{answer.describe(history.started)}: {_short(answer.body)}")
            continue
        if answer.error in UNAVAILABLE:
            report.unavailable[answer.error] += 1
            continue
        report.checked += 1
        board, seq = answer.query.board, answer.seq
        where = answer.describe(history.started)
        if seq is None and answer.error == "not_settled" and board in cups and answer.sent is not None:
            floor, key = floors[board](answer.sent)
            if cups[board].settled_by(floor):
                report.flag("settlement not the oracle's", f"{where}: not_settled, but {key} (seq {floor}) was acked "
                                                           f"before the query was sent, after revision 0")
            continue
        if seq is None:
            due = floors[board](answer.sent)[0] if answer.sent is not None else 0
            report.flag("no seq", f"{where}: no seq in the answer {_short(answer.body)} (a seq of at least {due} was due)")
            continue
        if answer.sent is not None:
            floor, key = floors[board](answer.sent)
            if seq < floor:
                report.flag("stale", f"{where}: stale, seq {seq} but event {key} (seq {floor}) was acked before the query was sent")
        if answer.connection is not None:
            before = last_on.get((answer.connection, board))
            if before is not None and before.seq is not None and seq < before.seq:
                report.flag("seq went back", f"{where}: seq {seq} went back from {before.seq} on the same connection"
                                             f" ({before.describe(history.started)})")
            last_on[(answer.connection, board)] = answer
        by_table.setdefault((board, answer.query.partition), []).append(answer)
    for (board, partition), answers in by_table.items():
        oracle = Standings(boards[board], journals.get(board, []), partition, (leagues or {}).get(board))
        for answer in sorted(answers, key=lambda a: a.seq or 0):
            seq, where = answer.seq or 0, answer.describe(history.started)
            if seq > oracle.last:
                report.flag("seq past the journal", f"{where}: seq {seq} is past the journal's last ({oracle.last})")
                continue
            if answer.query.kind in settled.KINDS:
                want = cups[board].expected(answer.query.kind, answer.query.args, seq)
                got = settled.observed(answer.query.kind, answer.body, answer.error)
                if want != got:
                    report.flag("settlement not the oracle's", f"{where}: seq {seq}: {_diff(want, got)}")
                continue
            want, got = expected(answer.query, oracle.at(seq)), observed(answer)
            if want != got:
                report.flag("not the oracle's", f"{where}: seq {seq}: {_diff(want, got)}")
    for board, cup_of in cups.items():
        last = journals[board][-1].seq if journals[board] else 0
        for wrong in cup_of.judge_revisions(last):
            report.flag("settlement not the oracle's", f"board {board}: {wrong}")
    if cup is not None:
        for wrong in settled.judge_feed(history.feed, {b: o.revisions for b, o in cups.items()}):
            report.flag("feed not exactly once", wrong)
    return report


def _diff(want: Mapping[str, Any], got: Mapping[str, Any]) -> str:
    return "; ".join(f"{k}: got {_short(got.get(k))}, oracle says {_short(want.get(k))}"
                     for k in sorted(set(want) | set(got)) if want.get(k) != got.get(k))


@dataclass(frozen=True)
class Cup:
    """A workload's tournament: its window [start, end) in epoch ms and its prize tiers."""

    start: int
    end: int
    tiers: Sequence[Mapping[str, Any]]


def cup_oracle(board: OBoard, records: Sequence[Journaled], cup: Cup) -> settled.CupOracle:
    """The oracle of ``board``'s cup (`support.settlement_history`) from its journal."""
    marker = next((r.seq for r in records if r.closes is not None and r.closes[0] == settled.CUP), None)
    revisions = [settled.Revision(r.seq, r.settlement) for r in records
                 if r.settlement is not None and r.settlement["period"] == settled.CUP]
    return settled.CupOracle(board, (cup.start, cup.end), cup.tiers, [(r.seq, r.event) for r in records if r.event is not None],
                             [(r.seq, r.target) for r in records if r.target is not None], marker, revisions)


def _void_floors(history: History, journals: Mapping[str, Sequence[Journaled]],
                 seq_of: Mapping[tuple[str, str], int]) -> list[tuple[str, float, int, str]]:
    """(board, when acked, seq, what) of each admin void answered: its record's seq, or that of
    the settlement revisions journaled right after it (the void's answer waits for them)."""
    floors = []
    for board, key, acked in history.voids:
        records = journals.get(board, [])
        target = seq_of.get((board, key))
        at = next((i for i, r in enumerate(records) if r.target is not None and r.target == target), None)
        if at is None:
            continue  # a void of an event never journaled: judged as "lost" with its ack
        while at + 1 < len(records) and records[at + 1].settlement is not None:
            at += 1
        floors.append((board, acked, records[at].seq, f"the void of {key}"))
    return floors


def _ack_floors(history: History, seq_of: Mapping[tuple[str, str], int], report: Report,
                voids: Sequence[tuple[str, float, int, str]] = ()) -> dict[str, Callable[[float], tuple[int, str | None]]]:
    """board -> (query sent at t -> the greatest journal seq of an event (or a void: ``voids``)
    acked before t, its key); an acked event missing from the journal, or a rejected one in it,
    is a violation."""
    acked: dict[str, list[tuple[float, int, str]]] = {}
    for board, at, void_seq, what in voids:
        acked.setdefault(board, []).append((at, void_seq, what))
    for ack in history.acks:
        seq = seq_of.get((ack.board, ack.key))
        if not ack.recorded:
            if seq is not None:
                report.flag("rejected but journaled", f"board {ack.board}: event {ack.key} was answered {ack.status} at "
                                                      f"+{ack.acked - history.started:.3f}s and is journaled at seq {seq}")
            continue
        report.acked += 1
        if seq is None:
            report.flag("lost", f"board {ack.board}: event {ack.key} was acked {ack.status} at "
                                     f"+{ack.acked - history.started:.3f}s and is not in the journal (lost)")
            continue
        acked.setdefault(ack.board, []).append((ack.acked, seq, ack.key))
    floors = {}
    for board in {a.query.board for a in history.answers} | set(acked):
        times, best = [], []
        top: tuple[int, str | None] = (0, None)
        for at, seq, key in sorted(acked.get(board, [])):
            if seq > top[0]:
                top = (seq, key)
            times.append(at)
            best.append(top)
        floors[board] = _floor(times, best)
    return floors


def _floor(times: list[float], best: list[tuple[int, str | None]]) -> Callable[[float], tuple[int, str | None]]:
    def floor(sent: float) -> tuple[int, str | None]:
        i = bisect.bisect_left(times, sent)  # acks read strictly before the query was sent
        return best[i - 1] if i else (0, None)
    return floor


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


# -- the workload ------------------------------------------------------------------------------------


PARTITIONED = ("top", "members")
"""The kinds of query the readers also ask of a partition's table."""
SEASON = "season"
REST_SECONDS = 1.0
"""A league board's season: one window of 366 days from this year's first, so every event of a run is in it."""


@dataclass
class Workload:
    """Small boards (alltime only; `OBoard` says how each ranks, and which regions it has) and
    their members."""

    boards: Mapping[str, OBoard]
    members: Sequence[str]
    seed: int = 20261206
    kinds: Sequence[str] = ()
    """The kinds of query the readers send (`FIELDS`); empty: all of them."""
    written: Sequence[str] = ()
    """The boards the writers write after the seed; empty: all of them."""
    api_boards: Sequence[str] = ()
    """The boards created through the admin API (`Recorder.seed`), not declared in the config."""
    cup: Cup | None = None
    """A tournament on every board but the leagues (custom period `support.settlement_history.CUP`,
    no close grace) with prizes: readers also ask its settlement, and a poller reads the feed."""
    leagues: Mapping[str, LeagueSpec] = field(default_factory=dict)
    """The boards that are leagues: their one season (`SEASON`) is split into divisions."""
    resting: Sequence[str] = ()
    """Boards the readers leave alone in turn, one at a time for `REST_SECONDS`, so that each
    goes idle (it unloads, then activates on the next answer) however fast the readers ask."""

    def board_config(self) -> dict[str, dict[str, Any]]:
        return {name: self.definition(name) for name in self.boards if name not in self.api_boards}

    def definition(self, name: str) -> dict[str, Any]:
        b = self.boards[name]
        extra: dict[str, Any] = {"regions": list(b.regions)} if b.regions else {}
        league = self.leagues.get(name)
        if league is not None:
            season = {"every_hours": 8784, "anchor": f"{time.gmtime().tm_year}-01-01T00:00:00Z"}
            extra = {"league": league.document(), "custom_periods": {SEASON: season}}
        elif self.cup is not None:
            extra.update(custom_periods={settled.CUP: {"start": format_ms(self.cup.start), "end": format_ms(self.cup.end)}},
                         prizes={settled.CUP: list(self.cup.tiers)}, close_grace_seconds=0)
        return {"aggregation": b.aggregation, "order": b.order, "tie": b.tie, "periods": ["alltime"],
                "min_value": b.min_value, "max_value": b.max_value, **extra}

    def partitions(self, board: str) -> list[str]:
        """The partitions readers ask of ``board``: its regions, or its divisions once every
        member has joined one (the seed gives each member an event)."""
        league = self.leagues.get(board)
        if league is None:
            return list(self.boards[board].regions)
        return [f"{league.tiers[0]}-{k + 1}" for k in range(math.ceil(len(self.members) / league.size))]

    @property
    def writing(self) -> list[str]:
        return list(self.written or self.boards)

    def event(self, rng: random.Random, board: str, member: str, key: str) -> ScoreEvent:
        b = self.boards[board]
        region = rng.choice([None, *b.regions]) if b.regions else None
        return ScoreEvent(board, member, rng.randint(b.min_value, b.max_value),
                          now_ms() - rng.randrange(5000), key, region=region)

    def query(self, rng: random.Random, ws: bool) -> Query:
        boards = list(self.boards)
        if self.resting:
            boards.remove(self.resting[int(time.monotonic() / REST_SECONDS) % len(self.resting)])
        board = rng.choice(boards)
        member = rng.choice(self.members)
        kinds = ["top", "member", "around", "around_rank", "percentile", "score_at_percentile", "members"]
        kinds = [k for k in (kinds if ws else [*kinds, "digest", "digest", "periods"]) if k in self.kinds or not self.kinds]
        if self.cup is not None and not ws:
            kinds += [*settled.KINDS, *settled.KINDS]
        kind = rng.choice(kinds or ["top"])
        partitions = self.partitions(board)
        partition = rng.choice([None, *partitions]) if partitions and kind in PARTITIONED else None
        period = SEASON if partition is not None and board in self.leagues else "alltime"
        return Query(kind, board, self._args(rng, kind, member), partition, period)

    def _args(self, rng: random.Random, kind: str, member: str) -> dict[str, Any]:
        n = len(self.members)
        if kind in ("top", "settlement", "preview"):
            return {"limit": rng.choice([1, 10, 1000]), "offset": rng.choice([0, 0, 3, n // 2])}
        if kind in ("member", "percentile", "award"):
            return {"member": member}
        if kind == "around":
            return {"member": member, "radius": rng.randrange(4)}
        if kind == "around_rank":
            return {"rank": rng.randrange(1, n + 1), "radius": rng.randrange(4)}
        if kind == "score_at_percentile":
            return {"p": rng.choice([0.5, 10, 50, 99.5, 100])}
        if kind == "members":
            return {"members": [*rng.sample(list(self.members), min(n, 3)), "nobody"]}
        return {}


def http_request(q: Query) -> tuple[str, str, dict[str, Any], Any]:
    """(method, path, params, JSON body) of ``q``'s HTTP route."""
    table = f"/v1/boards/{q.board}/{q.period}"
    a = dict(q.args)
    where = {} if q.partition is None else {"partition": q.partition}
    if q.kind in settled.KINDS:
        path = f"/v1/boards/{q.board}/{settled.CUP}/settlement"
        if q.kind == "award":
            return "GET", f"{path}/members/{a['member']}", {}, None
        return "GET", path, {**a, "preview": "true"} if q.kind == "preview" else a, None
    if q.kind == "members":
        return "POST", f"{table}/members", where, a
    a.update(where)
    if q.kind in ("member", "percentile"):
        return "GET", f"{table}/{'members' if q.kind == 'member' else 'percentile'}/{a['member']}", {}, None
    if q.kind == "around":
        return "GET", f"{table}/around/{a['member']}", {"radius": a["radius"]}, None
    if q.kind == "around_rank":
        return "GET", f"{table}/around", a, None
    return "GET", f"{table}/{q.kind}", a, None


def ws_frame(q: Query) -> dict[str, Any]:
    op = {"member": "rank", "around_rank": "around"}.get(q.kind, q.kind)
    where = {} if q.partition is None else {"partition": q.partition}
    return {"op": op, "board": q.board, "period": q.period, **q.args, **where}


# -- the recorder ----------------------------------------------------------------------------------


class Recorder:
    """Writers and readers over the nodes ``urls()`` names (base URLs; a cluster's live nodes),
    all recording into ``history`` until `stop`."""

    def __init__(self, workload: Workload, urls: Callable[[], Sequence[str]]) -> None:
        self.workload = workload
        self.urls = urls
        self.history = History()
        self.stopping = asyncio.Event()
        self.retired: set[str] = set()
        self._connections = itertools.count(1)
        self._tasks: list[asyncio.Task[None]] = []

    async def write(self, client: ArenaClient, events: list[ScoreEvent], deadline: float) -> None:
        """Submit ``events`` until each is answered (a lost connection: the same keys again)."""
        for e in events:
            assert e.idempotency_key is not None and isinstance(e.occurred_at, int)
            self.history.sent[e.idempotency_key] = (e.board, (e.member, e.value, e.occurred_at))
            if e.region is not None:
                self.history.regions[e.idempotency_key] = e.region
        sent = time.monotonic()
        while True:
            try:
                results = await client.submit_many(events)
                break
            except ArenaClientError:
                if time.monotonic() > deadline:
                    raise
        acked = time.monotonic()
        for e, r in zip(events, results, strict=True):
            status = r.status.value if r.reason is None else f"{r.status.value}:{r.reason}"
            self.history.add(Ack(e.board, r.idempotency_key, status, sent, acked))

    async def seed(self, timeout: float = 60.0) -> None:
        """The API boards created (through the first node; served by every node before it goes
        on), then every member on every board once, acked, before anyone reads."""
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(timeout=10) as http:
            for board in self.workload.api_boards:
                created = await http.put(f"{self.urls()[0]}/v1/boards/{board}", json=self.workload.definition(board), headers=admin)
                assert created.status_code == 201, created.text

            async def everywhere() -> bool:
                for node in self.urls():
                    listed = {b["board"] for b in (await http.get(f"{node}/v1/boards")).json()["boards"]}
                    if not set(self.workload.api_boards) <= listed:
                        return False
                return True

            await until(everywhere, "the API boards served by every node", timeout)
        rng = random.Random(self.workload.seed)
        events = [self.workload.event(rng, b, m, f"seed-{b}-{m}") for b in self.workload.boards for m in self.workload.members]
        async with ArenaClient(list(self.urls()), token_for("gs")) as client:
            for start in range(0, len(events), 500):
                await self.write(client, events[start:start + 500], time.monotonic() + timeout)

    def start(self, *, writers: int = 3, batch: int = 10, http_readers: int = 3, ws_readers: int = 2,
              subscribers: int = 2, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        rng = random.Random(self.workload.seed + 1)
        tasks = [self._writer(f"w{i}", random.Random(rng.random()), batch, deadline) for i in range(writers)]
        tasks += [self._http_reader(random.Random(rng.random()), deadline) for _ in range(http_readers)]
        tasks += [self._ws_reader(random.Random(rng.random()), deadline) for _ in range(ws_readers)]
        tasks += [self._subscriber(board, deadline) for board, _ in zip(itertools.cycle(self.workload.boards), range(subscribers))]
        if self.workload.cup is not None:
            tasks.append(self._feed_reader(random.Random(rng.random()), deadline))
        self._tasks = [asyncio.create_task(t) for t in tasks]

    async def retire(self, board: str) -> None:
        """Retire API board ``board`` through a node (`DELETE /v1/boards/{board}`); the writers
        go on sending it events (rejected from now on)."""
        async with httpx.AsyncClient(timeout=10) as http:
            answer = await http.delete(f"{self.urls()[-1]}/v1/boards/{board}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert answer.status_code == 200, answer.text
        self.retired.add(board)

    async def settled(self, revision: int = 0, timeout: float = 60.0) -> dict[str, dict[str, Any]]:
        """Wait until every board's cup has settled, at revision ``revision`` or later: board ->
        its settlement (every award), through the first node."""
        found: dict[str, dict[str, Any]] = {}
        async with httpx.AsyncClient(timeout=10) as http:
            async def done() -> bool:
                for board in self.workload.boards:
                    try:
                        answer = await http.get(f"{self.urls()[0]}/v1/boards/{board}/{settled.CUP}/settlement",
                                                params={"limit": 1000})
                    except httpx.HTTPError:
                        return False
                    if answer.status_code != 200 or answer.json()["revision"] < revision:
                        return False
                    found[board] = answer.json()
                return True

            await until(done, f"every cup settled (revision {revision})", timeout)
        self._raise_failures()
        return found

    async def void_winners(self, settlements: Mapping[str, Mapping[str, Any]], timeout: float = 60.0) -> None:
        """As an admin, void every cup event (acked, not voided yet) of each board's best ranked
        award winner that also has an event after the cup (so it stays in the alltime table),
        one key at a time, through any node; each 200 is recorded (`History.voids`)."""
        assert self.workload.cup is not None
        cup = self.workload.cup
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=10) as http:
            for board, settlement in settlements.items():
                def winner(awards: Sequence[Mapping[str, Any]] = settlement["awards"], board: str = board) -> str | None:
                    after = {e[0] for b, e in self.history.sent.values() if b == board and e[2] >= cup.end}
                    return next((a["member"] for a in awards if a["member"] in after), None)

                await until(winner, f"an award winner of {board} with an event after the cup", timeout)
                voided, recorded = winner(), {a.key for a in self.history.acks if a.recorded}
                done = {key for _, key, _ in self.history.voids}
                for key, (b, (member, _value, occurred_at)) in list(self.history.sent.items()):
                    if (b != board or member != voided or not cup.start <= occurred_at < cup.end
                            or key not in recorded or key in done):
                        continue
                    while True:
                        node = self.urls()[-1]
                        try:
                            answer = await http.post(f"{node}/v1/boards/{board}/void", headers=admin,
                                                     json={"idempotency_key": key, "reason": "history check"})
                            if answer.status_code == 200:
                                break
                        except httpx.HTTPError:
                            pass
                        if time.monotonic() > deadline:
                            raise AssertionError(f"the void of {key} on {board} was not answered 200")
                        await asyncio.sleep(0.05)  # the board moves or comes up (bounded by the deadline)
                    self.history.voids.append((board, key, time.monotonic()))

    async def feed_caught_up(self, settlements: Mapping[str, Mapping[str, Any]], timeout: float = 60.0) -> None:
        """Wait until the feed poller has read each board's cup revision in ``settlements``."""
        wanted = {(board, s["revision"]) for board, s in settlements.items()}
        await until(lambda: wanted <= {(i["board"], i["revision"]) for i in self.history.feed}, "the feed caught up", timeout)

    async def until_acked(self, more: int, what: str, timeout: float = 60.0) -> None:
        """Wait until every board written and not retired has ``more`` acked events beyond what it has now."""
        recorded = self.history.recorded
        counts = {b: recorded[b] for b in self.workload.writing if b not in self.retired}
        await until(lambda: all(recorded[b] >= counts[b] + more for b in counts), what, timeout)
        self._raise_failures()

    async def stop(self) -> History:
        self.stopping.set()
        await asyncio.wait_for(asyncio.gather(*self._tasks), 60)
        return self.history

    def _raise_failures(self) -> None:
        for task in self._tasks:
            if task.done() and task.exception() is not None:
                raise AssertionError("a writer or reader failed") from task.exception()

    def _running(self, deadline: float) -> bool:
        if time.monotonic() > deadline:
            raise AssertionError("the recorder ran past its deadline")
        return not self.stopping.is_set()

    async def _writer(self, name: str, rng: random.Random, batch: int, deadline: float) -> None:
        async with ArenaClient(list(self.urls()), token_for("gs"), give_up_after=None) as client:
            for n in itertools.count():
                if not self._running(deadline):
                    return
                board = rng.choice(self.workload.writing)
                events = [self.workload.event(rng, board, rng.choice(self.workload.members), f"{name}-{n}-{i}") for i in range(batch)]
                await self.write(client, events, deadline)

    async def _http_reader(self, rng: random.Random, deadline: float) -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            while self._running(deadline):
                query = self.workload.query(rng, ws=False)
                method, path, params, body = http_request(query)
                node = rng.choice(self.urls())
                sent = time.monotonic()
                try:
                    answer = await http.request(method, node + path, params=params, json=body)
                except httpx.HTTPError:
                    await self._no_answer(node, sent)
                    continue
                try:
                    got = answer.json()
                    error = got["error"]["code"] if answer.status_code != 200 else None
                except (ValueError, KeyError, TypeError):  # not one of the contract's answers: a violation
                    got, error = {"text": answer.text}, f"HTTP {answer.status_code}"
                self.history.answers.append(Answer("http", None, query, sent, time.monotonic(), got, error, node))

    async def _ws_reader(self, rng: random.Random, deadline: float) -> None:
        """Queries one at a time on a `/v1/live` connection; a new connection when it breaks."""
        while self._running(deadline):
            connection = next(self._connections)
            node = rng.choice(self.urls())
            sent = time.monotonic()
            try:
                client = Client(await websockets.connect(self._live_url(node)))
            except (OSError, websockets.WebSocketException, TimeoutError):
                await self._no_answer(node, sent)
                continue
            try:
                while self._running(deadline):
                    query = self.workload.query(rng, ws=True)
                    sent = time.monotonic()
                    frame = await client.request(ws_frame(query), timeout=10)
                    error = frame.get("code") if frame["op"] == "error" else None
                    self.history.answers.append(Answer("ws", connection, query, sent, time.monotonic(), frame, error, node))
            except (ConnectionError, TimeoutError, websockets.WebSocketException):
                self.history.no_answer += 1
                self.history.unanswered.append((node, sent, time.monotonic()))
            finally:
                await client.ws.close()

    async def _subscriber(self, board: str, deadline: float) -> None:
        """A `top` view of ``board`` on `/v1/live`, every update recorded; resubscribes on a new
        connection when it breaks."""
        rng = random.Random(board)
        query = Query("top", board, {"limit": 10, "offset": 0})
        while self._running(deadline):
            connection = next(self._connections)
            node = rng.choice(self.urls())
            try:
                async with websockets.connect(self._live_url(node)) as ws:
                    await ws.send(orjson.dumps({"op": "subscribe", "id": 1, "view": ws_frame(query)}).decode())
                    while self._running(deadline):
                        try:
                            frame = orjson.loads(await asyncio.wait_for(ws.recv(), 0.2))
                        except TimeoutError:
                            continue
                        if frame["op"] == "update":
                            self.history.answers.append(Answer("update", connection, query, None, time.monotonic(), frame, node=node))
                        elif frame["op"] != "subscribed":  # the contract never ends a subscription of a table it keeps
                            error = frame.get("code", frame["op"])
                            self.history.answers.append(Answer("update", connection, query, None, time.monotonic(), frame, error, node))
                            break
            except (OSError, websockets.WebSocketException, TimeoutError):
                await self._no_answer()

    async def _feed_reader(self, rng: random.Random, deadline: float) -> None:
        """A game backend polling `GET /v1/settlements` with its last cursor, from any node."""
        cursor = 0
        gs = {"Authorization": f"Bearer {token_for('gs')}"}
        async with httpx.AsyncClient(timeout=10) as http:
            while self._running(deadline):
                try:
                    answer = await http.get(f"{rng.choice(self.urls())}/v1/settlements", headers=gs,
                                            params={"after": cursor, "limit": rng.choice([1, 2, 100])})
                except httpx.HTTPError:
                    await self._no_answer()
                    continue
                if answer.status_code == 200:
                    page = answer.json()
                    self.history.feed += page["items"]
                    cursor = page["next"]
                await asyncio.sleep(0.02)  # a backend's polling interval (bounded by the deadline)

    @staticmethod
    def _live_url(node: str) -> str:
        return node.replace("http", "ws", 1) + "/v1/live"

    async def _no_answer(self, node: str | None = None, sent: float | None = None) -> None:
        """Count a query that got no answer (with how long it waited, when it was one sent to
        ``node`` at ``sent``), and give the node a moment (it is down or coming up)."""
        self.history.no_answer += 1
        if node is not None and sent is not None:
            self.history.unanswered.append((node, sent, time.monotonic()))
        await asyncio.sleep(0.01)


async def record(workload: Workload, urls: Callable[[], Sequence[str]], fault: Callable[[Recorder], Awaitable[None]],
                 *, after: int = 100, **options: Any) -> History:
    """Seed every board, start the writers and readers, run ``fault`` while they go on, let each
    board take ``after`` more acked events, and stop: the whole history."""
    recorder = Recorder(workload, urls)
    await recorder.seed()
    recorder.start(**options)
    try:
        await recorder.until_acked(after, "ingest under way")
        await fault(recorder)
        await recorder.until_acked(after, "ingest after the fault")
    finally:
        history = await recorder.stop()
    return history


CUP_TIERS: list[dict[str, Any]] = [{"reward": "gold", "ranks": [1, 1]}, {"reward": "silver", "top_percent": 12.5},
                                   {"reward": "tin", "score": 60}]


def cup_workload(boards: dict[str, OBoard], n: int, seconds: float) -> Workload:
    """``boards`` created through the API at the seed, each with a tournament that began an hour
    ago and ends ``seconds`` from now (while the writers run), prizes by rank, share and score."""
    now = now_ms()
    return Workload(boards, members(n), cup=Cup(now - 3_600_000, now + int(seconds * 1000), CUP_TIERS), api_boards=tuple(boards))


async def settle_void_and(recorder: Recorder, fault: Callable[[], Awaitable[None]]) -> None:
    """The cup closes and settles while the writers run; an admin voids its winners' events (a
    revision), ``fault`` strikes, the winners' events are voided again (another revision); then
    the feed's poller reads the last revisions."""
    voided = await recorder.settled()
    await recorder.void_winners(voided)
    await fault()
    await recorder.void_winners(await recorder.settled(1))
    await recorder.feed_caught_up(await recorder.settled(2))


async def check_journals(history: History, workload: Workload, journal: JournalSettings, data_dir: Path) -> Report:
    """`check` ``history`` against the boards' journals on ``journal``'s backend."""
    journals = {b: await journal_records(journal, data_dir, b) for b in workload.boards}
    return check(history, journals, workload.boards, workload.cup, workload.leagues)


def members(n: int) -> list[str]:
    return [f"m{i:04d}" for i in range(n)]

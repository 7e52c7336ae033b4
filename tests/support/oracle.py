"""A tiny, obviously-correct model of the contract's standings, for property tests.

Everything is recomputed from scratch and shares no rule with `arena.engine` (it only imports the
engine's types to build a board and read a table back): windows come from
fixed UTC offsets (timezones whose offset is constant in 2026), a table is "the accepted events
whose occurred_at lies in its window", a standing is the contract's definition of best/sum/latest
read literally, and a table is a plain ``sorted``. Slow (O(events) per table) and meant to be.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from arena.engine.board import BoardEngine
from arena.engine.events import Result
from arena.engine.periods import PeriodKind
from arena.engine.scoring import Aggregation, Order, Tie
from arena.engine.spec import BoardSpec
from arena.engine.table import RankedTable
from support.engine_harness import EngineHarness

HOUR = 3_600_000
DAY = 24 * HOUR

#: IANA zones whose UTC offset does not change in 2026 (milliseconds east of UTC).
FIXED_OFFSETS: dict[str, int] = {
    "UTC": 0,
    "Asia/Kolkata": 5 * HOUR + 30 * 60_000,
    "Asia/Tokyo": 9 * HOUR,
    "America/Sao_Paulo": -3 * HOUR,
}

_EPOCH = datetime(1970, 1, 1)


@dataclass(frozen=True)
class OWindow:
    kind: str
    period_id: str
    start: int | None
    end: int | None


def _ms(local: datetime) -> int:
    return (local - _EPOCH) // timedelta(milliseconds=1)


def window_of(kind: str, ms: int, offset: int) -> OWindow:
    """The window of ``kind`` holding instant ``ms`` on a board whose clock is UTC + ``offset``."""
    if kind == "alltime":
        return OWindow("alltime", "alltime", None, None)
    local = _EPOCH + timedelta(milliseconds=ms + offset)
    if kind == "hourly":
        unit = datetime(local.year, local.month, local.day, local.hour)
        after = unit + timedelta(hours=1)
        pid = unit.strftime("%Y-%m-%dT%H")
    elif kind == "daily":
        unit = datetime(local.year, local.month, local.day)
        after = unit + timedelta(days=1)
        pid = unit.strftime("%Y-%m-%d")
    elif kind == "weekly":
        day = date(local.year, local.month, local.day)
        monday = day - timedelta(days=day.weekday())
        unit = datetime(monday.year, monday.month, monday.day)
        after = unit + timedelta(days=7)
        iso = monday.isocalendar()
        pid = f"{iso.year}-W{iso.week:02d}"
    elif kind == "monthly":
        unit = datetime(local.year, local.month, 1)
        after = datetime(local.year + local.month // 12, local.month % 12 + 1, 1)
        pid = unit.strftime("%Y-%m")
    else:
        raise ValueError(kind)
    return OWindow(kind, pid, _ms(unit) - offset, _ms(after) - offset)


@dataclass(frozen=True)
class OEvent:
    member: str
    value: int
    occurred_at: int
    key: str
    region: str | None = None

    @property
    def fingerprint(self) -> tuple[str, int, int]:
        return (self.member, self.value, self.occurred_at)

    def raw(self, board: str) -> dict[str, Any]:
        raw = {"board": board, "member": self.member, "value": self.value, "occurred_at": self.occurred_at,
               "idempotency_key": self.key}
        if self.region is not None:
            raw["region"] = self.region
        return raw


@dataclass(frozen=True)
class OBoard:
    aggregation: str = "best"
    order: str = "desc"
    tie: str = "earliest"
    periods: tuple[str, ...] = ("alltime",)
    timezone: str = "UTC"
    min_value: int = 0
    max_value: int = 1_000_000_000
    grace: int = 60_000
    skew: int = 30_000
    keep_closed: int = 3
    regions: tuple[str, ...] = ()


def standing(board: OBoard, events: list[OEvent]) -> tuple[int, int]:
    """(score, reached_at) of one member from the events applied to its table, by the contract."""
    if board.aggregation == "best":
        pick = max if board.order == "desc" else min
        score = pick(e.value for e in events)
        return score, min(e.occurred_at for e in events if e.value == score)
    if board.aggregation == "sum":
        return sum(e.value for e in events), max(e.occurred_at for e in events)
    last = max(events, key=lambda e: (e.occurred_at, e.key))
    return last.value, last.occurred_at


Row = tuple[int, str, int, int]
"""(rank, member, score, reached_at)"""


def rank(board: OBoard, events: list[OEvent]) -> list[Row]:
    """A table's entries in rank order, sorted from scratch."""
    by_member: dict[str, list[OEvent]] = {}
    for e in events:
        by_member.setdefault(e.member, []).append(e)
    return ranked(board, [(m, *standing(board, evs)) for m, evs in by_member.items()])


def ranked(board: OBoard, standings: list[tuple[str, int, int]]) -> list[Row]:
    """A table's entries in rank order from its (member, score, reached_at) standings."""

    def order(row: tuple[str, int, int]) -> tuple[int, int, str]:
        member, score, reached = row
        return (-score if board.order == "desc" else score, reached if board.tie == "earliest" else -reached, member)

    return [(i + 1, m, s, r) for i, (m, s, r) in enumerate(sorted(standings, key=order))]


def digest(rows: list[Row]) -> str:
    text = "".join(f"{r}\t{m}\t{s}\t{t}\n" for r, m, s, t in rows)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Oracle:
    """Feeds frames (received at a nondecreasing clock) and predicts every ack and table."""

    board: OBoard
    accepted: dict[str, tuple[str, int, int, str | None]] = field(default_factory=dict)
    applied: dict[tuple[str, str], list[OEvent]] = field(default_factory=dict)
    regional: dict[tuple[str, str, str], list[OEvent]] = field(default_factory=dict)
    """Per window and region, the events of that region applied to the window's table."""
    windows: dict[tuple[str, str], OWindow] = field(default_factory=dict)
    now: int = 0

    @property
    def offset(self) -> int:
        return FIXED_OFFSETS[self.board.timezone]

    def is_closed(self, w: OWindow, now: int | None = None) -> bool:
        now = self.now if now is None else now
        return w.end is not None and now >= w.end + self.board.grace

    def submit(self, events: list[OEvent], now: int) -> list[tuple[str, str | None]]:
        """(status, reason) per event, in order."""
        assert now >= self.now, "the oracle models a clock that never goes back"
        self.now = now
        out: list[tuple[str, str | None]] = []
        for e in events:
            region = e.region if self.board.regions else None  # ignored on a board without regions
            if region is not None and region not in self.board.regions:
                out.append(("rejected", "invalid_event"))
                continue
            fingerprint = (e.member, e.value, e.occurred_at, region)
            if e.key in self.accepted:
                out.append(("duplicate", None) if self.accepted[e.key] == fingerprint
                           else ("rejected", "idempotency_key_reused"))
                continue
            if not self.board.min_value <= e.value <= self.board.max_value:
                out.append(("rejected", "value_out_of_range"))
                continue
            if e.occurred_at > now + self.board.skew:
                out.append(("rejected", "occurred_in_future"))
                continue
            open_windows = [w for w in (window_of(k, e.occurred_at, self.offset) for k in self.board.periods)
                            if not self.is_closed(w, now)]
            if not open_windows:
                out.append(("rejected", "period_closed"))
                continue
            self.accepted[e.key] = fingerprint
            for w in open_windows:
                self.windows[(w.kind, w.period_id)] = w
                self.applied.setdefault((w.kind, w.period_id), []).append(e)
                if region is not None:
                    self.regional.setdefault((w.kind, w.period_id, region), []).append(e)
            out.append(("accepted", None))
        return out

    def tables(self, without: frozenset[str] = frozenset()) -> dict[tuple[str, str], list[Row]]:
        """Every table with at least one event (minus events whose key is in ``without``)."""
        out = {}
        for key, events in self.applied.items():
            kept = [e for e in events if e.key not in without]
            if kept:
                out[key] = rank(self.board, kept)
        return out

    def partitions(self, without: frozenset[str] = frozenset()) -> dict[tuple[str, str, str], list[Row]]:
        """Every region's table of a window with at least one event (as `tables`)."""
        out = {}
        for key, events in self.regional.items():
            kept = [e for e in events if e.key not in without]
            if kept:
                out[key] = rank(self.board, kept)
        return out

    def closed_after(self, w: OWindow, now: int) -> int:
        """How many closed windows of w's kind lie after w, as of ``now``."""
        count = 0
        nxt = w
        while nxt.end is not None:
            nxt = window_of(nxt.kind, nxt.end, self.offset)
            if not self.is_closed(nxt, now):
                break
            count += 1
        return count


def engine_rows(table: RankedTable) -> list[Row]:
    """A RankedTable's entries as oracle rows."""
    return [(e.rank, e.member, e.score, e.reached_at) for e in table.entries()]


# -- scenarios: random boards and frames, and driving the engine beside the oracle ----------------

KINDS = ("alltime", "hourly", "daily", "weekly", "monthly")
MEMBERS = ("a", "b", "c", "B", "ab")
"""A small alphabet, so members collide and ties on score happen; "B" < "a" < "ab" in str order."""


def local_base(timezone: str) -> int:
    """Local 2026-06-01T00:00 as epoch ms: an hour, a day, an ISO week and a month start there."""
    return _ms(datetime(2026, 6, 1)) - FIXED_OFFSETS[timezone]


def slots(timezone: str) -> list[int]:
    """occurred_at values: every 40 minutes within 3 hours of the base, the base +-1 ms, and a
    time three days before it (always closed unless the board has alltime). Few on purpose:
    equal timestamps must happen often."""
    base = local_base(timezone)
    return sorted({base + k * 40 * 60_000 for k in range(-4, 5)} | {base - 1, base + 1, base - 3 * DAY})


@dataclass(frozen=True)
class Frame:
    now: int
    events: tuple[OEvent, ...] = ()
    tick: bool = False  # a deadline with an empty mailbox instead of a submit


def spec_of(board: OBoard, name: str = "b") -> BoardSpec:
    return BoardSpec(
        name,
        aggregation=Aggregation(board.aggregation),
        order=Order(board.order),
        tie=Tie(board.tie),
        periods=tuple(PeriodKind(k) for k in board.periods),
        timezone=board.timezone,
        min_value=board.min_value,
        max_value=board.max_value,
        close_grace_ms=board.grace,
        max_future_skew_ms=board.skew,
        keep_closed=board.keep_closed,
        regions=board.regions,
    )


@st.composite
def oboards(draw: st.DrawFn, /, **fixed: Any) -> OBoard:
    """A random board definition; ``fixed`` overrides any field."""
    aggregation = draw(st.sampled_from(["best", "sum", "latest"]))
    chosen = draw(st.sets(st.sampled_from(KINDS), min_size=1))
    values: dict[str, Any] = dict(
        aggregation=aggregation,
        order=draw(st.sampled_from(["desc", "asc"])),
        tie=draw(st.sampled_from(["earliest", "latest"])),
        periods=tuple(k for k in KINDS if k in chosen),
        timezone=draw(st.sampled_from(sorted(FIXED_OFFSETS))),
        min_value=-5 if aggregation == "sum" else draw(st.sampled_from([0, -5])),
        max_value=5,
        grace=draw(st.sampled_from([0, 60_000, 20 * 60_000, 3 * HOUR])),
        skew=draw(st.sampled_from([0, 30_000, HOUR])),
        keep_closed=draw(st.sampled_from([0, 1, 3])),
        regions=draw(st.sampled_from([(), (), ("eu",), ("eu", "na", "asia")])),
    )
    values.update(fixed)
    return OBoard(**values)


@st.composite
def frames_for(draw: st.DrawFn, /, board: OBoard, max_frames: int = 10, ticks: bool = True) -> list[Frame]:
    """Frames at a nondecreasing clock from an hour before the base; keys from a pool of 31, so
    keys get reused, and one event in five is an exact retry of an earlier one."""
    times = slots(board.timezone)
    now = local_base(board.timezone) - HOUR
    sent: list[OEvent] = []
    out: list[Frame] = []
    for _ in range(draw(st.integers(1, max_frames))):
        now += draw(st.sampled_from([0, 60_000, 10 * 60_000, 30 * 60_000, HOUR, 2 * HOUR]))
        if ticks and draw(st.integers(0, 6)) == 0:
            out.append(Frame(now, tick=True))
            continue
        events = []
        for _ in range(draw(st.integers(1, 6))):
            if sent and draw(st.integers(0, 4)) == 0:
                events.append(draw(st.sampled_from(sent)))  # an exact retry
            else:
                events.append(OEvent(
                    member=draw(st.sampled_from(MEMBERS)),
                    value=draw(st.integers(board.min_value - 1, board.max_value + 1)),
                    occurred_at=draw(st.sampled_from(times)),
                    key=f"k{draw(st.integers(0, 30))}",
                    region=draw(st.sampled_from([None, None, *board.regions, "zz"])),
                ))
        sent.extend(events)
        out.append(Frame(now, tuple(events)))
    return out


@st.composite
def boards_and_frames(draw: st.DrawFn) -> tuple[OBoard, list[Frame]]:
    """A random board and frames for it (`oboards`, `frames_for`)."""
    board = draw(oboards())
    return board, draw(frames_for(board))


def wire(results: list[Result]) -> list[tuple[str, str | None]]:
    return [(r.status.value, r.reason.value if r.reason is not None else None) for r in results]


def drive(board: OBoard, frames: list[Frame], name: str = "b") -> tuple[EngineHarness, Oracle]:
    """Run frames through an EngineHarness and the oracle side by side, asserting every ack."""
    harness = EngineHarness({name: spec_of(board, name)})
    oracle = Oracle(board)
    for i, frame in enumerate(frames):
        if frame.tick:
            harness.tick(name, frame.now)
            oracle.submit([], frame.now)
            continue
        got = wire(harness.submit("gs", [e.raw(name) for e in frame.events], frame.now))
        want = oracle.submit(list(frame.events), frame.now)
        assert got == want, f"frame {i} at {frame.now}: engine {got} != oracle {want}"
    return harness, oracle


def check_engine(
    engine: BoardEngine,
    oracle: Oracle,
    now: int,
    rotated_at: int | None,
    *,
    without: frozenset[str] = frozenset(),
    everything: bool = False,
) -> None:
    """Assert an engine's tables are the oracle's, as of ``now``.

    ``rotated_at`` is the last time the engine retired tables (a tick, a replay), None if never:
    a table the oracle has is missing exactly when it was closed then and at least
    ``keep_closed`` closed windows of its kind followed it (``everything``: never missing).
    ``without``: keys of voided events. Every table's window bounds and closed flag are checked
    too; tables the engine holds beyond the oracle's must be empty.
    """
    expected = oracle.tables(without)
    for (kind, period_id), table in engine.tables.items():
        w = table.window
        assert (kind, period_id) == (w.kind, w.period_id)
        if w.start_ms is None:
            assert period_id == "alltime" and w.end_ms is None and not table.closed
        else:
            ow = window_of(str(kind), w.start_ms, oracle.offset)
            assert (ow.period_id, ow.start, ow.end) == (period_id, w.start_ms, w.end_ms)
            # a batch (or tick) closes every due table, so the flag is exactly the clock's
            assert table.closed == oracle.is_closed(ow, now), (kind, period_id, "closed flag")
        rows = engine_rows(table)
        assert rows == expected.get((str(kind), period_id), []), (kind, period_id)
        assert table.digest() == digest(rows)
    partitions = oracle.partitions(without)
    for (kind, period_id), parts in engine.partitions.items():
        assert (kind, period_id) in engine.tables, "a partition lives beside its global table"
        for region, table in parts.items():
            assert table.partition == region and table.closed == engine.tables[(kind, period_id)].closed
            rows = engine_rows(table)
            assert rows == partitions.get((str(kind), period_id, region), []), (kind, period_id, region)
            assert table.digest() == digest(rows)
    for kind, period_id, region in partitions:
        assert (kind, period_id) not in expected or (kind, period_id) not in engine.tables or (
            region in engine.partitions.get((kind, period_id), {})), (kind, period_id, region, "missing")
    held = {(str(k), pid) for k, pid in engine.tables}
    for key in expected:
        known = oracle.windows[key]
        retired = (
            not everything
            and rotated_at is not None
            and oracle.is_closed(known, rotated_at)
            and oracle.closed_after(known, rotated_at) >= oracle.board.keep_closed
        )
        assert (key in held) != retired, (key, "held" if key in held else "missing", rotated_at)

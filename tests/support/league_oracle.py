"""A tiny, obviously correct oracle of a league (DESIGN.md, "Partitioned tables: regions and
leagues") over a season of one-hour windows, written from the contract's words alone, and the
scenarios the property tests drive the engine with.

Frames arrive at a nondecreasing clock; an event is accepted while its window is open (before its
end plus the grace). A window's close marker comes in the journal before the first event received
at or after its close moment, so a member whose first event of a window was received before the
window before closed (its grace) joins at that close, in the order of first events, and the
others join at their first event after it. The tiers of a window are carried from the closes
before it.

The league's size, promote and relegate may change (`define`, a `PUT` of the definition): a window
fills its divisions and moves its members with the parameters in force when its divisions begin,
at the close marker of the window before (the season's first window: at its first event), so a
change applies from the next window.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from arena.engine.league import LeagueSpec
from arena.engine.schedule import CustomPeriod, EveryHours
from arena.engine.spec import BoardSpec
from support.oracle import Frame, OBoard, OEvent, Row, rank

HOUR = 3_600_000
BASE = 1_780_272_000_000
"""2026-06-01T00:00Z: the season's windows start here, an hour each."""
WINDOWS = 4
GRACE = 600_000
BOARD = OBoard(grace=GRACE, skew=0)
MEMBERS = tuple("abcdefgh")


def league_spec(league: LeagueSpec, name: str = "b") -> BoardSpec:
    """A board whose one period is the hourly season of ``league``, best score, descending."""
    return BoardSpec(name, periods=(), custom_periods=(CustomPeriod("season", EveryHours(1, BASE)),),
                     close_grace_ms=GRACE, max_future_skew_ms=0, keep_closed=WINDOWS + 2, league=league)


def window_index(ms: int) -> int:
    return (ms - BASE) // HOUR


@dataclass
class LeagueOracle:
    league: LeagueSpec
    played: dict[int, list[tuple[OEvent, int]]] = field(default_factory=dict)
    """Each window's accepted events, in journal order, with the instant each was received."""
    last: int = 0
    """The latest instant a frame was received (every close due by then is journaled)."""
    current: LeagueSpec | None = None
    """The parameters in force now (None: `league`)."""
    begun: dict[int, LeagueSpec] = field(default_factory=dict)
    """Each window's parameters, taken when its divisions begin."""

    def _close_due(self, now: int) -> None:
        """The close markers due at ``now`` are journaled: the windows after them begin."""
        self.last = now
        for index in range(WINDOWS + 3):
            if self.closed(index):
                self.begun.setdefault(index + 1, self.params)

    @property
    def params(self) -> LeagueSpec:
        return self.current or self.league

    def define(self, league: LeagueSpec, now: int) -> None:
        """A change of the league's parameters received at ``now``, after the closes due then."""
        self._close_due(now)
        self.current = league

    def submit(self, events: list[OEvent], now: int) -> list[bool]:
        self._close_due(now)
        accepted = []
        for e in events:
            index = window_index(e.occurred_at)
            ok = 0 <= index and e.occurred_at <= now and now < BASE + (index + 1) * HOUR + GRACE
            if ok:
                self.played.setdefault(index, []).append((e, now))
                if index == 0:
                    self.begun.setdefault(0, self.params)
            accepted.append(ok)
        return accepted

    def closed(self, index: int) -> bool:
        return BASE + (index + 1) * HOUR + GRACE <= self.last

    def season(self) -> tuple[dict[int, dict[str, list[Row]]], dict[int, dict[str, str]], dict[str, int]]:
        """Each window's divisions' standings and each member's division, and each member's
        tier for its next window after the closed ones."""
        tiers: dict[str, int] = {}
        standings: dict[int, dict[str, list[Row]]] = {}
        divisions: dict[int, dict[str, str]] = {}
        for index in range(max(self.played, default=-1) + 1):
            events = self.played.get(index, [])
            firsts: dict[str, int] = {}
            for e, received in events:
                firsts.setdefault(e.member, received)
            # the window before's close moment; the season's first window has none before it
            previous_close = BASE + index * HOUR + GRACE if index else BASE
            grace = [m for m, received in firsts.items() if received < previous_close]
            after = [m for m, received in firsts.items() if received >= previous_close]
            joining = ([] if not self.closed(index - 1) else grace) + after
            league = self.begun.get(index, self.params)
            counts = [0] * len(league.tiers)
            mine: dict[str, str] = {}
            for m in joining:
                tier = tiers.get(m, 0)
                mine[m] = f"{league.tiers[tier]}-{counts[tier] // league.size + 1}"
                counts[tier] += 1
            divisions[index] = mine
            standings[index] = {
                d: rank(BOARD, [e for e, _ in events if mine.get(e.member) == d]) for d in dict.fromkeys(mine.values())}
            if self.closed(index):
                for d, rows in standings[index].items():
                    tier, n = league.tiers.index(d.rsplit("-", 1)[0]), len(rows)
                    for position, (_rank, m, _score, _at) in enumerate(rows):
                        moved = tier
                        if n > league.promote + league.relegate:
                            if position < league.promote:
                                moved = tier + 1
                            elif position >= n - league.relegate:
                                moved = tier - 1
                        tiers[m] = min(max(moved, 0), len(league.tiers) - 1)
        return standings, divisions, tiers


@st.composite
def leagues(draw: st.DrawFn) -> LeagueSpec:
    return LeagueSpec(size=draw(st.integers(2, 4)), tiers=("bronze", "silver", "gold"),
                      promote=draw(st.integers(0, 2)), relegate=draw(st.integers(0, 2)))


@st.composite
def season_frames(draw: st.DrawFn) -> list[Frame]:
    """Frames over the season's windows and past its end: each received at a nondecreasing
    instant, its events in the window then or (often) the one before, in its grace."""
    instants = sorted(draw(st.lists(st.integers(0, WINDOWS * HOUR + 2 * GRACE), min_size=12, max_size=40)))
    frames = []
    for n, at in enumerate(instants):
        now = BASE + at
        events = []
        for k in range(draw(st.integers(0, 4))):
            earlier = draw(st.sampled_from([0, 0, HOUR // 2, HOUR - 1, GRACE]))
            events.append(OEvent(draw(st.sampled_from(MEMBERS)), draw(st.integers(0, 5)), max(BASE, now - earlier),
                                 f"k{n}-{k}"))
        frames.append(Frame(now, tuple(events), tick=not events))
    return frames



@st.composite
def league_changes(draw: st.DrawFn, league: LeagueSpec) -> list[tuple[int, LeagueSpec]]:
    """Changes of a league's size, promote and relegate (its tiers stay) at instants of the
    season, in order: often just at or after a close moment, before the next window's
    divisions have members."""
    closes = [index * HOUR + GRACE + d for index in range(1, WINDOWS) for d in (-1, 0, 1, 60_000)]
    instants = sorted(draw(st.lists(st.one_of(st.sampled_from(closes), st.integers(0, WINDOWS * HOUR)), max_size=4)))
    return [(BASE + at, LeagueSpec(draw(st.integers(2, 4)), league.tiers, draw(st.integers(0, 2)), draw(st.integers(0, 2))))
            for at in instants]


def window_starts() -> list[Frame]:
    """A deadline at each window's start, as the actor's: it opens the window's table, which its
    close marker then closes at its moment."""
    return [Frame(BASE + index * HOUR, tick=True) for index in range(WINDOWS + 1)]

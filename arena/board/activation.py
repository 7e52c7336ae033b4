"""Activation on demand (DESIGN.md, "Many boards: activation on demand"), as Orleans activates
grains: a board with no event, query or subscription for ``idle_unload_seconds`` is unloaded
(its actor writes a snapshot and stops, its tables are dropped, its journal closed), and its next
event, query or subscription activates it again through the one load path (the snapshot and the
journal's tail). Past ``max_active_boards`` the least recently used board without subscriptions
is unloaded.

The rules are pure (`Unloaded`, `due_markers`, `to_unload`); `Activations` carries them out. Every
transition of a board (activate, unload, the close markers of an inactive board) is one task at a
time per board, each starting after the one before it, so a request that finds a board unloading
waits for the unload to end and then activates it. The board's states are `arena.board.state`'s
(INACTIVE, ACTIVATING, SERVING, UNLOADING); only the supervisor moves them. On a cluster node the
same holds for the boards it owns; a board that leaves it (handed off, disowned) is forgotten.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Protocol

from arena.board.clock import wait_set
from arena.board.state import DORMANT, BoardState
from arena.engine.board import BoardEngine
from arena.engine.periods import Window
from arena.engine.records import CloseRecord
from arena.engine.spec import BoardSpec
from arena.errors import JournalError, not_ready

log = logging.getLogger("arena.board")

ACTIVATION_WAIT_SECONDS = 5.0
"""How long the events and queries that woke a board wait for it; then events still waiting are
`unavailable` and queries 503 `not_ready`."""
SWEEP_SECONDS = 1.0
"""Between two looks for idle boards and due close markers at most."""
_GONE = frozenset({BoardState.FAILED, BoardState.ELSEWHERE, BoardState.FOLLOWING, BoardState.HANDING_OFF,
                   BoardState.DISOWNING, BoardState.RELEASING})
"""The states of a board no longer in this node's memory, nor to be activated here (failed, or
served by another node)."""


@dataclass(frozen=True, slots=True)
class Unloaded:
    """What a board recorded when it was unloaded: its last seq, its current tables' windows and
    sizes (what `GET /v1/boards` lists while it is inactive) and the close moments of its tables not
    closed yet, earliest first (what is journaled on time without loading it)."""

    seq: int
    sizes: tuple[tuple[Window, int], ...]
    closing: tuple[tuple[int, Window], ...]

    @classmethod
    def of(cls, engine: BoardEngine, now: int) -> Unloaded:
        """The record of a loaded board at ``now``, as of its last seq. O(tables)."""
        sizes = []
        for kind in engine.kinds:
            window = engine.schedule.window_at(kind, now)
            table = engine.tables.get((kind, window.period_id))
            sizes.append((window, 0 if table is None else len(table)))
        closing = []
        for key, table in engine.tables.items():
            moment = engine.close_moment(table.window)
            if moment is not None and key not in engine.markers:
                closing.append((moment, table.window))
        return cls(engine.last_seq, tuple(sizes), tuple(sorted(closing, key=lambda c: (c[0], c[1].kind))))

    @classmethod
    def at_start(cls, spec: BoardSpec, last_seq: int, markers: Iterable[CloseRecord], closes: bool, now: int) -> Unloaded:
        """The record of a board not loaded since the start, from what its journal's open reads
        (``last_seq``, its close markers): the close moments of its definition's open windows (the
        current one of each kind and the earlier ones still in their grace) not closed yet — the
        tables its actor would hold and close on time — and of the windows with prizes its actor
        would close at load (`BoardEngine.missed_closes`). ``closes`` False (a retired board, an API
        board whose definition is not journaled yet): nothing to close. No sizes: `GET
        /v1/boards` lists its tables once it has been loaded. Pure. O(markers + kinds)."""
        engine = BoardEngine(spec, last_seq)
        for marker in markers:
            engine.close(marker)
        closing = []
        for kind in engine.kinds if closes else ():
            for window in engine.open_windows(kind, now):
                moment = engine.close_moment(window)
                if moment is not None and moment > now and not engine.is_closed((window.kind, window.period_id)):
                    closing.append((moment, window))
        if closes:  # due already (a stop spanned them): the board is activated at once to close and settle them
            closing += [(marker.closed_at, marker.window) for marker in engine.missed_closes(now)]
        return cls(last_seq, (), tuple(sorted(closing, key=lambda c: (c[0], c[1].kind))))

    @property
    def next_close(self) -> int | None:
        return self.closing[0][0] if self.closing else None

    def closed(self, markers: Iterable[CloseRecord], seq: int) -> Unloaded:
        """The record once ``markers`` are journaled, the last at ``seq``."""
        done = {m.window for m in markers}
        return Unloaded(seq, self.sizes, tuple(c for c in self.closing if c[1] not in done))


def due_markers(unloaded: Unloaded, last_seq: int, now: int) -> list[CloseRecord]:
    """The close markers of an inactive board due at ``now``, numbered after ``last_seq``: the
    same records its actor would journal at the first batch after each close moment. Pure."""
    due = [(moment, window) for moment, window in unloaded.closing if moment <= now]
    return [CloseRecord(last_seq + i + 1, window, moment) for i, (moment, window) in enumerate(due)]


def to_unload(used: Mapping[str, float], subscribed: Set[str], now: float, idle_seconds: float,
              max_active: int) -> list[tuple[str, str]]:
    """The active boards to unload and why (``idle`` or ``lru``), given when each active board was
    last used (``used``, least recently used first) and those with subscriptions. Pure. O(active)."""
    chosen: list[tuple[str, str]] = []
    over = len(used) - max_active
    for board, at in used.items():
        if board in subscribed:
            continue
        if idle_seconds > 0 and now - at >= idle_seconds:
            chosen.append((board, "idle"))
            over -= 1
        elif over > 0:
            chosen.append((board, "lru"))
            over -= 1
    return chosen


class Carrier(Protocol):
    """The I/O of the transitions (`arena.board.supervisor.Supervisor`)."""

    async def activate(self, board: str) -> None:
        """Open the journal of an INACTIVE board and start its actor; return once it serves
        (or failed). Events waiting past `ACTIVATION_WAIT_SECONDS` are answered `unavailable`."""

    async def unload(self, board: str, reason: str) -> Unloaded | None:
        """Unload a SERVING board (snapshot, actor stopped, tables dropped, journal closed):
        what it recorded; None when it was not serving."""

    async def close_inactive(self, board: str, unloaded: Unloaded) -> Unloaded:
        """Journal the due close markers of an INACTIVE board without loading it."""


class Activations:
    """The boards of one node activated on demand; ``carrier`` does their I/O; ``subscribed``
    names the boards with live subscriptions (set by the edge that holds them)."""

    def __init__(self, carrier: Carrier, idle_seconds: float, max_active: int, state_of: Callable[[str], BoardState],
                 now: Callable[[], int]) -> None:
        self.carrier = carrier
        self.idle_seconds = idle_seconds
        self.max_active = max_active
        self.state_of = state_of
        self.now = now
        self.subscribed: Callable[[], Set[str]] = frozenset
        self.unloaded: dict[str, Unloaded] = {}
        """What each board recorded at its last unload (kept while it is inactive)."""
        self._used: dict[str, float] = {}  # the active boards, least recently used first
        self._moves: dict[str, asyncio.Task[None]] = {}
        self._activating: set[str] = set()  # an activation is queued in `_moves`
        self._wakeup = asyncio.Event()

    # -- demand --------------------------------------------------------------------------------

    def used(self, board: str) -> None:
        """``board`` got an event, a query or a subscription: it is the most recently used, and
        a dormant one is activated. O(1)."""
        self._used.pop(board, None)
        self._used[board] = time.monotonic()
        if self.state_of(board) in DORMANT and board not in self._activating:
            self._activating.add(board)
            self._then(board, self._activate)
        elif len(self._used) > self.max_active:
            self.poke()

    async def ready(self, board: str) -> None:
        """Activate ``board`` if it is dormant and wait until it serves. Raises QueryError
        not_ready after `ACTIVATION_WAIT_SECONDS`. A board in any other state returns at once
        (its query answers as that state says)."""
        self.used(board)
        if self.state_of(board) is BoardState.SERVING:
            return
        move = self._moves.get(board)
        if move is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(move), ACTIVATION_WAIT_SECONDS)
        except TimeoutError:
            raise not_ready(board) from None

    def forget(self, board: str) -> None:
        """``board`` is served by another node now: nothing of it is kept here. O(1)."""
        self._used.pop(board, None)
        self.unloaded.pop(board, None)

    async def settled(self, board: str) -> None:
        """Once the transitions of ``board`` under way (its close markers being journaled, say)
        are over: before it is handed off."""
        move = self._moves.get(board)
        if move is not None:
            await asyncio.gather(move, return_exceptions=True)

    @property
    def active(self) -> int:
        """Boards in memory (or being loaded) here: `arena_active_boards`."""
        return len(self._used)

    # -- transitions, one at a time per board --------------------------------------------------

    def _then(self, board: str, step: Callable[[str], Awaitable[None]]) -> None:
        ahead = self._moves.get(board)

        async def move() -> None:
            if ahead is not None:
                await asyncio.gather(ahead, return_exceptions=True)
            await step(board)

        task = self._moves[board] = asyncio.ensure_future(move())
        task.add_done_callback(lambda t: self._moves.pop(board, None) if self._moves.get(board) is t else None)

    async def _activate(self, board: str) -> None:
        try:
            if self.state_of(board) is BoardState.INACTIVE:  # else failed meanwhile
                await self.carrier.activate(board)
        finally:
            self._activating.discard(board)
        self.poke()  # past max_active_boards now?

    async def _unload(self, board: str, reason: str) -> None:
        unloaded = await self.carrier.unload(board, reason)
        if unloaded is not None:
            self.unloaded[board] = unloaded

    async def _markers(self, board: str) -> None:
        unloaded = self.unloaded.get(board)
        if unloaded is None or self.state_of(board) is not BoardState.INACTIVE:
            return
        try:
            self.unloaded[board] = await self.carrier.close_inactive(board, unloaded)
        except JournalError as exc:  # tried again at the next sweep
            log.error("board %s: close markers of the inactive board not journaled: %s", board, exc)

    # -- the sweep -----------------------------------------------------------------------------

    def poke(self) -> None:
        """Look again now (the clock moved, a board was activated)."""
        self._wakeup.set()

    async def run(self) -> None:
        """Unload idle and surplus boards, and journal the due close markers of inactive ones,
        until cancelled."""
        while True:
            try:
                self.sweep()
            except Exception:  # a bug here must not stop unloading for good
                log.exception("activation sweep failed")
            self._wakeup.clear()
            await wait_set(self._wakeup, self._pause())

    def _pause(self) -> float:
        pause = SWEEP_SECONDS if self.idle_seconds <= 0 else min(SWEEP_SECONDS, self.idle_seconds / 4)
        closes = [u.next_close for b, u in self.unloaded.items()
                  if u.next_close is not None and b not in self._moves and self.state_of(b) is BoardState.INACTIVE]
        if closes:
            pause = min(pause, max(min(closes) - self.now(), 0) / 1000)
        return pause

    def sweep(self) -> None:
        """One look: start the unloads and close-marker writes due now. O(boards here)."""
        for board in [b for b in self._used if self.state_of(b) in _GONE]:
            del self._used[board]
        idle = {b: at for b, at in self._used.items() if b not in self._moves and self.state_of(b) is BoardState.SERVING}
        for board, reason in to_unload(idle, self.subscribed(), time.monotonic(), self.idle_seconds,
                                       self.max_active - (len(self._used) - len(idle))):
            del self._used[board]
            self._then(board, functools.partial(self._unload, reason=reason))
        now = self.now()
        for board, unloaded in list(self.unloaded.items()):
            moment = unloaded.next_close
            if moment is not None and moment <= now and board not in self._moves \
                    and self.state_of(board) is BoardState.INACTIVE:
                self._then(board, self._markers)

    async def close(self) -> None:
        """Stop the transitions under way (the server stops; the actors have stopped): an
        activation still opening its journal is abandoned (its board is shut)."""
        for board in self._activating:
            move = self._moves.get(board)
            if move is not None:
                move.cancel()
        await asyncio.gather(*self._moves.values(), return_exceptions=True)

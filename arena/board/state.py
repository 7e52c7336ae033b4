"""A board's life on a node: one state, moved only by events along `MOVES`, and one map per node
(`BoardStates`) that the supervisor, the ownership loop, the directory, `/v1/cluster`, readiness
and the routing decision all read. Pure: no I/O, no event loop.

    ELSEWHERE ─follow─> FOLLOWING ─unfollow─> ELSEWHERE
    ELSEWHERE, FOLLOWING ─take─> TAKING ─granted─> LOADING ─loaded─> SERVING
                                 TAKING ─not granted─> ELSEWHERE
    LOADING, SERVING ─hand off─> HANDING_OFF ─stopped─> ELSEWHERE ─release─> RELEASING ─released─> ELSEWHERE
    LOADING, SERVING, FAILED ─disown─> DISOWNING ─stopped─> ELSEWHERE
    LOADING, SERVING ─start─> LOADING (an actor's life starts: a restart replays)
    LOADING, SERVING ─not granted─> ELSEWHERE (a restart found the board granted to another node)
    LOADING, SERVING ─fail─> FAILED;  any but FAILED ─shut─> FAILED (the server stops)
    INACTIVE ─activate─> ACTIVATING ─loaded─> SERVING ─unload─> UNLOADING ─stopped─> INACTIVE
    INACTIVE, ACTIVATING ─fail─> FAILED (its journal cannot be opened, or its actor failed)
    TAKING ─granted inactive─> INACTIVE (on demand: owned, not loaded)
    INACTIVE, ACTIVATING ─hand off─> HANDING_OFF;  INACTIVE, ACTIVATING ─disown─> DISOWNING
    ACTIVATING ─not granted─> ELSEWHERE;  ACTIVATING ─stopped─> INACTIVE (its store is away: tried again on demand)

A single node (no ``[cluster]``) starts every board LOADING, or INACTIVE when boards are
activated on demand (``idle_unload_seconds`` > 0; `arena.board.activation`), and never leaves the
actor's states; a cluster node starts every board ELSEWHERE. A cluster node activating on demand
takes a board INACTIVE (granted, its due close markers known, nothing loaded) unless it has a
standby copy of it, and hands it off or disowns it without loading it. The table is state ->
event -> next state: a state a later issue adds (retired) is one more row and the events that
reach it.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from arena.errors import IllegalTransition


class BoardState(enum.Enum):
    ELSEWHERE = "elsewhere"
    """Another node serves the board, or none does yet: the edges forward to its owner."""
    FOLLOWING = "following"
    """Served elsewhere; this node keeps a standby copy up to date (`arena.cluster.standby`)."""
    TAKING = "taking"
    """Being granted to this node (a grant and the journal's open, a few at a time)."""
    LOADING = "loading"
    """Granted: its actor loads the tables (a replay, a snapshot, a standby's tail)."""
    SERVING = "serving"
    """Its actor serves: loaded, journaling and answering."""
    HANDING_OFF = "handing off"
    """Its actor finishes what it took and stops, taking nothing new; then its owner row is released."""
    DISOWNING = "disowning"
    """Granted to another node now: its actor stops at once; what it holds is answered `unavailable`."""
    RELEASING = "releasing"
    """Its owner row, still naming this process, is being released for the next owner."""
    INACTIVE = "inactive"
    """Unloaded (or never loaded since the start): no actor, no tables, its journal closed; the
    next event, query or subscription activates it."""
    ACTIVATING = "activating"
    """Being activated: its actor loads the snapshot written at its unload and the journal's tail
    while the events and queries that woke it wait."""
    UNLOADING = "unloading"
    """Idle (or the least recently used past ``max_active_boards``): its actor finishes what it
    took, writes a snapshot and stops; then its tables are dropped and its journal closed."""
    FAILED = "failed"
    """Its journal cannot be read, or its actor crashed past the restart intensity (or the server stopped)."""

    __hash__ = object.__hash__  # a member is its one instance; Enum's hashes its name in Python, on every query's state check


class BoardEvent(enum.Enum):
    FOLLOW = "follow"
    UNFOLLOW = "unfollow"
    TAKE = "take"
    GRANTED = "granted"
    GRANTED_INACTIVE = "granted inactive"
    NOT_GRANTED = "not granted"
    START = "start"
    LOADED = "loaded"
    FAIL = "fail"
    HAND_OFF = "hand off"
    DISOWN = "disown"
    STOPPED = "stopped"
    RELEASE = "release"
    RELEASED = "released"
    SHUT = "shut"
    ACTIVATE = "activate"
    UNLOAD = "unload"


_S, _E = BoardState, BoardEvent
_SHUT = {_E.SHUT: _S.FAILED}

MOVES: dict[BoardState, dict[BoardEvent, BoardState]] = {
    _S.ELSEWHERE: {_E.FOLLOW: _S.FOLLOWING, _E.TAKE: _S.TAKING, _E.RELEASE: _S.RELEASING, **_SHUT},
    _S.FOLLOWING: {_E.UNFOLLOW: _S.ELSEWHERE, _E.TAKE: _S.TAKING, **_SHUT},
    _S.TAKING: {_E.GRANTED: _S.LOADING, _E.GRANTED_INACTIVE: _S.INACTIVE, _E.NOT_GRANTED: _S.ELSEWHERE, **_SHUT},
    _S.LOADING: {_E.START: _S.LOADING, _E.LOADED: _S.SERVING, _E.FAIL: _S.FAILED, _E.NOT_GRANTED: _S.ELSEWHERE,
                 _E.HAND_OFF: _S.HANDING_OFF, _E.DISOWN: _S.DISOWNING, **_SHUT},
    _S.SERVING: {_E.START: _S.LOADING, _E.FAIL: _S.FAILED, _E.NOT_GRANTED: _S.ELSEWHERE,
                 _E.HAND_OFF: _S.HANDING_OFF, _E.DISOWN: _S.DISOWNING, _E.UNLOAD: _S.UNLOADING, **_SHUT},
    _S.INACTIVE: {_E.ACTIVATE: _S.ACTIVATING, _E.FAIL: _S.FAILED, _E.HAND_OFF: _S.HANDING_OFF, _E.DISOWN: _S.DISOWNING,
                  **_SHUT},
    _S.ACTIVATING: {_E.START: _S.ACTIVATING, _E.LOADED: _S.SERVING, _E.FAIL: _S.FAILED, _E.NOT_GRANTED: _S.ELSEWHERE,
                    _E.HAND_OFF: _S.HANDING_OFF, _E.DISOWN: _S.DISOWNING, _E.STOPPED: _S.INACTIVE, **_SHUT},
    _S.UNLOADING: {_E.STOPPED: _S.INACTIVE, **_SHUT},
    # an actor handed off before it started, or still loading, starts and loads before it stops
    _S.HANDING_OFF: {_E.START: _S.HANDING_OFF, _E.LOADED: _S.HANDING_OFF, _E.STOPPED: _S.ELSEWHERE, **_SHUT},
    _S.DISOWNING: {_E.LOADED: _S.DISOWNING, _E.STOPPED: _S.ELSEWHERE, **_SHUT},
    _S.RELEASING: {_E.RELEASED: _S.ELSEWHERE, **_SHUT},
    _S.FAILED: {_E.DISOWN: _S.DISOWNING},
}
"""The one table of a board's life on a node: state -> event -> next state."""

RUNNING = frozenset({_S.LOADING, _S.SERVING, _S.HANDING_OFF, _S.DISOWNING, _S.ACTIVATING, _S.UNLOADING})
"""The states in which an actor of the board runs here (or restarts)."""
STOPPING = frozenset({_S.HANDING_OFF, _S.DISOWNING, _S.UNLOADING})
"""The states of a board leaving this node (or memory): its actor stops and is not restarted, failed or disowned."""
DORMANT = frozenset({_S.INACTIVE, _S.UNLOADING})
"""The states of a board whose next event, query or subscription activates it (once unloaded)."""
MOVING = frozenset({_S.TAKING, _S.HANDING_OFF, _S.DISOWNING, _S.RELEASING})
"""The states of a move of the ownership loop under way: its beats leave these boards alone."""
OWNED = RUNNING | {_S.INACTIVE}
"""The states of a board this node holds as its owner, loaded or not (the plan's ``served``)."""
SHIFTING = frozenset({_S.ACTIVATING, _S.UNLOADING})
"""The states of an activation or an unload under way: the beats leave these boards alone too
(they end within seconds; an activation reopens the journal under the board's epoch)."""
_ANSWERING = frozenset({_S.LOADING, _S.SERVING, _S.INACTIVE, _S.ACTIVATING, _S.UNLOADING})
_ACTIVE = frozenset({_S.LOADING, _S.SERVING, _S.ACTIVATING, _S.HANDING_OFF, _S.DISOWNING})
_AWAY = frozenset({_S.ELSEWHERE, _S.FOLLOWING})
_NOT_READY = frozenset({_S.LOADING, _S.FAILED})
_ON_DEMAND = frozenset({_S.SERVING, _S.INACTIVE, _S.ACTIVATING, _S.UNLOADING})
_SHOWN = {_S.LOADING: "loading", _S.SERVING: "ready", _S.FAILED: "failed", _S.HANDING_OFF: "ready", _S.DISOWNING: "ready",
          _S.INACTIVE: "inactive", _S.ACTIVATING: "activating", _S.UNLOADING: "unloading"}


class IllegalBoardMove(IllegalTransition):
    """An event `MOVES` does not allow in the board's state (a bug): the state is unchanged."""

    def __init__(self, board: str, state: BoardState, event: BoardEvent) -> None:
        super().__init__(f"board {board}: no move on {event.value!r} from {state.value!r}")
        self.board = board
        self.state = state
        self.event = event


@dataclass(frozen=True, slots=True)
class Owner:
    """The node serving a board, reached by peers at ``url``, under its ownership ``epoch``."""

    node_id: str
    url: str
    epoch: int
    active: bool = True
    """Whether its owner has the board's tables in memory (as it last wrote it in the owner row)."""


class BoardStates:
    """Every board's `BoardState` on this node, and what the edges and the ownership loop need
    beside it: the board's ``owner`` as the last read of the owner rows said (`seen`), the epoch
    under which it is granted to this process (`granted`), and the freshness of this node's
    lease. ``node_id`` None: a single node, which answers for every board itself, always.

    A node answers for the boards it owns only while its last lease renewal is younger than
    ``lease_seconds`` on its own monotonic clock: past that, another node may have taken them
    over, so they count as ownerless until it renews."""

    def __init__(self, boards: Iterable[str] = (), *, node_id: str | None = None, lease_seconds: float = 0.0,
                 monotonic: Callable[[], float] = time.monotonic, on_demand: bool = False) -> None:
        self.node_id = node_id
        self.lease_seconds = lease_seconds
        self.on_demand = on_demand
        """Boards are activated on demand (``idle_unload_seconds`` > 0): on a single node they
        start INACTIVE; a cluster node takes them INACTIVE."""
        self._states = {board: self._first for board in boards}
        self._owners: dict[str, Owner | None] = {}
        self._epochs: dict[str, int] = {}
        self.monotonic = monotonic
        self._moved_at: dict[str, float] = {}
        self._fresh_until = float("-inf")
        self._handed_over: set[str] = set()

    @property
    def _first(self) -> BoardState:
        """The state every board starts in here."""
        return BoardState.ELSEWHERE if self.node_id is not None else BoardState.INACTIVE if self.on_demand else BoardState.LOADING

    # -- the state machine -------------------------------------------------------------------

    def add(self, board: str) -> None:
        """A board created at runtime joins the map in the state every board starts in here."""
        if board not in self._states:
            self._states[board] = self._first

    def state(self, board: str) -> BoardState:
        return self._states[board]

    def can(self, board: str, event: BoardEvent) -> bool:
        return event in MOVES[self._states[board]]

    def check(self, board: str, event: BoardEvent) -> None:
        """Raise IllegalBoardMove unless ``event`` moves ``board`` now (before the I/O that ends in it)."""
        if not self.can(board, event):
            raise IllegalBoardMove(board, self._states[board], event)

    def move(self, board: str, event: BoardEvent) -> BoardState:
        """Move ``board`` on ``event``; its new state. Raises IllegalBoardMove (the state is then unchanged)."""
        state = self._states[board]
        to = MOVES[state].get(event)
        if to is None:
            raise IllegalBoardMove(board, state, event)
        self._states[board] = to
        self._moved_at[board] = self.monotonic()
        if to in (BoardState.SERVING, BoardState.INACTIVE, BoardState.FAILED):  # a hand-off to this node is over
            self._handed_over.discard(board)
        return to

    def __contains__(self, board: object) -> bool:
        return board in self._states

    def __iter__(self) -> Iterator[str]:
        """The boards, in their configured order."""
        return iter(self._states)

    def moved_since(self, instant: float) -> set[str]:
        """The boards that moved at or after monotonic ``instant``: a read of the owner rows that
        began before it may be stale about them (a release, a take that just ended). O(boards)."""
        return {board for board, at in self._moved_at.items() if at >= instant}

    def boards(self, *states: BoardState) -> set[str]:
        """The boards in any of ``states``. O(boards)."""
        return {board for board, state in self._states.items() if state in states}

    @property
    def ready(self) -> bool:
        """No board is loading or failed (the others are served here or elsewhere). O(boards)."""
        return not any(state in _NOT_READY for state in self._states.values())

    def shown(self, board: str) -> str:
        """The state as ``GET /v1/boards`` lists it: loading, ready, failed, elsewhere, inactive,
        activating or unloading."""
        return _SHOWN.get(self._states[board], "elsewhere")

    def active(self, board: str) -> bool:
        """Whether the board's tables are in memory here, or being loaded; for a board served
        by another node, whether they are there as the last read of the owner rows said
        (``"active"`` of `GET /v1/boards`)."""
        state = self._states[board]
        if state in _ACTIVE:
            return True
        owner = self._owners.get(board)
        return state in _AWAY and owner is not None and owner.node_id != self.node_id and owner.active

    def readiness(self, board: str) -> int:
        """``arena_board_ready``: 1 while the board serves here (an inactive one: on demand), -1
        once failed, 0 otherwise."""
        state = self._states[board]
        return 1 if state in _ON_DEMAND else -1 if state is BoardState.FAILED else 0

    # -- owners and this node's lease --------------------------------------------------------

    @property
    def clustered(self) -> bool:
        return self.node_id is not None

    def renewed(self, sent_at: float) -> None:
        """The lease renewal sent at monotonic time ``sent_at`` committed: this node's lease is
        fresh until ``sent_at`` + ``lease_seconds`` (the database's expiry is later than that)."""
        self._fresh_until = max(self._fresh_until, sent_at + self.lease_seconds)

    @property
    def lease_fresh(self) -> bool:
        return not self.clustered or self.monotonic() < self._fresh_until

    def seen(self, board: str, owner: Owner | None, *, released: bool = False) -> bool:
        """The board's owner as the journal's tables now say (None: ownerless, or moving from
        this node); ``released``: its owner handed it off and no node has taken it yet. Whether
        that changed what was known."""
        if released:
            self._handed_over.add(board)
        elif owner is None or owner.node_id != self.node_id:  # its lease expired, or another node serves it
            self._handed_over.discard(board)
        if self._owners.get(board) == owner:
            return False
        self._owners[board] = owner
        return True

    def owner_of(self, board: str) -> Owner | None:
        """The node answering for ``board`` now; None while it is ownerless, which includes the
        boards of this node while its lease is stale. Not meaningful for a single node."""
        owner = self._owners.get(board)
        if owner is not None and owner.node_id == self.node_id and not self.lease_fresh:
            return None
        return owner

    def handed_over(self, board: str) -> bool:
        """Whether ``board`` is being handed off (a planned move): released by its owner and not
        taken yet, or taken by this node and still loading. Queries wait for it (unlike for a board
        whose owner's lease expired). O(1)."""
        return board in self._handed_over

    def local(self, board: str) -> bool:
        """Whether this node answers for ``board`` itself now (the routing decision's "here")."""
        if not self.clustered:
            return True
        owner = self.owner_of(board)
        return owner is not None and owner.node_id == self.node_id

    def answering(self, board: str) -> bool:
        """Whether queries and submits reach the board's actor here (else `unavailable`)."""
        return self._states[board] in _ANSWERING and self.local(board)

    # -- grants to this process ---------------------------------------------------------------

    def granted(self, board: str, epoch: int) -> None:
        """``board`` is granted to this process under ``epoch`` (its journal's opens are fenced by it)."""
        self._epochs[board] = epoch

    def ungranted(self, board: str) -> int | None:
        """``board`` was released, or found granted to another epoch; the epoch it had here."""
        return self._epochs.pop(board, None)

    def epoch(self, board: str) -> int | None:
        return self._epochs.get(board)

    @property
    def epochs(self) -> Mapping[str, int]:
        """The boards granted to this process and not found granted again since, with their epochs."""
        return dict(self._epochs)

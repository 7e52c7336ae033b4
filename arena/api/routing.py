"""Where a request about a board is answered: here, at its owner, or nowhere for now. The one
routing decision of the edges (HTTP, WebSocket, admin and live routes, and the peer route, which
answers `Elsewhere` for what `where` does not place here).

On a single node every board is `Local`. In a cluster the answer reads who owns the board now,
including whether this node's lease is fresh enough to answer for its own boards (a stale owner
is `Ownerless`, never `Local`: it never serves stale standings). A query asks `answering`
instead: the one wait of the edges for a board that will answer soon (a hand-off under way, a
board activated on demand), then `not_ready`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass

from arena.api.service import Arena
from arena.board.actor import BoardHandle
from arena.board.state import DORMANT, BoardState, Owner
from arena.engine.events import Reason, Result
from arena.errors import QueryError, not_ready


@dataclass(frozen=True, slots=True)
class Local:
    """Answered here, by ``handle``; None: there is no board of that name (answered here too:
    `unknown_board`, or the request's own error)."""

    handle: BoardHandle | None


@dataclass(frozen=True, slots=True)
class Remote:
    """Served by another node: forwarded to ``owner``."""

    board: str
    owner: Owner


@dataclass(frozen=True, slots=True)
class Ownerless:
    """Served by no node now (its owner's lease expired, or its owner cannot be reached): frames
    wait for the next owner, queries answer `error` at once (but during a hand-off: `answering`)."""

    board: str

    @property
    def error(self) -> QueryError:
        """503 `unavailable`; the edges give every 503 its `Retry-After`."""
        return QueryError("unavailable", f"board {self.board!r} has no reachable owner right now; retry", 503)


Place = Local | Remote | Ownerless

_ACTIVATED = DORMANT | {BoardState.ACTIVATING}
"""The states of a board served here on demand that a query waits for (`Arena.activated`)."""


def where(arena: Arena, board: object) -> Place:
    """Where a request about ``board`` (a name as the request gave it: maybe no board's, maybe
    not a string) is answered now. O(1)."""
    handle = arena.boards.get(board) if isinstance(board, str) else None
    states = arena.states
    if handle is None or not states.clustered:
        return Local(handle)
    owner = states.owner_of(handle.name)
    if owner is None:
        return Ownerless(handle.name)
    if owner.node_id == states.node_id:
        return Local(handle)
    return Remote(handle.name, owner)


def waits(arena: Arena, handle: BoardHandle) -> bool:
    """Whether `answering` a query about a board `where` places here (``handle``) waits: a
    hand-off of the board is under way, or this node serves it on demand and it is not loaded
    (dormant or activating). O(1)."""
    return arena.states.handed_over(handle.name) or handle.state in _ACTIVATED


async def settled(arena: Arena, board: object, seconds: float) -> Place:
    """`where` a request about ``board`` goes, once a hand-off of the board under way is over: it
    waits (at most ``seconds``) for the next owner to be named and, when that is this node, for
    the board's tables to be loaded here. Without a hand-off it is `where`, at once. What routes a
    forwarded HTTP request (answered by a route, which asks `answering`); a query asks `answering`."""
    place = where(arena, board)
    if not isinstance(board, str) or not arena.states.handed_over(board):
        return place
    deadline = time.monotonic() + seconds
    if isinstance(place, Ownerless):
        await arena.directory.owner_within(board, seconds)
        place = where(arena, board)
    if isinstance(place, Local) and place.handle is not None and arena.states.handed_over(board):  # still loading
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(place.handle.loaded.wait(), max(deadline - time.monotonic(), 0))
        return where(arena, board)
    return place


async def answering(arena: Arena, board: object, seconds: float) -> Place:
    """`where` a query about ``board`` is answered, once a board that will answer soon does: the
    one wait of the edges (HTTP routes, WebSocket query ops and subscriptions, forwarded queries,
    the peer route). During a hand-off the next owner is waited for (`settled`, at most
    ``seconds``); a board served here on demand is activated and waited for (at most
    `ACTIVATION_WAIT_SECONDS`, `Arena.activated`). Raises QueryError not_ready (503) when a board
    to be answered here is still not loaded then: HTTP answers it with `Retry-After: 1`, a
    WebSocket op with an error frame, the peer route with `Refused`."""
    place = await settled(arena, board, seconds)
    if isinstance(place, Local) and place.handle is not None:
        if arena.states.handed_over(place.handle.name):  # handed off to this node and still loading
            raise not_ready(place.handle.name)
        await arena.activated(place.handle.name)
    return place


def moved(arena: Arena, board: str, results: Sequence[Result]) -> bool:
    """Whether a part of a frame answered by this node's actor goes on to the next owner: the
    board is not served here any more and some of its events were answered `unavailable` (this
    node lost the board while they waited)."""
    return not isinstance(where(arena, board), Local) and any(r.reason is Reason.UNAVAILABLE for r in results)

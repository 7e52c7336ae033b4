"""The edges' way to the boards served by other nodes of a cluster: a submit frame's part, a
WebSocket query op, an HTTP query or admin route, sent to the board's owner over `Peers`.

A part for an ownerless board waits up to `OWNERLESS_WAIT_SECONDS` from the frame's reading for
the next owner, then is answered `unavailable` (clients resend with the same keys); a part in
flight to an owner whose connection dropped is resent to the next owner, which answers the events
already committed `duplicate`. A query for an ownerless board, or one whose owner cannot be
reached, answers 503 `unavailable` at once (a board being handed off: once the next owner serves,
or after `QUERY_SECONDS`); one whose owner does not answer within
`QUERY_SECONDS` (a cut link: nothing fails, nothing comes back) answers 503 `unavailable` then,
and one whose board gets another owner while it waits goes on to that owner. On a single node
every board is served here and nothing of this runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import orjson

from arena.api.routing import Local, Ownerless, Remote, answering, moved, settled, where
from arena.api.service import Arena
from arena.api.wire import Body
from arena.board.actor import unavailable_results
from arena.cluster.directory import Owner
from arena.cluster.peer.client import NotHere, Peer, PeerGone, Peers, TooLarge
from arena.cluster.peer.protocol import Answer, Ask, Http, HttpAnswer, ProtocolError, Refused, Submit, Submitted
from arena.engine.events import Event, Reason, Result
from arena.errors import QueryError, invalid_request

if TYPE_CHECKING:
    from starlette.types import Scope

log = logging.getLogger("arena.cluster")

OWNERLESS_WAIT_SECONDS = 5.0
RETRY_SECONDS = 0.25
"""After a peer could not be reached (and the directory names no other owner yet), wait this
long before trying it again."""
QUERY_TRIES = 3
"""Owners a query is sent to before it is answered `unavailable` (each one said ``not_here``, or
lost the board while it waited)."""
QUERY_SECONDS = 4.0
"""The longest a forwarded query waits for owners' answers, all tries together: the contract's
5 s bound on a query, less the edge's own time."""


FORWARDED = "arena.forwarded"
"""Scope key of an HTTP request a peer forwarded: it is answered here, never forwarded again."""


def forwarded(scope: Scope) -> bool:
    return scope.get(FORWARDED, False) is True


_FORWARDED_HEADERS = {b"authorization", b"content-type"}


def forward_request(board: str, scope: Scope, body: bytes) -> Http:
    """The peer request of an HTTP request about ``board``: its method (HEAD as GET: the body's
    length is answered here), path, query, body and the headers the owner needs (an admin's token)."""
    headers = tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"] if k.lower() in _FORWARDED_HEADERS)
    return Http(board, "GET" if scope["method"] == "HEAD" else scope["method"], scope["path"],
                scope["query_string"].decode("latin-1"), headers, body)


def refused(answer: Answer) -> QueryError:
    """The error of an owner's answer that is not the kind asked for: a `Refused` as the
    QueryError it stands for. Raises ProtocolError for any other kind."""
    if isinstance(answer, Refused):
        return QueryError(answer.code, answer.message, answer.status)
    raise ProtocolError(f"an owner answered with {type(answer).__name__}")


class Forwarding:
    """One node's forwarding, over its `Peers` (None on a single node)."""

    def __init__(self, arena: Arena, peers: Peers | None) -> None:
        self.arena = arena
        self.peers = peers
        self.directory = arena.directory
        self._forwarded = arena.metrics.forwarded

    @property
    def clustered(self) -> bool:
        return self.peers is not None

    def count(self, kind: str) -> None:
        """One more thing forwarded: frames, queries, subscriptions, admin."""
        self._forwarded.labels(kind).inc()

    def submit(self, board: str, events: Sequence[Event], received_at: int, source: str) -> asyncio.Task[list[Result]]:
        """One frame's events of ``board``, just read, answered by whichever node serves it
        (this one too, if it takes the board meanwhile). The task never fails: what cannot be
        delivered in time is answered `unavailable`."""
        return asyncio.create_task(self._submit(board, events, received_at, source, time.monotonic()))

    async def _submit(self, board: str, events: Sequence[Event], received_at: int, source: str,
                      read_at: float) -> list[Result]:
        """`submit`'s work. ``read_at``: the monotonic time the frame was read. Events that the
        serving node answered `unavailable` because it lost the board meanwhile go on to the
        next owner; the others keep their answers (an event accepted stays accepted)."""
        results: list[Result] = list(unavailable_results(events))
        todo = list(range(len(events)))  # the events still to deliver
        directory = self.directory
        deadline = read_at + OWNERLESS_WAIT_SECONDS
        failed: str | None = None  # a node that just could not answer
        while True:
            place = where(self.arena, board)
            batch = [events[i] for i in todo]
            answered: list[Result] | None = None
            lost = False  # the serving node lost the board while they waited
            if isinstance(place, Local) and place.handle is not None:
                answered = await place.handle.submit(batch, received_at, source)
                lost = moved(self.arena, board, answered)
            elif isinstance(place, Remote) and place.owner.node_id != failed:
                try:
                    answered, lost = await self._deliver(self.peer(place.owner), board, batch, received_at, source)
                except NotHere:
                    failed = place.owner.node_id
                except PeerGone as exc:
                    failed = place.owner.node_id
                    if exc.in_flight:  # the owner died with them: the next one gets the whole wait
                        log.info("resending %d events of %r: %s", len(batch), board, exc)
                        deadline = max(deadline, time.monotonic() + OWNERLESS_WAIT_SECONDS)
            if answered is not None:
                for i, result in zip(todo, answered, strict=True):
                    results[i] = result
                if lost:
                    todo = [i for i in todo if results[i].reason is Reason.UNAVAILABLE]
                if not lost or not todo:
                    return results
                failed = place.owner.node_id if isinstance(place, Remote) else directory.node_id
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                self.arena.metrics.count_results(board, [results[i] for i in todo])  # no owner decided them
                return results
            if failed is None:
                await directory.owner_within(board, left)
            else:  # another owner, or after a short wait the same one again
                await directory.owner_within(board, min(left, RETRY_SECONDS), not_node=failed)
                failed = None

    async def _deliver(self, peer: Peer, board: str, batch: Sequence[Event], received_at: int,
                       source: str) -> tuple[list[Result], bool]:
        """A submit to ``peer``: its results, and whether the peer lost the board meanwhile. A
        batch too large for one peer message goes in halves, one after the other (in order: a
        key sent twice in one frame is accepted once, then duplicate). Raises NotHere, PeerGone."""
        try:
            answer = await peer.request(Submit(board, source, received_at, tuple(batch)))
        except TooLarge:
            if len(batch) < 2:  # an event is at most a few KiB: a frame's limit is far above
                raise
            half = len(batch) // 2
            first, moved = await self._deliver(peer, board, batch[:half], received_at, source)
            second, moved_after = await self._deliver(peer, board, batch[half:], received_at, source)
            return first + second, moved or moved_after
        if not isinstance(answer, Submitted):
            raise refused(answer)
        return list(answer.results), answer.moved

    async def ask(self, request: Ask | Http) -> Answer | None:
        """A query's answer from its board's owner; None when the board turned out to be served
        here (a query op's board answers then: `answering`; an HTTP request's route waits for
        its own). Raises QueryError unavailable while it is ownerless or its owner cannot be
        reached, not_ready for a query op whose board is served here and still not loaded."""
        board = request.board
        deadline = time.monotonic() + QUERY_SECONDS
        failed: str | None = None
        for _ in range(QUERY_TRIES):
            if failed is not None:
                await self.directory.owner_within(board, min(RETRY_SECONDS, deadline - time.monotonic()), not_node=failed)
            place = await (answering if isinstance(request, Ask) else settled)(self.arena, board, deadline - time.monotonic())
            if isinstance(place, Local):
                return None
            if isinstance(place, Ownerless) or place.owner.node_id == failed:
                break
            try:
                return await self._answer(place.owner, request, deadline)
            except TooLarge as exc:
                raise invalid_request(f"the request is too large to forward to the board's owner: {exc}") from exc
            except NotHere:
                failed = place.owner.node_id
            except PeerGone as exc:
                log.debug("query of %r not forwarded: %s", board, exc)  # the peer logs each failed connection (its backoff bounds them)
                break
            except TimeoutError:
                log.debug("query of %r: owner %s did not answer within %gs", board, place.owner.node_id, QUERY_SECONDS)
                break
        raise Ownerless(board).error

    async def _answer(self, owner: Owner, request: Ask | Http, deadline: float) -> Answer:
        """``owner``'s answer to ``request``. Raises NotHere when the directory names another
        owner of the board first (the query goes there: the old owner may never answer),
        TimeoutError at ``deadline`` (monotonic), and what `Peer.request` raises."""
        left = deadline - time.monotonic()
        asking = asyncio.ensure_future(self.peer(owner).request(request))
        moving = asyncio.ensure_future(self.directory.owner_within(request.board, left, not_node=owner.node_id))
        try:
            await asyncio.wait((asking, moving), timeout=left, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (asking, moving):
                task.cancel()
            await asyncio.gather(asking, moving, return_exceptions=True)
        if asking.done() and not asking.cancelled():
            return asking.result()
        if moving.done() and not moving.cancelled() and moving.result() is not None:
            raise NotHere(f"board {request.board!r} moved from {owner.node_id} while a query waited")
        raise TimeoutError

    async def error(self, request: Ask | Http) -> QueryError | None:
        """The error the board's owner answers a query with; None when it answers, when no owner
        can be reached, or when the board is served here now. What a live view of a board served
        elsewhere asks first: a view the query refuses is refused."""
        try:
            answer = await self.ask(request)
        except QueryError:
            return None
        if isinstance(answer, HttpAnswer):
            if answer.status < 400:
                return None
            error = orjson.loads(answer.body)["error"]
            return QueryError(error["code"], error["message"], answer.status)
        return refused(answer) if isinstance(answer, Refused) else None

    async def boards(self, listed: Body, page: str) -> Body:
        """`GET /v1/boards` in a cluster: ``listed`` (this node's answer to the query string
        ``page``) with each of its boards served elsewhere as its owner lists it; the owners of
        those boards are asked for the same page (every node lists the boards in the same order),
        one request per owner node, at once. A board whose owner cannot be asked stays as listed
        here (its state, no tables)."""
        by_owner: dict[str, list[str]] = {}
        for entry in listed["boards"]:
            place = where(self.arena, entry["board"])
            if isinstance(place, Remote):
                by_owner.setdefault(place.owner.node_id, []).append(entry["board"])
        if not by_owner:
            return listed
        answers = await asyncio.gather(*(self.ask(Http(names[0], "GET", "/v1/boards", page, (), b""))
                                         for names in by_owner.values()), return_exceptions=True)
        entries = {entry["board"]: entry for entry in listed["boards"]}
        for names, answer in zip(by_owner.values(), answers, strict=True):
            if isinstance(answer, HttpAnswer) and answer.status == 200:
                theirs = {entry["board"]: entry for entry in orjson.loads(answer.body)["boards"]}
                entries.update((name, theirs[name]) for name in names if name in theirs)
        return {**listed, "boards": [entries[entry["board"]] for entry in listed["boards"]]}

    async def ask_node(self, node_id: str, url: str, path: str, query: str) -> HttpAnswer:
        """Node ``node_id``'s own answer to a route about itself (a board-less `Http`). Raises
        PeerGone, NotHere, TooLarge; the caller bounds the wait."""
        assert self.peers is not None  # only a cluster has other nodes
        answer = await self.peers.peer(node_id, url).request(Http("", "GET", path, query, (), b""))
        if not isinstance(answer, HttpAnswer):
            raise refused(answer)
        return answer

    async def close(self) -> None:
        """Close the connections to other nodes."""
        if self.peers is not None:
            await self.peers.close()

    def peer(self, owner: Owner) -> Peer:
        assert self.peers is not None  # only a cluster has boards served elsewhere
        return self.peers.peer(owner.node_id, owner.url)

"""Connections to the other nodes of a cluster: one multiplexed WebSocket per peer node.

A request is a JSON object with an ``id`` unique on its connection; the peer answers each with
the same ``id``, in any order, so that many requests share one connection at once. Requests:

- ``{"op":"submit","board","source","received_at","events":[[member,value,occurred_at,key,meta],…]}``
  → ``{"results":[[key,status,reason|null],…]}``: one frame's events of one board, after their
  COMMIT on the owner; with ``"moved":true`` when the owner lost the board meanwhile: its events
  answered ``unavailable`` go on to the next owner.
- ``{"op":"ask","board","frame":{…}}`` → ``{"body":{…}}`` or ``{"error":{"code","message","status"}}``:
  a WebSocket query op, answered as the owner's own connection would.
- ``{"op":"http","board","method","path","query","headers":[[name,value],…],"body"}`` →
  ``{"status","headers":[[name,value],…],"body"}``: an HTTP route (queries, admin).

- ``{"op":"watch","board","view":{…}}`` → ``{"watching":true}``, then a stream of
  ``{"watch":ID,"seq","body":{…}}`` (the view's answers, as a subscription on the owner gets
  them) and perhaps ``{"watch":ID,"ended":CODE,"message"}``, where ID is the watch request's id;
  ``{"op":"unwatch","watch":ID}`` (no answer) ends it. A node subscribes to each distinct view
  of a board served elsewhere once, whatever its own subscribers.

An answer ``{"not_here":true}`` says the peer does not serve the board (any more): the forwarder
asks the directory again and re-routes; the client never sees it. A connection that drops fails
its requests in flight with `PeerGone` (a submit may or may not have committed: resending it is
safe, its committed events answer ``duplicate``). Connecting again waits out a backoff.

Peers authenticate with the cluster secret as a bearer token on the handshake (`/v1/peer`).
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from arena.backoff import Backoff
from arena.engine.events import Event, Reason, Result, Status

log = logging.getLogger("arena.cluster")

PATH = "/v1/peer"
CONNECT_SECONDS = 2.0
PING_SECONDS = 1.0
"""A peer that stops answering pings (a SIGSTOPped node, a cut link) is given up after
`PING_SECONDS` + the lease: by then another node may own its boards."""


class PeerGone(Exception):
    """The peer cannot be reached, or (``in_flight``) its connection dropped while the request
    was in flight: it may have been served."""

    def __init__(self, message: str, in_flight: bool = False) -> None:
        super().__init__(message)
        self.in_flight = in_flight


class NotHere(Exception):
    """The peer does not serve the request's board (any more)."""


class TooLarge(Exception):
    """The request is larger than a peer takes in one message (its ``max_frame_bytes``); nothing
    was sent."""


def secret_matches(secret: str, authorization: str | None) -> bool:
    """Whether a handshake's ``Authorization`` header carries the cluster secret; constant time
    in the secret's content. An empty secret (no ``[cluster]``) matches nothing."""
    if not secret or authorization is None:
        return False
    return hmac.compare_digest(authorization.encode(), f"Bearer {secret}".encode())


def dumps(message: dict[str, Any]) -> bytes:
    """A peer message as JSON text (UTF-8): orjson, or json for what orjson refuses (integers
    beyond 64 bits, which an event's value or a query field may be)."""
    try:
        return orjson.dumps(message)
    except TypeError:
        return json.dumps(message, separators=(",", ":"), allow_nan=False).encode()


_LONG_NUMBER = re.compile(rb"\d{19}")


def loads(data: str | bytes) -> Any:
    """A peer message. orjson reads an integer literal beyond 64 bits as a float: a message with
    a 19-digit run (rare) is read by json, exactly."""
    if _LONG_NUMBER.search(data if isinstance(data, bytes) else data.encode()):
        return json.loads(data)
    return orjson.loads(data)


def body_fields(body: bytes) -> dict[str, Any]:
    """An HTTP body in a peer message: as text when it is UTF-8 (JSON bodies are), else byte
    for byte as latin-1 (flagged). `body_of` reads it back."""
    try:
        return {"body": body.decode()}
    except UnicodeDecodeError:
        return {"body": body.decode("latin-1"), "latin1": True}


def body_of(message: dict[str, Any]) -> bytes:
    text: str = message["body"]
    return text.encode("latin-1") if message.get("latin1") else text.encode()


def event_fields(event: Event) -> list[Any]:
    return [event.member, event.value, event.occurred_at, event.idempotency_key, event.meta]


def event_of(board: str, fields: Sequence[Any]) -> Event:
    member, value, occurred_at, key, meta = fields
    return Event(board, member, value, occurred_at, key, meta)


def result_fields(result: Result) -> list[Any]:
    return [result.idempotency_key, result.status.value, result.reason.value if result.reason else None]


def result_of(fields: Sequence[Any]) -> Result:
    key, status, reason = fields
    return Result(key, Status(status), Reason(reason) if reason is not None else None)


Deliver = Callable[[dict[str, Any] | None], None]
"""Called with each message of a watch, then with None once its connection is gone."""


class _Link:
    """One open connection, the requests waiting on it and the watches streaming on it."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.watches: dict[int, Deliver] = {}
        self.reader: asyncio.Task[None] | None = None

    async def read(self, peer: str) -> None:
        try:
            async for text in self.socket:
                answer = loads(text)
                watch = answer.get("watch")
                if watch is not None:
                    deliver = self.watches.get(watch)
                    if deliver is not None:
                        deliver(answer)
                    continue
                future = self.pending.pop(answer.get("id"), None)
                if future is not None and not future.done():
                    future.set_result(answer)
        except ConnectionClosed:
            pass
        except Exception:  # a peer speaking nonsense: drop the link, its requests fail
            log.exception("peer %s sent an answer that cannot be read; dropping the connection", peer)
            await self.socket.close()
        finally:
            self.fail(PeerGone(f"the connection to peer {peer} dropped", in_flight=True))

    def fail(self, error: PeerGone) -> None:
        pending, self.pending = self.pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)
        watches, self.watches = self.watches, {}
        for deliver in watches.values():
            deliver(None)

    @property
    def open(self) -> bool:
        return self.reader is not None and not self.reader.done()


class Peer:
    """One peer node, reached at ``url``, over one connection opened on first use."""

    def __init__(self, node_id: str, url: str, secret: str, ping_timeout: float, limit: int) -> None:
        self.node_id = node_id
        self.limit = limit
        self.url = url
        self._ws_url = re.sub(r"^http", "ws", url) + PATH
        self._secret = secret
        self._ping_timeout = ping_timeout
        self._ids = itertools.count(1)
        self._link: _Link | None = None
        self._connecting = asyncio.Lock()
        self._backoff = Backoff(0.05, 1.0)
        self._retry_at = 0.0

    async def request(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send a request and wait for its answer. Raises PeerGone (not connected, or the
        connection dropped before the answer), NotHere, TooLarge."""
        link = await self._connected()
        return await self._ask(link, next(self._ids), message)

    async def watch(self, message: dict[str, Any], deliver: Deliver) -> int:
        """Start a watch (``message``: its request); ``deliver`` gets its stream. Returns its id,
        for `unwatch`. Raises PeerGone, NotHere, TooLarge."""
        link = await self._connected()
        watch = next(self._ids)
        link.watches[watch] = deliver
        try:
            await self._ask(link, watch, message)
        except BaseException:
            link.watches.pop(watch, None)
            raise
        return watch

    async def unwatch(self, watch: int) -> None:
        """End a watch (nothing more is delivered); nothing to do once its connection is gone."""
        link = self._link
        if link is not None and link.watches.pop(watch, None) is not None:
            try:
                await link.socket.send(dumps({"op": "unwatch", "watch": watch}), text=True)
            except ConnectionClosed:
                pass

    async def _ask(self, link: _Link, request_id: int, message: dict[str, Any]) -> dict[str, Any]:
        data = dumps({**message, "id": request_id})
        if len(data) > self.limit:  # the peer would close the connection (1009), failing every request on it
            raise TooLarge(f"a request of {len(data)} bytes is over the {self.limit} a peer takes")
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        link.pending[request_id] = future
        try:
            await link.socket.send(data, text=True)
        except ConnectionClosed as exc:
            link.pending.pop(request_id, None)
            raise PeerGone(f"the connection to peer {self.node_id} dropped") from exc
        try:
            answer = await future
        finally:
            link.pending.pop(request_id, None)
        if answer.get("not_here"):
            raise NotHere(f"peer {self.node_id} does not serve {message.get('board')!r}")
        return answer

    async def _connected(self) -> _Link:
        link = self._link
        if link is not None and link.open:
            return link
        async with self._connecting:
            link = self._link
            if link is not None and link.open:
                return link
            if time.monotonic() < self._retry_at:
                raise PeerGone(f"peer {self.node_id} at {self.url} was unreachable moments ago")
            try:
                socket = await connect(
                    self._ws_url, additional_headers={"Authorization": f"Bearer {self._secret}"},
                    open_timeout=CONNECT_SECONDS, ping_interval=PING_SECONDS, ping_timeout=self._ping_timeout,
                    max_size=None, compression=None,
                )
            except (OSError, InvalidHandshake, TimeoutError) as exc:
                self._retry_at = time.monotonic() + self._backoff.next()
                if isinstance(exc, InvalidStatus) and exc.response.status_code == 401:
                    log.error("peer %s at %s refused this node's cluster secret: is $ARENA_CLUSTER_SECRET the same on"
                              " every node?", self.node_id, self.url)
                else:
                    log.info("peer %s at %s cannot be reached: %s", self.node_id, self.url, exc)
                raise PeerGone(f"peer {self.node_id} at {self.url} cannot be reached") from exc
            self._backoff.reset()
            link = self._link = _Link(socket)
            link.reader = asyncio.create_task(link.read(self.node_id), name=f"peer {self.node_id}")
            log.info("connected to peer %s at %s", self.node_id, self.url)
            return link

    async def close(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            await link.socket.close()
            if link.reader is not None:
                await asyncio.gather(link.reader, return_exceptions=True)


class Peers:
    """The pool: one `Peer` per other node, made on first use. ``ping_timeout``: seconds an
    unanswered ping waits before the connection is given up (the lease's length); ``limit``: the
    largest request a peer takes (`max_frame_bytes`, the same on every node)."""

    def __init__(self, secret: str, ping_timeout: float, limit: int) -> None:
        self._secret = secret
        self._ping_timeout = ping_timeout
        self._limit = limit
        self._peers: dict[str, Peer] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def peer(self, node_id: str, url: str) -> Peer:
        peer = self._peers.get(node_id)
        if peer is None or peer.url != url:  # a node restarted elsewhere
            if peer is not None:
                closing = asyncio.get_running_loop().create_task(peer.close())
                self._closing.add(closing)
                closing.add_done_callback(self._closing.discard)
            peer = self._peers[node_id] = Peer(node_id, url, self._secret, self._ping_timeout, self._limit)
        return peer

    async def close(self) -> None:
        peers, self._peers = list(self._peers.values()), {}
        await asyncio.gather(*(p.close() for p in peers), return_exceptions=True)

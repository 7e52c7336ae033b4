"""The client side of the peer protocol (`arena.cluster.peer.protocol`): one multiplexed
WebSocket per peer node, opened on first use.

Many requests share one connection at once, each answered by its id. A connection that drops
fails its requests in flight with `PeerGone` (a submit may or may not have committed: resending
it is safe, its committed events answer ``duplicate``). Connecting again waits out a backoff.
An `Elsewhere` answer is raised as `NotHere`: the forwarder asks again where the board is.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import time
from collections.abc import Callable

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.protocol import State

from arena.cluster.peer.protocol import (
    PATH,
    Answer,
    Elsewhere,
    Ended,
    Numbered,
    Reply,
    Request,
    Unwatch,
    Update,
    Watch,
    authorization,
    parse_answer,
    serialise,
)
from arena_client.backoff import Backoff

log = logging.getLogger("arena.cluster")

CONNECT_SECONDS = 2.0
CLOSE_SECONDS = 1.0
"""A connection given up (its pings unanswered: a cut link) is dropped after this long, not after
the websockets default of 10 s: until then no new connection is made to the peer."""
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


Deliver = Callable[[Update | Ended | None], None]
"""Called with each message of a watch, then with None once its connection is gone."""


class _Link:
    """One open connection, the requests waiting on it and the watches streaming on it."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self.pending: dict[int, asyncio.Future[Answer]] = {}
        self.watches: dict[int, Deliver] = {}
        self.reader: asyncio.Task[None] | None = None

    async def read(self, peer: str) -> None:
        try:
            async for text in self.socket:
                message = parse_answer(text)
                if isinstance(message, Reply):
                    future = self.pending.pop(message.id, None)
                    if future is not None and not future.done():
                        future.set_result(message.answer)
                    continue
                deliver = self.watches.get(message.watch)
                if deliver is not None:
                    deliver(message)
        except ConnectionClosed:
            pass
        except Exception:  # a peer speaking nonsense (ProtocolError): drop the link, its requests fail
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
        """Open and not closing: a link whose keepalive gave up is not used while it closes."""
        return self.reader is not None and not self.reader.done() and self.socket.state is State.OPEN


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

    async def request(self, request: Request) -> Answer:
        """Send a request and wait for its answer (never `Elsewhere`). Raises PeerGone (not
        connected, or the connection dropped before the answer), NotHere, TooLarge."""
        link = await self._connected()
        return await self._ask(link, next(self._ids), request)

    async def watch(self, request: Watch, deliver: Deliver) -> int:
        """Start a watch; ``deliver`` gets its stream. Returns its id, for `unwatch`. Raises
        PeerGone, NotHere, TooLarge."""
        link = await self._connected()
        watch = next(self._ids)
        link.watches[watch] = deliver
        try:
            await self._ask(link, watch, request)
        except BaseException:
            link.watches.pop(watch, None)
            raise
        return watch

    async def unwatch(self, watch: int) -> None:
        """End a watch (nothing more is delivered); nothing to do once its connection is gone."""
        link = self._link
        if link is not None and link.watches.pop(watch, None) is not None:
            try:
                await link.socket.send(serialise(Unwatch(watch)), text=True)
            except ConnectionClosed:
                pass

    async def _ask(self, link: _Link, request_id: int, request: Request) -> Answer:
        data = serialise(Numbered(request_id, request))
        if len(data) > self.limit:  # the peer would close the connection (1009), failing every request on it
            raise TooLarge(f"a request of {len(data)} bytes is over the {self.limit} a peer takes")
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
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
        if isinstance(answer, Elsewhere):
            raise NotHere(f"peer {self.node_id} does not serve {request.board!r}")
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
                    self._ws_url, additional_headers={"Authorization": authorization(self._secret)},
                    open_timeout=CONNECT_SECONDS, close_timeout=CLOSE_SECONDS, ping_interval=PING_SECONDS,
                    ping_timeout=self._ping_timeout,
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

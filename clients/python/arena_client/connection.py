"""`ArenaClient`: one connection to the server and the state machine around it: a queue per board
that batches its events into frames, the frames in flight, resends after a drop or an
`unavailable` answer, live views, and reconnects (the package docstring says what the caller sees)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict, TypeVar
from urllib.parse import urlsplit, urlunsplit

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from arena_client.backoff import Backoff
from arena_client.errors import (
    ArenaClientError,
    AuthenticationError,
    ClientClosed,
    ConnectionFailed,
    FrameTooLarge,
    QueryFailed,
)
from arena_client.feed import SettlementFeed
from arena_client.models import (
    ClientStats,
    EventFields,
    Json,
    Members,
    OccurredAt,
    Percentile,
    ScoreAtPercentile,
    ScoreEvent,
    Standing,
    SubmitResult,
    SubmitStatus,
    Table,
    new_idempotency_key,
    to_ms,
)
from arena_client.views import (
    AroundView,
    MembersView,
    PercentileView,
    RankQuery,
    RankView,
    ScoreAtPercentileView,
    TopView,
    View,
)

log = logging.getLogger("arena.client")

T = TypeVar("T")

MAX_ANSWER_BYTES = 16 * 1_048_576  # a top(limit=1000) of long member names is well under this
STABLE_SECONDS = 5.0  # a connection that lasted this long resets the reconnect backoff
_FRAME_OVERHEAD = 64  # bytes of a submit frame around its events: {"op":"submit","id":N,"events":[...]}


def ws_url(url: str, live: bool = False) -> str:
    """``http://host:port`` (or ``ws://``) to the ingest endpoint ``ws://host:port/v1/ws``, or
    with ``live`` to the public read-only ``/v1/live``; a URL with a path is kept as it is."""
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    if scheme not in ("ws", "wss"):
        raise ValueError(f"not an http(s) or ws(s) URL: {url!r}")
    path = parts.path if parts.path not in ("", "/") else "/v1/live" if live else "/v1/ws"
    return urlunsplit((scheme, parts.netloc, path, parts.query, ""))


@dataclass(slots=True, eq=False)
class _Pending:
    """An event on its way: serialised once, so every resend is byte-identical."""

    board: str
    key: str
    data: bytes
    future: asyncio.Future[SubmitResult]
    unavailable_since: float | None = None
    unavailable_answers: int = 0


@dataclass(slots=True, eq=False)
class _Batch:
    """One board's events waiting for a frame, and its frames in flight. Boards never share a
    frame: the server acks a frame when its last event is durable, so a board whose owner is away
    holds up only its own acks."""

    pending: deque[_Pending]
    since: float = 0.0  # loop time the oldest waiting event was queued (-inf: send at once)
    in_flight: int = 0  # frames sent and not answered


@dataclass(slots=True, eq=False)
class _Live:
    """A view the client follows: its fields, its id on the current connection, its newest answer."""

    view: dict[str, object]
    changed: asyncio.Event
    sub: str | None = None
    latest: dict[str, Any] | None = None
    error: QueryFailed | None = None


@dataclass(slots=True, eq=False)
class _Query:
    frame: dict[str, Any]
    future: asyncio.Future[dict[str, Any]]
    not_ready_since: float | None = None
    not_ready_answers: int = 0
    live: _Live | None = None  # a subscribe: registered as soon as its answer is read


@dataclass(slots=True)
class _Counters:
    frames_sent: int = 0
    events_sent: int = 0
    events_resent: int = 0
    queries_sent: int = 0
    connections: int = 0
    peak_in_flight: int = 0


class ClientOptions(TypedDict, total=False):
    """`ArenaClient`'s keyword options, for `connect_sync` and `ArenaClientSync` (one name and
    type each; the defaults and meanings are `ArenaClient`'s)."""

    linger: float
    max_batch: int
    max_frame_bytes: int
    max_in_flight: int
    reconnect_base: float
    reconnect_max: float
    give_up_after: float | None
    retry_unavailable_for: float
    open_timeout: float


class ArenaClient:
    """One game server's connection to Arena (the `arena_client` docstring tells how it batches
    and retries; `ArenaClientError` draws the errors). Use it as
    ``async with ArenaClient(url, token) as client:``, or call `connect` and `close` yourself. Not
    thread-safe: use it from one event loop (or use `ArenaClientSync`).

    ``url`` is the server's base URL (``http://host:port``) or its WebSocket URL
    (``ws://host:port/v1/ws``), or a list of them: the nodes of a cluster. The client uses one
    at a time and moves on to the next when its node cannot be reached or goes away (a resend
    through another node is safe: the same keys). ``token`` is a game server's token; without
    one the client reads the public ``/v1/live`` (queries and live views; `submit` needs a
    token). Options:

    - ``linger`` (s, default 0.002): how long a submitted event may wait for others of its board
      to share its frame.
    - ``max_batch`` (default 500) and ``max_frame_bytes`` (default 1 MiB, the server's default limit):
      the most events and bytes in one frame. If the server answers batch_too_large the client
      halves ``max_batch`` and resends.
    - ``max_in_flight`` (default 16): frames of one board sent and not yet answered (and as many
      queries).
    - ``reconnect_base`` / ``reconnect_max`` (s, 0.05 / 2.0): the backoff between connection attempts.
    - ``give_up_after`` (s, default 30; None = never): after this long without a connection every
      waiting call fails with `ConnectionFailed`; the client keeps trying when new calls arrive.
    - ``retry_unavailable_for`` (s, default 30): how long an event answered ``unavailable``, or a
      query answered ``not_ready``, is retried.
    - ``open_timeout`` (s, default 10): one handshake's timeout.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        token: str | None = None,
        *,
        linger: float = 0.002,
        max_batch: int = 500,
        max_frame_bytes: int = 1_048_576,
        max_in_flight: int = 16,
        reconnect_base: float = 0.05,
        reconnect_max: float = 2.0,
        give_up_after: float | None = 30.0,
        retry_unavailable_for: float = 30.0,
        open_timeout: float = 10.0,
    ) -> None:
        if max_batch < 1 or max_in_flight < 1 or max_frame_bytes < 1024:
            raise ValueError("max_batch and max_in_flight must be >= 1, max_frame_bytes >= 1024")
        live = token is None
        self.urls = [ws_url(url, live)] if isinstance(url, str) else [ws_url(u, live) for u in url]
        if not self.urls:
            raise ValueError("give at least one URL")
        self._node = 0
        self._token = token
        self.linger = linger
        self.max_batch = max_batch
        self.max_frame_bytes = max_frame_bytes
        self.max_in_flight = max_in_flight
        self.give_up_after = give_up_after
        self.retry_unavailable_for = retry_unavailable_for
        self.open_timeout = open_timeout
        self._reconnect = Backoff(reconnect_base, reconnect_max)
        self._retry = Backoff(reconnect_base, reconnect_max)
        self._ids = itertools.count(1)
        self._batches: dict[str, _Batch] = {}  # board -> its events waiting and in flight
        self._queries: deque[_Query] = deque()
        self._queries_in_flight = 0
        self._in_flight: dict[int, list[_Pending] | _Query] = {}
        self._delayed: set[_Pending | _Query] = set()  # waiting out an `unavailable` / `not_ready` backoff
        self._waiters: set[asyncio.Future[Any]] = set()
        self._wakeup: asyncio.Event | None = None
        self._runner: asyncio.Task[None] | None = None
        self._first: asyncio.Future[None] | None = None
        self._ws: ClientConnection | None = None
        self._fatal: ArenaClientError | None = None
        self._flushing = False
        self._closing = False
        self._counters = _Counters()
        self._lives: set[_Live] = set()
        self._by_sub: dict[str, _Live] = {}  # the current connection's subscription ids

    @property
    def url(self) -> str:
        """The WebSocket URL of the node in use (or tried next)."""
        return self.urls[self._node]

    def _next_node(self) -> None:
        self._node = (self._node + 1) % len(self.urls)

    # -- life ---------------------------------------------------------------------------------

    async def __aenter__(self) -> ArenaClient:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> ArenaClient:
        """Open the connection; returns self. Raises `AuthenticationError` (token refused) or
        `ConnectionFailed` (nothing answered for ``give_up_after`` seconds)."""
        if self._runner is not None:
            raise ClientClosed("connect() was already called")
        loop = asyncio.get_running_loop()
        self._wakeup = asyncio.Event()
        self._first = loop.create_future()
        self._runner = asyncio.create_task(self._run(), name="arena-client")
        try:
            await asyncio.shield(self._first)
        except BaseException:
            await self._stop_runner()
            raise
        return self

    async def close(self, timeout: float | None = None) -> None:
        """Flush (wait until every submitted event and query is answered, at most ``timeout``
        seconds), then close the connection. Calls still waiting after that fail with
        `ClientClosed`. Safe to call twice."""
        if self._runner is None or self._closing:
            return
        self._flushing = True
        self._wake()
        await self._flush(timeout)
        await self._stop_runner()
        self._fail_all(self._fatal or ClientClosed("the client was closed"))

    async def _flush(self, timeout: float | None) -> None:
        assert self._runner is not None
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        while self._waiters and not self._runner.done():
            left = None if deadline is None else deadline - asyncio.get_running_loop().time()
            if left is not None and left <= 0:
                return
            await asyncio.wait([*self._waiters, self._runner], timeout=left, return_when=asyncio.FIRST_COMPLETED)

    async def _stop_runner(self) -> None:
        self._closing = True
        self._wake()
        runner = self._runner
        if runner is not None:
            if not runner.done():
                runner.cancel()
            await asyncio.wait([runner])

    @property
    def connected(self) -> bool:
        """True while a connection is open (events flow)."""
        return self._ws is not None

    @property
    def stats(self) -> ClientStats:
        c = self._counters
        return ClientStats(c.frames_sent, c.events_sent, c.events_resent, c.queries_sent, c.connections, c.peak_in_flight)

    # -- submitting -----------------------------------------------------------------------------

    async def submit(
        self,
        board: str,
        member: str,
        value: int,
        *,
        occurred_at: OccurredAt | None = None,
        idempotency_key: str | None = None,
        meta: Mapping[str, Json] | None = None,
        region: str | None = None,
    ) -> SubmitResult:
        """Submit one event and wait until it is journaled. Concurrent calls for one board share
        frames.

        Returns the result (``accepted``, or ``duplicate`` when this key was journaled before).
        Raises `EventRejected` (reason, key), `ConnectionFailed`, `AuthenticationError`,
        `ClientClosed`; TypeError/ValueError at once for a value that cannot be sent (a naive
        datetime, an object orjson cannot serialise) or without a token."""
        [future] = self._enqueue([ScoreEvent(board, member, value, occurred_at, idempotency_key, meta, region)])
        result = await future
        return result.raise_for_status()

    async def submit_many(self, events: Iterable[ScoreEvent | EventFields]) -> list[SubmitResult]:
        """Submit events (in order; ``max_batch`` per frame) and wait for all their results.

        Rejected events do not raise: look at each `SubmitResult` (or call its
        `SubmitResult.raise_for_status`). Raises `ConnectionFailed`, `AuthenticationError`,
        `ClientClosed`; TypeError/ValueError at once for an event that cannot be sent. A mapping
        takes the `ScoreEvent` field names."""
        futures = self._enqueue([e if isinstance(e, ScoreEvent) else ScoreEvent(**e) for e in events])
        return list(await asyncio.gather(*futures))

    def _enqueue(self, events: list[ScoreEvent]) -> list[asyncio.Future[SubmitResult]]:
        """Serialise every event first (so a bad one queues none), then queue each on its board."""
        self._check_open()
        if self._token is None:
            raise ValueError("submit needs a game server's token: ArenaClient(url, token)")
        prepared = [self._serialise(e) for e in events]
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[SubmitResult]] = []
        for board, key, data in prepared:
            future: asyncio.Future[SubmitResult] = loop.create_future()
            self._track(future)
            batch = self._batch(board)
            if not batch.pending:
                batch.since = loop.time()
            batch.pending.append(_Pending(board, key, data, future))
            futures.append(future)
            if len(batch.pending) == 1 or len(batch.pending) >= self.max_batch:
                self._wake()  # the first event starts the writer's linger timer; a full batch ends it
        return futures

    def _serialise(self, event: ScoreEvent) -> tuple[str, str, bytes]:
        key = event.idempotency_key if event.idempotency_key is not None else new_idempotency_key()
        occurred_at = event.occurred_at
        if occurred_at is None:
            occurred_at = time.time_ns() // 1_000_000
        elif isinstance(occurred_at, datetime):
            occurred_at = to_ms(occurred_at)
        wire: dict[str, object] = {
            "board": event.board,
            "member": event.member,
            "value": event.value,
            "occurred_at": occurred_at,
            "idempotency_key": key,
        }
        if event.meta is not None:
            wire["meta"] = event.meta
        if event.region is not None:
            wire["region"] = event.region
        data = orjson.dumps(wire)
        if len(data) + _FRAME_OVERHEAD > self.max_frame_bytes:
            raise ValueError(f"event {key!r} is larger than one frame ({len(data)} bytes)")
        return event.board, key, data

    # -- queries ----------------------------------------------------------------------------------

    async def top(self, board: str, period: str, *, limit: int = 10, offset: int = 0, period_id: str | None = None,
        partition: str | None = None) -> Table:
        """Ranks offset+1 .. offset+limit (limit 1..1000). Raises `QueryFailed` (unknown_board,
        unknown_period, period_not_retained, invalid_request, not_ready...)."""
        return await self._ask(TopView(board, period, limit, offset, period_id, partition))

    async def rank(self, board: str, period: str, member: str, *, period_id: str | None = None,
        partition: str | None = None) -> Standing:
        """A member's rank, score and reached_at; ``entry`` is None while the member is not in
        the table (as in a live view). Raises `QueryFailed` (unknown_board, unknown_period...)."""
        return await self._ask(RankQuery(RankView(board, period, member, period_id, partition)))

    async def around(
        self,
        board: str,
        period: str,
        member: str | None = None,
        *,
        rank: int | None = None,
        radius: int = 5,
        period_id: str | None = None,
        partition: str | None = None,
    ) -> Table:
        """The entries within ``radius`` (0..100) ranks of a member, or of ``rank``; clipped at
        both ends. Give exactly one of member and rank. Raises `QueryFailed` (member_not_found...)."""
        return await self._ask(AroundView(board, period, member, rank, radius, period_id, partition))

    async def percentile(self, board: str, period: str, member: str, *, period_id: str | None = None,
        partition: str | None = None) -> Percentile:
        """A member's entry and top_percent (100 * rank / size). Raises `QueryFailed`
        (member_not_found for a member not in the table, ...)."""
        return await self._ask(PercentileView(board, period, member, period_id, partition))

    async def score_at_percentile(self, board: str, period: str, p: float, *, period_id: str | None = None,
        partition: str | None = None) -> ScoreAtPercentile:
        """The entry at rank ceil(p / 100 * size), 0 < p <= 100 (None on an empty table).
        Raises `QueryFailed` (invalid_request for p out of range, ...)."""
        return await self._ask(ScoreAtPercentileView(board, period, p, period_id, partition))

    async def members(self, board: str, period: str, members: Iterable[str], *, period_id: str | None = None,
        partition: str | None = None) -> Members:
        """Friends' standings: which of ``members`` (1..1000) are in the table, in rank order with
        their global rank, and which are not (`Members.missing`). O(k log n) on the server for k
        members. Raises `QueryFailed` (invalid_request, unknown_board...)."""
        return await self._ask(MembersView(board, period, tuple(members), period_id, partition))

    def settlements(self, after: int | None = None, *, poll_seconds: float = 1.0, limit: int = 100) -> SettlementFeed:
        """The settlement feed after cursor ``after`` (None: from the start): an async iterator
        of `SettlementItem`, each settlement revision of the boards this game server may write
        once, in the server's log order, polling every ``poll_seconds`` when there is none; its
        ``cursor`` is the last item's. Keep ``cursor`` once an item is handled and pass it as
        ``after`` next time. Needs a token; works over HTTP, with or without `connect`.

        ``feed = client.settlements(after=stored)``; ``async for item in feed: ...; stored = feed.cursor``
        """
        return SettlementFeed(self.urls, self._token, after or 0, poll_seconds=poll_seconds, limit=limit,
                              backoff=Backoff(self._reconnect.base, self._reconnect.cap), timeout=self.open_timeout)

    async def _ask(self, view: View[T]) -> T:
        return view.parse(await self._query(view.frame_fields()))

    async def subscribe(self, view: View[T]) -> AsyncGenerator[T, None]:
        """Follow a live view (`TopView`, `RankView`, `AroundView`, `PercentileView`,
        `ScoreAtPercentileView`, `MembersView`): yields the view's whole answer, the dataclass
        its query returns, at once and after each change; a slow consumer skips to the newest. A
        member not in the table is a state (`Standing.entry` None, `around` no entries). After
        a reconnect it subscribes again by itself (the next answer may repeat the last; one
        older than the last, in ``seq``, is never yielded). Stop by leaving the loop. Raises
        `QueryFailed` for a view the server refuses (and when its table leaves retention),
        `ClientClosed`.

        ``async for top in client.subscribe(TopView("high_score", "daily", limit=10)): ...``
        """
        frame = view.frame_fields()
        live = _Live(frame, asyncio.Event())
        self._lives.add(live)
        shown = -1  # the seq of the last answer yielded: across reconnects (other nodes) never go back
        try:
            await self._query({"op": "subscribe", "view": frame}, live)
            while True:
                await live.changed.wait()
                live.changed.clear()
                if live.error is not None:
                    raise live.error
                if live.latest is not None and live.latest["seq"] >= shown:
                    shown = live.latest["seq"]
                    yield view.parse(live.latest)
        finally:
            self._lives.discard(live)
            if live.sub is not None and self._by_sub.pop(live.sub, None) is live and not self._closing:
                self._send_and_forget({"op": "unsubscribe", "sub": live.sub})

    def _send_and_forget(self, frame: dict[str, Any], live: _Live | None = None) -> None:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        future.add_done_callback(lambda f: f.cancelled() or f.exception())  # its failure is nobody's
        self._queries.appendleft(_Query(frame, future, live=live))
        self._wake()

    async def ping(self) -> None:
        """A round trip to the server (waits for a connection). Raises `ConnectionFailed`, `ClientClosed`."""
        await self._query({"op": "ping"})

    async def _query(self, frame: dict[str, Any], live: _Live | None = None) -> dict[str, Any]:
        self._check_open()
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._track(future)
        self._queries.append(_Query(frame, future, live=live))
        self._wake()
        return await future

    # -- internals ----------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        if self._runner is None or self._closing or self._flushing:
            raise ClientClosed("the client is not connected (use `async with ArenaClient(...)`) or is closing")

    def _track(self, future: asyncio.Future[Any]) -> None:
        self._waiters.add(future)
        future.add_done_callback(self._waiters.discard)

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    async def _run(self) -> None:
        assert self._first is not None
        try:
            await self._connection_loop(self._first)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug: fail loudly, never leave a caller waiting
            log.exception("arena client: connection loop failed")
            self._fatal = ClientClosed(f"the client failed: {exc!r}")
            if not self._first.done():
                self._first.set_exception(self._fatal)
            self._fail_all(self._fatal)

    async def _connection_loop(self, first: asyncio.Future[None]) -> None:
        """Connect, serve the connection until it drops, put back what it did not answer,
        reconnect with backoff. Ends on close or on a refused token."""
        loop = asyncio.get_running_loop()
        down_since: float | None = None
        while not self._closing:
            try:
                ws = await connect(
                    self.url,
                    additional_headers={} if self._token is None else {"Authorization": f"Bearer {self._token}"},
                    open_timeout=self.open_timeout,
                    max_size=MAX_ANSWER_BYTES,
                    compression=None,
                    proxy=None,
                )
            except InvalidStatus as exc:
                status = exc.response.status_code
                if status in (401, 403):
                    self._fatal = AuthenticationError(status)
                    log.error("arena client: %s", self._fatal)
                    if not first.done():
                        first.set_exception(self._fatal)
                    self._fail_all(self._fatal)
                    return
                error: Exception = exc
            except (OSError, TimeoutError, InvalidHandshake) as exc:
                error = exc
            else:
                self._ws = ws
                self._counters.connections += 1
                down_since = None
                self._by_sub.clear()  # ids of the last connection
                for live in self._lives:
                    if live.sub is not None:  # followed before the drop: subscribe again
                        live.sub = None
                        self._send_and_forget({"op": "subscribe", "view": live.view}, live)
                opened = loop.time()
                if not first.done():
                    first.set_result(None)
                elif self._counters.connections > 1:
                    log.info("arena client: reconnected to %s", self.url)
                try:
                    await self._session(ws)
                finally:
                    self._ws = None
                    self._requeue_in_flight()
                if self._closing:
                    break
                if ws.close_code == 1009:  # resending the same frames would loop forever
                    self._fatal = FrameTooLarge(self.max_frame_bytes)
                    log.error("arena client: %s", self._fatal)
                    self._fail_all(self._fatal)
                    return
                log.warning("arena client: connection to %s lost (code %s); reconnecting", self.url, ws.close_code)
                self._next_node()
                if loop.time() - opened >= STABLE_SECONDS:
                    self._reconnect.reset()
                # even after a drop: a server that accepts and closes at once must not be hammered
                await asyncio.sleep(self._reconnect.next())
                continue
            now = loop.time()
            down_since = now if down_since is None else down_since
            if self.give_up_after is not None and now - down_since >= self.give_up_after:
                failure = ConnectionFailed(f"could not connect to {self.url} for {now - down_since:.1f}s: {error}")
                if not first.done():
                    first.set_exception(failure)
                    return
                self._fail_all(failure)
                down_since = None
                self._reconnect.reset()
                await self._wait_for_work()
                continue
            wait = self._reconnect.next()
            limit = "" if self.give_up_after is None else f" of {self.give_up_after:g}s"
            log.warning("arena client: connect to %s failed (%s); retrying in %.2fs (down %.1fs%s)",
                        self.url, error, wait, now - down_since, limit)
            self._next_node()
            await asyncio.sleep(wait)

    async def _wait_for_work(self) -> None:
        assert self._wakeup is not None
        while not (any(b.pending for b in self._batches.values()) or self._queries or self._delayed or self._closing):
            self._wakeup.clear()
            await self._wakeup.wait()

    async def _session(self, ws: ClientConnection) -> None:
        reader = asyncio.create_task(self._read(ws))
        writer = asyncio.create_task(self._write(ws))
        try:
            await asyncio.wait([reader, writer], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (reader, writer):
                task.cancel()
            for task in (reader, writer):
                try:
                    await task
                except (asyncio.CancelledError, ConnectionClosed):
                    pass
            await ws.close()

    async def _write(self, ws: ClientConnection) -> None:
        while True:
            text = await self._next_frame()
            await ws.send(text)

    async def _next_frame(self) -> str:
        """The next frame to send: a query, or one board's batch once it is full, has lingered,
        or the client is flushing (the board that waited longest first). Waits for an in-flight
        slot of its kind: a board's frames in flight never keep another board's from going out."""
        wakeup = self._wakeup
        assert wakeup is not None
        loop = asyncio.get_running_loop()
        while True:
            timeout: float | None = None
            if self._queries and self._queries_in_flight < self.max_in_flight:
                return self._query_frame(self._queries.popleft())
            open_batches = [b for b in self._batches.values() if b.pending and b.in_flight < self.max_in_flight]
            if open_batches:
                now = loop.time()
                oldest = min(open_batches, key=lambda b: b.since)
                ready = oldest if self._flushing or now >= oldest.since + self.linger else next(
                    (b for b in open_batches if len(b.pending) >= self.max_batch), None)
                if ready is not None:
                    frame = self._submit_frame(ready)
                    if frame is not None:
                        return frame
                    continue  # every queued event of that board was cancelled by its caller
                timeout = oldest.since + self.linger - now
            wakeup.clear()
            if timeout is None:
                await wakeup.wait()
            else:
                try:
                    async with asyncio.timeout(timeout):
                        await wakeup.wait()
                except TimeoutError:
                    pass

    def _query_frame(self, query: _Query) -> str:
        frame_id = next(self._ids)
        self._in_flight[frame_id] = query
        self._queries_in_flight += 1
        self._counters.queries_sent += 1
        self._counters.peak_in_flight = max(self._counters.peak_in_flight, len(self._in_flight))
        return orjson.dumps({**query.frame, "id": frame_id}).decode()

    def _submit_frame(self, batch: _Batch) -> str | None:
        queue = batch.pending
        items: list[_Pending] = []
        parts: list[bytes] = []
        size = _FRAME_OVERHEAD
        while queue and len(items) < self.max_batch:
            pending = queue[0]
            if pending.future.done():  # the caller gave up (cancelled): nothing to send
                queue.popleft()
                continue
            if items and size + len(pending.data) + 1 > self.max_frame_bytes:
                break
            queue.popleft()
            items.append(pending)
            parts.append(pending.data)
            size += len(pending.data) + 1
        if not items:
            return None
        frame_id = next(self._ids)
        self._in_flight[frame_id] = items
        batch.in_flight += 1
        self._counters.frames_sent += 1
        self._counters.peak_in_flight = max(self._counters.peak_in_flight, len(self._in_flight))
        self._counters.events_sent += len(items)
        return '{"op":"submit","id":%d,"events":[%s]}' % (frame_id, b",".join(parts).decode())

    async def _read(self, ws: ClientConnection) -> None:
        async for message in ws:
            try:
                frame = orjson.loads(message)
            except orjson.JSONDecodeError:
                log.warning("arena client: the server sent a frame that is not JSON")
                continue
            if not isinstance(frame, dict):
                continue
            frame_id = frame.get("id")
            waiting = self._in_flight.pop(frame_id, None) if isinstance(frame_id, int) else None
            if waiting is None:
                if self._live_frame(frame):
                    continue
                if frame.get("op") == "error":
                    log.warning("arena client: server error %s: %s", frame.get("code"), frame.get("message"))
                continue
            self._wake()  # a slot is free
            self._answered(waiting)
            if isinstance(waiting, _Query) and waiting.live is not None and frame.get("op") == "subscribed":
                # now, before the update that follows it is read
                waiting.live.sub = str(frame.get("sub"))
                self._by_sub[waiting.live.sub] = waiting.live
            if isinstance(waiting, _Query):
                if frame.get("op") != "error":
                    _settle(waiting.future, frame)
                elif not (frame.get("code") == "not_ready" and self._retry_not_ready(waiting)):
                    _settle(waiting.future, exception=QueryFailed(str(frame.get("code")), str(frame.get("message"))))
            elif frame.get("op") == "ack":
                self._on_ack(waiting, frame.get("results") or [])
            else:
                self._on_submit_error(waiting, frame)

    def _live_frame(self, frame: dict[str, Any]) -> bool:
        """Take an update (or the error that ends a subscription); False for any other frame."""
        sub = frame.get("sub")
        live = self._by_sub.get(sub) if isinstance(sub, str) else None
        if live is None:
            return frame.get("op") == "update"  # of a subscription left behind: dropped
        if frame.get("op") == "update":
            live.latest = {k: v for k, v in frame.items() if k not in ("op", "sub")}
        elif frame.get("op") == "error":
            live.error = QueryFailed(str(frame.get("code")), str(frame.get("message")))
        else:
            return False
        live.changed.set()
        return True

    def _on_ack(self, items: list[_Pending], results: list[dict[str, Any]]) -> None:
        now = asyncio.get_running_loop().time()
        retry: list[_Pending] = []
        for pending, result in zip(items, results, strict=True):
            status = result.get("status")
            reason = result.get("reason")
            if status == "rejected" and reason == "unavailable" and not pending.future.done():
                if pending.unavailable_since is None:
                    pending.unavailable_since = now
                if now - pending.unavailable_since < self.retry_unavailable_for:
                    retry.append(pending)
                    continue
            _settle(pending.future, SubmitResult(pending.key, SubmitStatus(str(status)), reason, result.get("message")))
        if len(results) < len(items):  # never from a conforming server
            for pending in items[len(results):]:
                _settle(pending.future, exception=QueryFailed("bad_ack", "the ack has fewer results than events"))
        if retry:
            self._delay(retry)

    def _delay(self, items: list[_Pending]) -> None:
        """Resend events answered `unavailable` after a backoff, with the same keys."""
        attempt = max(p.unavailable_answers for p in items)
        for p in items:
            p.unavailable_answers += 1
            self._delayed.add(p)

        def resend() -> None:
            again = [p for p in items if p in self._delayed and not p.future.done()]
            self._delayed.difference_update(items)
            self._requeue(again)

        delay = self._after_backoff(attempt, resend)
        log.info("arena client: %d events answered unavailable; resending in %.2fs", len(items), delay)

    def _retry_not_ready(self, query: _Query) -> bool:
        """Send a query answered `not_ready` again after a backoff, unless it has been answered
        so for ``retry_unavailable_for`` seconds (then False)."""
        now = asyncio.get_running_loop().time()
        if query.not_ready_since is None:
            query.not_ready_since = now
        if now - query.not_ready_since >= self.retry_unavailable_for:
            return False
        self._delayed.add(query)

        def resend() -> None:
            if query in self._delayed:
                self._delayed.discard(query)
                if not query.future.done():
                    self._queries.append(query)
                    self._wake()

        self._after_backoff(query.not_ready_answers, resend)
        query.not_ready_answers += 1
        return True

    def _after_backoff(self, attempt: int, callback: Callable[[], None]) -> float:
        """Call ``callback`` after the retry backoff of ``attempt``; returns the delay."""
        delay = Backoff(self._retry.base, self._retry.cap, attempt, self._retry.rng).next()
        asyncio.get_running_loop().call_later(delay, callback)
        return delay

    def _on_submit_error(self, items: list[_Pending], frame: dict[str, Any]) -> None:
        code = str(frame.get("code"))
        if code == "batch_too_large" and len(items) > 1:
            self.max_batch = max(1, len(items) // 2)
            log.warning("arena client: server refused a batch of %d; max_batch is now %d", len(items), self.max_batch)
            self._requeue(items, resent=False)
            return
        error = QueryFailed(code, str(frame.get("message")))
        for pending in items:
            _settle(pending.future, exception=error)

    def _batch(self, board: str) -> _Batch:
        batch = self._batches.get(board)
        if batch is None:
            batch = self._batches[board] = _Batch(deque())
        return batch

    def _answered(self, frame: list[_Pending] | _Query) -> None:
        """Free the in-flight slot of an answered (or dropped) frame."""
        if isinstance(frame, _Query):
            self._queries_in_flight -= 1
        else:
            self._batches[frame[0].board].in_flight -= 1

    def _requeue(self, items: list[_Pending], resent: bool = True) -> None:
        """Put events back at the head of their boards' queues, to go out at once."""
        items = [p for p in items if not p.future.done()]
        if not items:
            return
        if resent:
            self._counters.events_resent += len(items)
        for pending in reversed(items):
            batch = self._batch(pending.board)
            batch.pending.appendleft(pending)
            batch.since = -float("inf")
        self._wake()

    def _requeue_in_flight(self) -> None:
        """After a drop: every unanswered frame goes back, oldest first, keys unchanged."""
        frames = [self._in_flight[i] for i in sorted(self._in_flight)]
        for frame in frames:
            self._answered(frame)
        self._in_flight.clear()
        events = [p for f in frames if isinstance(f, list) for p in f]
        queries = [f for f in frames if isinstance(f, _Query) and not f.future.done()]
        self._queries.extendleft(reversed(queries))
        self._requeue(events)

    def _fail_all(self, error: ArenaClientError) -> None:
        """Fail every waiting call (queued, in flight, delayed) with ``error``."""
        events = [*(p for b in self._batches.values() for p in b.pending), *(d for d in self._delayed if isinstance(d, _Pending))]
        queries = [*self._queries, *(d for d in self._delayed if isinstance(d, _Query))]
        for waiting in self._in_flight.values():
            if isinstance(waiting, _Query):
                queries.append(waiting)
            else:
                events.extend(waiting)
        self._batches.clear()
        self._queries.clear()
        self._queries_in_flight = 0
        self._in_flight.clear()
        self._delayed.clear()
        keys = tuple(p.key for p in events if not p.future.done())
        if isinstance(error, ConnectionFailed):
            error = ConnectionFailed(str(error), keys)
        for p in events:
            _settle(p.future, exception=error)
        for q in queries:
            _settle(q.future, exception=error)


def _settle(future: asyncio.Future[T], result: T | None = None, *, exception: BaseException | None = None) -> None:
    if future.done():
        return
    if exception is not None:
        future.set_exception(exception)
    else:
        future.set_result(result)  # type: ignore[arg-type]

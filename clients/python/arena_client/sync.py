"""`ArenaClientSync` and `connect_sync`: the client for code without an event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Coroutine, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, Unpack

from arena_client.connection import ArenaClient, ClientOptions
from arena_client.errors import ClientClosed
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
    SettlementItem,
    Standing,
    SubmitResult,
    Table,
)
from arena_client.views import View

T = TypeVar("T")


class ArenaClientSync:
    """`ArenaClient` for code without an event loop (scripts, threads): the same methods,
    blocking, and `subscribe` as a plain iterator. It runs a private event loop in a daemon
    thread; calls from several threads at once are safe and share frames. Use as
    ``with connect_sync(url, token) as client:``; `close` flushes.

    Raises what the async methods raise (connect: `AuthenticationError`, `ConnectionFailed`).
    """

    def __init__(self, url: str | Sequence[str], token: str | None = None, **options: Unpack[ClientOptions]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="arena-client-sync", daemon=True)
        self._thread.start()
        self._closed = False
        try:
            self._client: ArenaClient = self._call(self._open(url, token, options))
        except BaseException:
            self._stop_loop()
            raise

    @staticmethod
    async def _open(url: str | Sequence[str], token: str | None, options: ClientOptions) -> ArenaClient:
        return await ArenaClient(url, token, **options).connect()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._closed:
            coro.close()
            raise ClientClosed("the client was closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __enter__(self) -> ArenaClientSync:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, timeout: float | None = None) -> None:
        """Flush (as `ArenaClient.close`), close the connection and stop the thread. Idempotent."""
        if self._closed:
            return
        try:
            self._call(self._client.close(timeout))
        finally:
            self._closed = True
            self._stop_loop()

    def _stop_loop(self) -> None:
        async def finish() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._loop.shutdown_asyncgens()

        asyncio.run_coroutine_threadsafe(finish(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    @property
    def stats(self) -> ClientStats:
        return self._client.stats

    @property
    def connected(self) -> bool:
        return self._client.connected

    @property
    def url(self) -> str:
        return self._client.url

    def submit(
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
        """As `ArenaClient.submit` (raises `EventRejected` for a rejected event)."""
        return self._call(self._client.submit(board, member, value, occurred_at=occurred_at,
                                              idempotency_key=idempotency_key, meta=meta, region=region))

    def submit_many(self, events: Iterable[ScoreEvent | EventFields]) -> list[SubmitResult]:
        """As `ArenaClient.submit_many` (rejections are in the results, not raised)."""
        return self._call(self._client.submit_many(list(events)))

    def top(self, board: str, period: str, *, limit: int = 10, offset: int = 0, period_id: str | None = None,
        partition: str | None = None) -> Table:
        """As `ArenaClient.top`."""
        return self._call(self._client.top(board, period, limit=limit, offset=offset, period_id=period_id, partition=partition))

    def rank(self, board: str, period: str, member: str, *, period_id: str | None = None,
        partition: str | None = None) -> Standing:
        """As `ArenaClient.rank` (``entry`` None for a member not in the table)."""
        return self._call(self._client.rank(board, period, member, period_id=period_id, partition=partition))

    def around(self, board: str, period: str, member: str | None = None, *, rank: int | None = None, radius: int = 5,
               period_id: str | None = None,
        partition: str | None = None) -> Table:
        """As `ArenaClient.around`."""
        return self._call(self._client.around(board, period, member, rank=rank, radius=radius, period_id=period_id, partition=partition))

    def percentile(self, board: str, period: str, member: str, *, period_id: str | None = None,
        partition: str | None = None) -> Percentile:
        """As `ArenaClient.percentile`."""
        return self._call(self._client.percentile(board, period, member, period_id=period_id, partition=partition))

    def score_at_percentile(self, board: str, period: str, p: float, *, period_id: str | None = None,
        partition: str | None = None) -> ScoreAtPercentile:
        """As `ArenaClient.score_at_percentile`."""
        return self._call(self._client.score_at_percentile(board, period, p, period_id=period_id, partition=partition))

    def members(self, board: str, period: str, members: Iterable[str], *, period_id: str | None = None,
        partition: str | None = None) -> Members:
        """As `ArenaClient.members`."""
        return self._call(self._client.members(board, period, members, period_id=period_id, partition=partition))

    def subscribe(self, view: View[T]) -> Iterator[T]:
        """As `ArenaClient.subscribe`, as a blocking iterator: each ``next`` waits for the view's
        next answer. Leaving the loop (or closing the iterator) unsubscribes.

        ``for top in client.subscribe(TopView("high_score", "daily", limit=10)): ...``
        """
        updates = self._client.subscribe(view)
        try:
            while True:
                try:
                    yield self._call(_next(updates))
                except StopAsyncIteration:
                    return
        finally:
            if not self._closed:
                self._call(_close(updates))

    def ping(self) -> None:
        """As `ArenaClient.ping`."""
        self._call(self._client.ping())

    def settlements(self, after: int | None = None, *, poll_seconds: float = 1.0, limit: int = 100) -> SettlementFeedSync:
        """As `ArenaClient.settlements`, as a blocking iterator (``cursor`` as there).

        ``feed = client.settlements(after=stored)``; ``for item in feed: ...; stored = feed.cursor``
        """
        return SettlementFeedSync(self, self._client.settlements(after, poll_seconds=poll_seconds, limit=limit))


class SettlementFeedSync:
    """`SettlementFeed` for `ArenaClientSync`: each ``next`` waits for the next item."""

    def __init__(self, client: ArenaClientSync, feed: SettlementFeed) -> None:
        self._client = client
        self._feed = feed

    @property
    def cursor(self) -> int:
        """The cursor of the last item yielded."""
        return self._feed.cursor

    def __iter__(self) -> SettlementFeedSync:
        return self

    def __next__(self) -> SettlementItem:
        return self._client._call(anext(self._feed))


async def _next(updates: AsyncGenerator[T, None]) -> T:
    return await anext(updates)


async def _close(updates: AsyncGenerator[T, None]) -> None:
    await updates.aclose()


def connect_sync(url: str | Sequence[str], token: str | None = None, **options: Unpack[ClientOptions]) -> ArenaClientSync:
    """A connected `ArenaClientSync` (options as `ArenaClient`). Raises `AuthenticationError`,
    `ConnectionFailed`."""
    return ArenaClientSync(url, token, **options)

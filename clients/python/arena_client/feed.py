"""The settlement feed (`ArenaClient.settlements`): every settlement revision of the boards a
game server may write, each once and in the server's log order, read by polling
``GET /v1/settlements`` with the last cursor. HTTP over the standard library (one request at a
time, in a thread), to the client's nodes in turn."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from arena_client.backoff import Backoff
from arena_client.errors import AuthenticationError, QueryFailed
from arena_client.models import SettlementItem

PATH = "/v1/settlements"


def feed_url(url: str) -> str:
    """A node's URL (``http://``, ``ws://host:port/v1/ws``...) to its feed ``http://host:port/v1/settlements``."""
    parts = urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    return urlunsplit((scheme, parts.netloc, PATH, "", ""))


class SettlementFeed:
    """An async iterator over the feed after ``cursor``: it yields each `SettlementItem` and
    then remembers its cursor in `cursor`. Store `cursor` once an item is handled, and start
    again from it (``client.settlements(after=stored)``): every revision comes once. With no
    item to give it asks again every ``poll_seconds``. A node that cannot be reached or answers
    503 is left for the next one, after a backoff, forever. Raises `AuthenticationError`
    (the token is refused), `QueryFailed` (another refusal)."""

    def __init__(self, urls: Sequence[str], token: str | None, after: int, *, poll_seconds: float, limit: int,
                 backoff: Backoff, timeout: float) -> None:
        if poll_seconds < 0 or not 1 <= limit <= 1000:
            raise ValueError("poll_seconds must be >= 0, limit between 1 and 1000")
        self.urls = [feed_url(u) for u in urls]
        self.cursor = after
        """The cursor of the last item yielded (``after`` before the first)."""
        self.poll_seconds = poll_seconds
        self.limit = limit
        self._token = token
        self._backoff = backoff
        self._timeout = timeout
        self._node = 0
        self._read = after  # the cursor of the last item fetched
        self._items: deque[SettlementItem] = deque()

    def __aiter__(self) -> SettlementFeed:
        return self

    async def __anext__(self) -> SettlementItem:
        while not self._items:
            page = [SettlementItem.from_json(item) for item in (await self._page())["items"]]
            if page:
                self._items.extend(page)
                self._read = page[-1].cursor
            else:
                await asyncio.sleep(self.poll_seconds)
        item = self._items.popleft()
        self.cursor = item.cursor
        return item

    async def _page(self) -> dict[str, Any]:
        while True:
            url = f"{self.urls[self._node]}?after={self._read}&limit={self.limit}"
            try:
                status, body = await asyncio.to_thread(_get, url, self._token, self._timeout)
            except OSError:  # unreachable, reset, timed out
                status, body = 0, {}
            if status == 200:
                self._backoff.reset()
                return body
            if status in (401, 403):
                raise AuthenticationError(status)
            if status and status < 500:
                error = body.get("error", {})
                raise QueryFailed(error.get("code", f"http_{status}"), error.get("message", ""))
            self._node = (self._node + 1) % len(self.urls)
            await asyncio.sleep(self._backoff.next())


def _get(url: str, token: str | None, timeout: float) -> tuple[int, dict[str, Any]]:
    """One GET: the status and the JSON body (an error's too)."""
    headers = {"Accept": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as answer:
            status, data = answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        status, data = exc.code, exc.read()
    try:
        body = orjson.loads(data) if data else {}
    except orjson.JSONDecodeError:  # a proxy's page
        body = {}
    return status, body if isinstance(body, dict) else {}

"""The registry of live views and their subscriptions.

A view is a table query (its frame without ``id``), shared by every subscription that asks for
the same one. Once per push interval the registry asks each view with subscribers for its
`Source.version` (a board's engine, seq and current window); a view whose version moved is
evaluated and serialised once, and the same bytes go to every subscriber whose last update
differs (updates are compared without ``op``, ``sub`` and ``seq``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from arena.live.outbox import Outbox

log = logging.getLogger("arena.live")

ENDED = "the table of this view is no longer retained; the subscription ended"

ViewKey = bytes
"""A view's canonical form: its fields as sorted JSON."""


class Source(Protocol):
    """What the registry needs of the query layer (`arena.api.live`)."""

    def version(self, view: dict[str, Any]) -> Hashable | None:
        """What the view's answer depends on, or None while its board is loading or failed
        (then nothing is sent). Cheap: called for every view once per push interval."""

    def evaluate(self, view: dict[str, Any]) -> tuple[int, bytes] | str:
        """The view's answer now: (the seq it reflects, its body as JSON), or the error code that
        ends its subscriptions (`period_not_retained`)."""

    def released(self, view: dict[str, Any]) -> None:
        """The view's last subscription ended."""


@dataclass(eq=False, slots=True)
class Subscription:
    sub: str
    outbox: Outbox
    view: View
    sent: bytes | None = None  # the body of the last update sent
    sent_at: float = -1e9
    forced: bool = True  # the next update goes even if unchanged (subscribe, reload)


@dataclass(eq=False, slots=True)
class View:
    key: ViewKey
    fields: dict[str, Any]
    subscriptions: set[Subscription] = field(default_factory=set)
    version: Hashable | None = None
    engine: Hashable | None = None  # the version's first part: another one means the board reloaded
    seq: int = 0
    body: bytes | None = None


class LiveViews:
    """Every live view of one process. `subscribe` and `unsubscribe` are called by connections;
    a task pushes changes every ``interval`` seconds while any view has subscribers."""

    def __init__(self, source: Source, interval: float) -> None:
        self.source = source
        self.interval = interval
        self.views: dict[ViewKey, View] = {}
        self.evaluations = 0
        """Views evaluated and serialised so far (one per change of a view, whatever its subscribers)."""
        self._task: asyncio.Task[None] | None = None

    def subscribe(self, sub: str, outbox: Outbox, fields: dict[str, Any]) -> Subscription:
        """Add a subscription and send its first update now if the board is ready. O(1) plus one
        evaluation when the view is new or moved."""
        key = orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)
        view = self.views.get(key)
        if view is None:
            view = self.views[key] = View(key, fields)
        subscription = Subscription(sub, outbox, view)
        view.subscriptions.add(subscription)
        self._refresh(view)
        self._offer(subscription, time.monotonic(), immediate=True)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._push())
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        view = subscription.view
        view.subscriptions.discard(subscription)
        subscription.outbox.drop(subscription.sub)
        if not view.subscriptions and self.views.get(view.key) is view:
            del self.views[view.key]
            self.source.released(view.fields)

    async def _push(self) -> None:
        # Each round sleeps until the next round or until the earliest update held back by the
        # interval is due, whichever comes first: a subscription whose last update went out
        # between two rounds gets the next one `interval` after it, not at the round after that.
        pause = self.interval
        while self.views:
            await asyncio.sleep(pause)
            now = time.monotonic()
            due = now + self.interval
            for view in list(self.views.values()):
                try:
                    self._refresh(view)
                except Exception:  # a bug in one view must not stop every other one
                    log.exception("live view %s could not be evaluated", view.key.decode(errors="replace"))
                    continue
                for subscription in list(view.subscriptions):
                    held = self._offer(subscription, now)
                    if held is not None and held < due:
                        due = held
            pause = max(due - time.monotonic(), 0.0)

    def _refresh(self, view: View) -> None:
        version = self.source.version(view.fields)
        if version is None:  # loading or failed: nothing is sent, and a reload forces an update
            view.body = None
            view.version = None
            return
        if version == view.version:
            return
        engine = version[0] if isinstance(version, tuple) else None
        if view.engine is not None and engine != view.engine:
            for subscription in view.subscriptions:
                subscription.forced = True
        view.version, view.engine = version, engine
        self.evaluations += 1
        answer = self.source.evaluate(view.fields)
        if isinstance(answer, str):  # the view's table left retention: its subscriptions end
            for subscription in list(view.subscriptions):
                subscription.outbox.end(subscription.sub, answer, ENDED)
                self.unsubscribe(subscription)
            return
        view.seq, view.body = answer

    def _offer(self, subscription: Subscription, now: float, immediate: bool = False) -> float | None:
        """Send the view's answer to ``subscription`` if it is new to it; None, or the time when
        an update held back by the interval is due."""
        view = subscription.view
        body = view.body
        if body is None or subscription.outbox.closed:
            return None
        if not subscription.forced and (body is subscription.sent or body == subscription.sent):
            return None
        if not immediate and now - subscription.sent_at < self.interval * 0.999:
            return subscription.sent_at + self.interval  # at most one update per interval
        subscription.sent, subscription.sent_at, subscription.forced = body, now, False
        subscription.outbox.put(subscription.sub, view.seq, body)
        return None

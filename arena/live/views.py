"""The registry of live views and their subscriptions, and the budget that keeps their
evaluation off a board's ingest path.

A view is a table query with its fields (`ViewSpec`, made by `arena.api.live.view_spec`, the
one place where a view's identity is computed: strict fields, defaults filled in), shared by
every subscription that asks for the same one. Once per push interval the registry asks each
view with subscribers for its `Source.version` (a board's engine, seq and current window); a
view whose version moved is evaluated and serialised once, and the same bytes go to every
subscriber whose last update differs (updates are compared without ``op``, ``sub`` and ``seq``).

Evaluation runs on the event loop that also runs ingest, so it is bounded by construction:

- Work is counted in units of about one entry serialised (`ViewSpec.cost`: the entries a view
  asks — ``top`` its limit, ``around`` 2·radius+1, ``members`` twice its members, since each is
  looked up — plus 2 for the view's own fields; about 2 µs each on a 20k-member board). A budget
  window of one push interval (at least 100 ms, the time `UNITS_PER_SECOND` takes to pay for
  the costliest view, so that any view fits in a window) holds at most `budget` units:
  `UNITS_PER_SECOND` times the window, whatever the push interval.
  Evaluations at subscribe time are charged to the same window. A view that moved but does not
  fit keeps its last answer and is evaluated in a later window: its subscribers get fewer,
  newer updates. Views that fit are still evaluated in the same round, so small views keep
  their pace beside a reader's large ones.
- Views are kept in the order they were last evaluated, so a round starts with the views that
  waited longest: round-robin, each moved view's turn comes within ``sum of the views' costs /
  budget`` windows, however many views one connection holds.
- A round yields to the loop after each evaluation (one view: at most a few milliseconds) and
  every `CHECKS_PER_TURN` version checks, so a commit never waits behind a whole round.

With normal loads the budget is never reached and nothing changes: at most one update per
interval per subscription, the newest state within an interval of the last change. Whatever
readers hold (each connection at most `max_view_entries`), evaluation takes at most about 4 % of
a core (`UNITS_PER_SECOND`), whatever the size of the board.
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

UNITS_PER_SECOND = 20_000
"""Units of evaluation work (`ViewSpec.cost`) per second at most, over all views of the process:
about 40 ms of CPU per second, so that a board's ingest keeps at least 0.8 of its rate on a
shared machine (`python -m loadtest live --hostile`, docs/performance.md)."""
VIEW_UNITS = 2
"""A view's own cost beyond its entries: its table's fields, its dict, one serialisation."""
COSTLIEST_VIEW = VIEW_UNITS + 2 * 1000
"""A `members` view of 1,000 members: a window holds at least one."""
CHECKS_PER_TURN = 256
"""Version checks between two turns of the event loop in a round (each about a microsecond)."""


@dataclass(frozen=True, slots=True)
class ViewSpec:
    """What a view asks: its fields with defaults filled in, and ``key``, their canonical JSON.
    Two views are the same view exactly when their keys are equal. ``entries`` and ``members``
    are meaningful once the view's query accepted its fields."""

    fields: dict[str, Any] = field(compare=False)
    key: bytes = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", orjson.dumps(self.fields, option=orjson.OPT_SORT_KEYS))

    @property
    def entries(self) -> int:
        """The entries the view asks: its share of `max_view_entries`."""
        op, f = self.fields["op"], self.fields
        if op == "top":
            return int(f["limit"])
        if op == "around":
            return 2 * int(f["radius"]) + 1
        if op == "members":
            return len(f["members"])
        return 1

    @property
    def cost(self) -> int:
        """The view's evaluation work in units of about one entry serialised (see the module)."""
        looked_up = 2 if self.fields["op"] == "members" else 1
        return VIEW_UNITS + looked_up * self.entries

    @property
    def members(self) -> int:
        """The members the view names: its share of `max_view_members`."""
        if self.fields["op"] == "members":
            return len(self.fields["members"])
        return 1 if "member" in self.fields else 0


class Source(Protocol):
    """What the registry needs of the query layer (`arena.api.live`)."""

    def version(self, view: ViewSpec) -> Hashable | None:
        """What the view's answer depends on, or None while its board is loading or failed
        (then nothing is sent). Cheap: called for every view once per push interval."""

    def evaluate(self, view: ViewSpec) -> tuple[int, bytes] | str | None:
        """The view's answer now: (the seq it reflects, its body as JSON), the error code that
        ends its subscriptions (`period_not_retained`), or None while its board answers nothing
        (`not_ready`, `unavailable`: a state of the subscriptions, never their end)."""

    def released(self, view: ViewSpec) -> None:
        """The view's last subscription ended."""


@dataclass(eq=False, slots=True)
class Subscription:
    sub: str
    outbox: Outbox
    view: View
    sent: bytes | None = None  # the body of the last update sent
    sent_at: float = -1e9
    forced: bool = True  # the next update goes even if unchanged (subscribe, reload)

    @property
    def active(self) -> bool:
        """False once unsubscribed, or ended by the registry (its table left retention)."""
        return self in self.view.subscriptions


@dataclass(eq=False, slots=True)
class View:
    spec: ViewSpec
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
        self.views: dict[bytes, View] = {}
        """By key, least recently evaluated first."""
        self.evaluations = 0
        """Views evaluated and serialised so far (one per change of a view, whatever its subscribers)."""
        self.window = max(interval, COSTLIEST_VIEW / UNITS_PER_SECOND)
        """The budget's window, in seconds: one push interval, or long enough for the costliest view."""
        self.budget = round(UNITS_PER_SECOND * self.window)
        """Units of work (`ViewSpec.cost`) evaluated in one `window` at most."""
        self.busiest = 0
        """The most units evaluated in one window so far (never above `budget`)."""
        self._spent = 0
        self._window = -1e9  # when the current budget window began (monotonic)
        self._task: asyncio.Task[None] | None = None

    def subscribe(self, sub: str, outbox: Outbox, spec: ViewSpec) -> Subscription:
        """Add a subscription and send its first update now if the board is ready and the budget
        allows. O(1) plus one evaluation when the view is new or moved."""
        view = self.views.get(spec.key)
        if view is None:
            view = self.views[spec.key] = View(spec)
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
        if not view.subscriptions and self.views.get(view.spec.key) is view:
            del self.views[view.spec.key]
            self.source.released(view.spec)

    async def _push(self) -> None:
        # Each round sleeps until the next round or until the earliest update held back by the
        # interval is due, whichever comes first: a subscription whose last update went out
        # between two rounds gets the next one `interval` after it, not at the round after that.
        pause = self.interval
        while self.views:
            await asyncio.sleep(pause)
            due = time.monotonic() + self.interval
            checks = 0
            for view in list(self.views.values()):  # least recently evaluated first
                if self.views.get(view.spec.key) is not view:
                    continue  # its last subscriber left while the round yielded
                evaluated = self.evaluations
                try:
                    deferred = not self._refresh(view)
                except Exception:  # a bug in one view must not stop every other one
                    log.exception("live view %s could not be evaluated", view.spec.key.decode(errors="replace"))
                    continue
                if deferred:
                    due = min(due, self._window + self.window)
                now = time.monotonic()
                for subscription in list(view.subscriptions):
                    held = self._offer(subscription, now)
                    if held is not None and held < due:
                        due = held
                checks += 1
                if self.evaluations != evaluated:
                    if self.views.get(view.spec.key) is view:  # to the back of the line
                        self.views[view.spec.key] = self.views.pop(view.spec.key)
                    await asyncio.sleep(0)
                elif checks % CHECKS_PER_TURN == 0:
                    await asyncio.sleep(0)
            pause = max(due - time.monotonic(), 0.0)

    def _charge(self, cost: int) -> bool:
        """Take ``cost`` units from the current window's budget; False if they do not fit."""
        now = time.monotonic()
        if now - self._window >= self.window:
            self._window, self._spent = now, 0
        if self._spent + cost > self.budget and self._spent > 0:
            return False
        self._spent += cost
        self.busiest = max(self.busiest, self._spent)
        return True

    def _refresh(self, view: View) -> bool:
        """Evaluate the view if its version moved and the budget allows; False if it moved and
        waits for a later window."""
        version = self.source.version(view.spec)
        if version is None:  # loading or failed: nothing is sent, and a reload forces an update
            view.body = None
            view.version = None
            return True
        if version == view.version:
            return True
        if not self._charge(view.spec.cost):
            return False
        engine = version[0] if isinstance(version, tuple) else None
        if view.engine is not None and engine != view.engine:
            for subscription in view.subscriptions:
                subscription.forced = True
        view.version, view.engine = version, engine
        self.evaluations += 1
        answer = self.source.evaluate(view.spec)
        if answer is None:  # as a version of None: nothing is sent until the board answers again
            view.body = view.version = None
            for subscription in view.subscriptions:
                subscription.forced = True
            return True
        if isinstance(answer, str):  # the view's table left retention: its subscriptions end
            for subscription in list(view.subscriptions):
                subscription.outbox.end(subscription.sub, answer, ENDED)
                self.unsubscribe(subscription)
            return True
        view.seq, view.body = answer
        return True

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

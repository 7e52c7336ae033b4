"""A node's webhook loop: it reads the settlement log into the outbox (each webhook from its
position, the log's end the first time the webhook is seen, so a webhook added to the config gets
the revisions journaled after it was added) and sends the due deliveries of the boards this node
owns, so a restart or a new owner resumes what is pending. Never part of a board's commit path.

A delivery's body is a pure function of its journaled revision (`DeliveryBoards.body`), so every
attempt of one ``Arena-Delivery`` carries the same body; only the signature's time changes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import orjson

from arena.config import Webhook
from arena.delivery.outbox import Delivery, Outbox, Outcome, deliveries
from arena.delivery.sender import Sender
from arena.errors import IllegalTransition, JournalError
from arena.journal import SettlementLog
from arena.metrics import Metrics

log = logging.getLogger("arena.delivery")

TICK_SECONDS = 0.2
"""The longest wait between two looks at the settlement log and the due deliveries."""
LOG_ITEMS = 1000
"""Settlement log items read at a time."""
DUE_LIMIT = 200
"""Deliveries attempted at once, at most."""


class DeliveryBoards(Protocol):
    """What the deliverer asks of the node's boards."""

    def delivered_here(self) -> list[str]:
        """The boards whose deliveries this node sends now: those it owns."""

    async def body(self, delivery: Delivery) -> bytes | None:
        """The body of ``delivery`` (its revision's answer with the awards of its page); None when
        the board is not served here after all."""


def _everything(board: str) -> bool:
    return True


class Deliverer:
    def __init__(self, webhooks: Sequence[Webhook], secrets: Mapping[str, Sequence[str]], outbox: Outbox,
                 settlement_log: SettlementLog, boards: DeliveryBoards, metrics: Metrics, *,
                 backoff_seconds: float, timeout_seconds: float, clock: Callable[[], int]) -> None:
        self.webhooks = {hook.id: hook for hook in webhooks}
        self.secrets = secrets
        self.outbox = outbox
        self.log = settlement_log
        self.boards = boards
        self.metrics = metrics
        self.backoff_seconds = backoff_seconds
        self.clock = clock
        self._sender = Sender(timeout_seconds)
        self._wake = asyncio.Event()
        self._in_flight: dict[tuple[str, str], asyncio.Task[None]] = {}
        """The attempts under way, by (webhook, delivery id)."""

    def webhook(self, webhook: str) -> Webhook | None:
        return self.webhooks.get(webhook)

    def wake(self) -> None:
        """Look at the log and the due deliveries now rather than at the next tick."""
        self._wake.set()

    async def begin(self) -> None:
        """Read the settlement log once, at the start: a webhook seen for the first time starts
        at the log's end before the server takes an event. A store that fails is logged (`run` asks again)."""
        try:
            await self._read_log()
        except JournalError as exc:
            log.warning("webhooks: the outbox or the settlement log failed at the start: %s; trying again", exc)

    async def run(self) -> None:
        """The loop, until cancelled (then the attempts under way are cancelled too: a delivery
        cut short is still pending). A store that fails is logged and asked again at the next tick."""
        try:
            await self._loop()
        finally:
            attempts = list(self._in_flight.values())
            for task in attempts:
                task.cancel()
            await asyncio.gather(*attempts, return_exceptions=True)

    async def _loop(self) -> None:
        failing = False
        while True:
            try:
                await self._tick()
                if failing:
                    log.info("webhooks: the outbox answers again")
                failing = False
            except JournalError as exc:
                if not failing:
                    log.warning("webhooks: the outbox or the settlement log failed: %s; trying again", exc)
                failing = True
            try:
                await asyncio.wait_for(self._wake.wait(), TICK_SECONDS)
            except TimeoutError:
                pass
            self._wake.clear()

    async def _tick(self) -> None:
        await self._read_log()
        due = [d for d in await self.outbox.due(self.clock(), DUE_LIMIT, self.boards.delivered_here())
               if d.webhook in self.webhooks and (d.webhook, d.id) not in self._in_flight]
        for d in due:  # each attempt on its own: a receiver that hangs holds up only its own deliveries
            key = (d.webhook, d.id)
            self._in_flight[key] = task = asyncio.create_task(self._attempt(d), name=f"webhook {d.webhook} {d.id}")
            task.add_done_callback(functools.partial(self._done, key))
        await self._gauge()

    def _done(self, key: tuple[str, str], task: asyncio.Task[None]) -> None:
        self._in_flight.pop(key, None)
        self.wake()  # the next revision of its table may be due now

    async def _read_log(self) -> None:
        cursors = await self.outbox.cursors()
        for hook in self.webhooks.values():
            cursor = cursors.get(hook.id)
            if cursor is None:
                cursor = await self.outbox.start(hook.id, await self._log_end())
                log.info("webhook %s: delivering the settlement revisions after log position %d", hook.id, cursor)
            while True:
                items = await self.log.after(cursor, LOG_ITEMS, _everything)
                if not items:
                    break
                now = self.clock()
                made = [d for item in items if hook.wants(item.board) for d in deliveries(hook.id, item, now)]
                cursor = items[-1].cursor
                await self.outbox.add(hook.id, made, cursor)
                if len(items) < LOG_ITEMS:
                    break

    async def _log_end(self) -> int:
        cursor = 0
        while items := await self.log.after(cursor, LOG_ITEMS, _everything):
            cursor = items[-1].cursor
        return cursor

    async def _attempt(self, delivery: Delivery) -> None:
        hook = self.webhooks[delivery.webhook]
        try:
            body = await self.boards.body(delivery)
        except Exception as exc:  # a board that cannot answer now: tried again at its next turn
            log.warning("webhook %s: delivery %s: its body could not be made: %s", hook.id, delivery.id, exc)
            return
        if body is None:
            return
        error = await self._sender.post(hook.url, delivery.id, body, self.secrets[hook.id])
        now = self.clock()
        if error is None:
            outcome = Outcome.DELIVERED
            log.info("webhook %s: delivered %s (attempt %d)", hook.id, delivery.id, delivery.attempts + 1)
        else:
            outcome = delivery.failed_outcome(now, hook.max_age_hours)
            if outcome is Outcome.FAILED:
                log.error("webhook %s: delivery %s failed for good after %d attempts over %.1f hours: %s", hook.id,
                          delivery.id, delivery.attempts + 1, hook.max_age_hours, error)
            else:
                log.warning("webhook %s: delivery %s, attempt %d: %s", hook.id, delivery.id, delivery.attempts + 1, error)
        self.metrics.webhook_deliveries.labels(hook.id, str(outcome)).inc()
        try:
            await self.outbox.save(delivery.moved(outcome, now, backoff_seconds=self.backoff_seconds, error=error))
        except JournalError as exc:  # still pending in the outbox: attempted again (at-least-once)
            log.warning("webhook %s: delivery %s: its outcome (%s) not saved: %s", hook.id, delivery.id, outcome, exc)

    async def _gauge(self) -> None:
        pending = await self.outbox.pending()
        now = self.clock()
        for hook in self.webhooks:
            count, oldest = pending.get(hook, (0, now))
            self.metrics.webhook_pending.labels(hook).set(count)
            self.metrics.webhook_oldest_pending.labels(hook).set(max(0, now - oldest) / 1000)

    async def retry(self, hook: Webhook, delivery_id: str) -> Delivery | None:
        """Make ``delivery_id`` pending again, due now, with a new max age (None: no such delivery)."""
        delivery = await self.outbox.get(hook.id, delivery_id)
        if delivery is None:
            return None
        try:
            retried = delivery.moved(Outcome.RETRY, self.clock())
        except IllegalTransition:  # pending already: it is due as it is
            return delivery
        await self.outbox.save(retried)
        log.info("webhook %s: delivery %s retried by an admin (was %s)", hook.id, delivery_id, delivery.state)
        self.wake()
        return retried

    async def test(self, hook: Webhook) -> dict[str, object]:
        """Send a signed test delivery to ``hook`` now (not stored, not retried)."""
        delivery = f"test/{uuid.uuid4().hex}"
        body = orjson.dumps({"test": True, "webhook": hook.id, "delivery": delivery, "sent_at": self.clock()})
        error = await self._sender.post(hook.url, delivery, body, self.secrets[hook.id])
        log.info("webhook %s: test delivery %s: %s", hook.id, delivery, error or "delivered")
        return {"webhook": hook.id, "delivery": delivery, "delivered": error is None, "error": error}

    async def close(self) -> None:
        await self._sender.close()

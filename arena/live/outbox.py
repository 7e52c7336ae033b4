"""Every frame one connection is owed, written by one task so that nothing else awaits a send.

Two kinds of frames go out. Frames owed (answers, acks, errors, pongs, `subscribed`,
`unsubscribed`, the end of a subscription, an event stream's ping) go in order and are never
dropped; they are bounded: the outbox is `full` while it holds `Bounds.frames` of them or
`Bounds.bytes` of them, and its connection reads no frame until there is `room` (backpressure),
so what a connection is owed stays near the bound whatever it sends. Updates are not owed: each
subscription holds at most one unsent update, which a newer one replaces, so a slow reader gets
fewer, newer updates and never slows a board or another subscriber.

A reader that has stopped reading is let go: when a write has been pending, or the outbox has
been full, for `Bounds.stall_seconds` (`ping_timeout_seconds`), the outbox stops and says so
(``on_stall``), and its connection is aborted, so that a dead reader holds nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import orjson

from arena.config import ServerSettings

log = logging.getLogger("arena.live")


def _websocket_update(sub: str, seq: int, body: bytes) -> bytes:
    return b'{"op":"update","sub":' + orjson.dumps(sub) + b',"seq":%d,' % seq + body[1:]


def _websocket_ended(sub: str, code: str, message: str) -> bytes:
    return orjson.dumps({"op": "error", "id": None, "sub": sub, "code": code, "message": message})


def _event_stream_update(sub: str, seq: int, body: bytes) -> bytes:
    return b"event: update\nid: %d\ndata: {\"seq\":%d,%b\n\n" % (seq, seq, body[1:])


def _event_stream_ended(sub: str, code: str, message: str) -> bytes:
    return b"event: error\ndata: %b\n\n" % orjson.dumps({"code": code, "message": message})


@dataclass(frozen=True, slots=True)
class Framing:
    """How a connection writes an update (subscription, seq, the view's answer as JSON) and the
    end of a subscription (subscription, error code, message)."""

    update: Callable[[str, int, bytes], bytes]
    ended: Callable[[str, str, str], bytes]


WEBSOCKET = Framing(_websocket_update, _websocket_ended)
"""``{"op":"update","sub":S,"seq":N, ...the answer}``, and an error frame naming the subscription."""
EVENT_STREAM = Framing(_event_stream_update, _event_stream_ended)
"""Server-sent events: ``event: update``, ``id: <seq>``, ``data:`` the answer with its seq."""


@dataclass(frozen=True, slots=True)
class Bounds:
    """What one connection may be owed before it is read no more, and how long it may stay so."""

    frames: int
    bytes: int
    stall_seconds: float

    @classmethod
    def of(cls, settings: ServerSettings) -> Bounds:
        """`max_in_flight_frames` frames or `max_frame_bytes` bytes owed; `ping_timeout_seconds`."""
        return cls(settings.max_in_flight_frames, settings.max_frame_bytes, settings.ping_timeout_seconds)


class Outbox:
    """The frames waiting for one connection. `owe`, `put` and `end` never block."""

    def __init__(
        self,
        send: Callable[[bytes], Awaitable[None]],
        bounds: Bounds,
        framing: Framing = WEBSOCKET,
        on_stall: Callable[[], None] | None = None,
    ) -> None:
        """``on_stall`` is called once when a `send` stays pending, or the outbox stays full,
        ``bounds.stall_seconds``; the outbox is closed by then."""
        self._send = send
        self.bounds = bounds
        self.framing = framing
        self._on_stall = on_stall
        self.stalled = False
        self._sending_since: float | None = None  # loop time when the pending send began
        self._full_since: float | None = None  # loop time when the outbox became full; None: it has room
        self._watch: asyncio.TimerHandle | None = None
        self._owed: deque[bytes] = deque()
        self._owed_bytes = 0
        self._updates: dict[str, bytes] = {}  # subscription -> its newest unsent update
        self._ready = asyncio.Event()
        self._waiters: list[asyncio.Future[None]] = []  # of `room` and `flushed` (no Event each: 1 KB a connection)
        self._task: asyncio.Task[None] | None = None
        self.closed = False

    def owe(self, frame: bytes) -> None:
        """Queue a frame that must be sent, after those queued before it, even past the bound
        (an ack or an answer is never dropped: the bound stops reading, not answering)."""
        if self.closed:
            return
        self._owed.append(frame)
        self._owed_bytes += len(frame)
        if self._full_since is None and self.full:
            self._full_since = asyncio.get_running_loop().time()
        self._wake()

    @property
    def full(self) -> bool:
        return len(self._owed) >= self.bounds.frames or self._owed_bytes >= self.bounds.bytes

    async def room(self) -> None:
        """Until the outbox is not full (or closed). O(1) when it has room."""
        while self._full_since is not None:
            await self._change()

    def put(self, sub: str, seq: int, body: bytes) -> None:
        """Hold the answer ``body`` at ``seq`` as ``sub``'s next update, replacing one not yet
        sent. O(len(body)): one copy, into this connection's framing."""
        self._updates[sub] = self.framing.update(sub, seq, body)
        self._wake()

    def end(self, sub: str, code: str, message: str) -> None:
        """Say that ``sub`` ended (its table left retention), after what was queued before."""
        self._updates.pop(sub, None)
        self.owe(self.framing.ended(sub, code, message))

    def drop(self, sub: str) -> None:
        """Forget ``sub``'s unsent update (it was unsubscribed)."""
        self._updates.pop(sub, None)

    @property
    def waiting(self) -> int:
        """Frames queued and not yet being sent: at most the frames owed plus one update per
        subscription, however slow the reader."""
        return len(self._owed) + len(self._updates)

    async def flushed(self) -> None:
        """Until every frame queued is sent (or the outbox closed)."""
        while not self.closed and (self._owed or self._updates or self._sending_since is not None):
            await self._change()

    async def _change(self) -> None:
        """Until the outbox has room again, its writer goes idle, or it closes."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter

    def _changed(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def close(self) -> None:
        self._stop()
        if self._task is not None:
            self._task.cancel()

    def _check_stall(self) -> None:
        """The watch: a timer armed when the writer starts on a batch, not one per send (a
        timeout around each send cost a sixth of the delivery path's CPU)."""
        self._watch = None
        pending = [t for t in (self._sending_since, self._full_since) if t is not None]
        if self.closed or not pending:
            return  # idle: the next batch arms it again
        loop = asyncio.get_running_loop()
        left = min(pending) + self.bounds.stall_seconds - loop.time()
        if left > 0:
            self._watch = loop.call_later(left, self._check_stall)
            return
        self.stalled = True
        self.close()  # cancels the pending send
        if self._on_stall is not None:
            self._on_stall()

    def _wake(self) -> None:
        if self.closed:
            return
        self._ready.set()
        if self._task is None:
            self._task = asyncio.create_task(self._write())

    async def _write(self) -> None:
        loop = asyncio.get_running_loop()
        owed, updates = self._owed, self._updates
        while not self.closed:
            await self._ready.wait()
            self._ready.clear()
            if self._watch is None:
                self._watch = loop.call_later(self.bounds.stall_seconds, self._check_stall)
            while owed or updates:
                if owed:
                    frame = owed.popleft()
                    self._owed_bytes -= len(frame)
                    if self._full_since is not None and not self.full:
                        self._full_since = None
                        self._changed()
                else:
                    frame = updates.pop(next(iter(updates)))
                self._sending_since = loop.time()
                try:
                    await self._send(frame)
                except Exception:  # the peer is gone: the connection's reader ends it
                    log.debug("frame not sent: connection gone")
                    self._stop()
                    return
                self._sending_since = None
            if self._waiters:
                self._changed()

    def _stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self.closed = True
        self._owed.clear()
        self._owed_bytes = 0
        self._updates.clear()
        self._full_since = None
        self._changed()  # a reader waiting for room goes on, and finds the connection ended

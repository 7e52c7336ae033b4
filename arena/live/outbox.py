"""One connection's subscription frames, written by one task so that no fan-out awaits a send.

Control frames (`subscribed`, `unsubscribed`, errors) go out in order; each subscription holds at
most one unsent update, which a newer one replaces: a slow reader gets fewer, newer updates and
bounded memory, and never slows a board or another subscriber. A write pending for
``stall_seconds`` (`ping_timeout_seconds`) means a reader that has stopped reading: the outbox
stops and says so (``on_stall``), and its connection closes, so that a dead reader holds nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import orjson

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


class Outbox:
    """The frames waiting for one connection. `put` and `control` never block."""

    def __init__(
        self,
        send: Callable[[bytes], Awaitable[None]],
        framing: Framing = WEBSOCKET,
        stall_seconds: float | None = None,
        on_stall: Callable[[], None] | None = None,
    ) -> None:
        """``on_stall`` is called once if a `send` stays pending ``stall_seconds``; the outbox
        is closed by then."""
        self._send = send
        self.framing = framing
        self._stall_seconds = stall_seconds
        self._on_stall = on_stall
        self.stalled = False
        self._sending_since: float | None = None  # loop time when the pending send began
        self._watch: asyncio.TimerHandle | None = None
        self._control: deque[bytes] = deque()
        self._updates: dict[str, bytes] = {}  # subscription -> its newest unsent update
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.closed = False

    def control(self, frame: bytes) -> None:
        """Queue a frame that must be sent, after those queued before it."""
        self._control.append(frame)
        self._wake()

    def put(self, sub: str, seq: int, body: bytes) -> None:
        """Hold the answer ``body`` at ``seq`` as ``sub``'s next update, replacing one not yet
        sent. O(len(body)): one copy, into this connection's framing."""
        self._updates[sub] = self.framing.update(sub, seq, body)
        self._wake()

    def end(self, sub: str, code: str, message: str) -> None:
        """Say that ``sub`` ended (its table left retention), after what was queued before."""
        self._updates.pop(sub, None)
        self.control(self.framing.ended(sub, code, message))

    def drop(self, sub: str) -> None:
        """Forget ``sub``'s unsent update (it was unsubscribed)."""
        self._updates.pop(sub, None)

    @property
    def waiting(self) -> int:
        """Frames queued and not yet being sent: at most the control frames plus one update per
        subscription, however slow the reader."""
        return len(self._control) + len(self._updates)

    def close(self) -> None:
        self._stop()
        if self._task is not None:
            self._task.cancel()

    def _check_stall(self) -> None:
        """The watch: a timer armed when the writer starts on a batch, not one per send (a
        timeout around each send cost a sixth of the delivery path's CPU)."""
        self._watch = None
        since = self._sending_since
        if self.closed or since is None or self._stall_seconds is None:
            return  # idle: the next batch arms it again
        loop = asyncio.get_running_loop()
        left = since + self._stall_seconds - loop.time()
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
        while not self.closed:
            await self._ready.wait()
            self._ready.clear()
            if self._stall_seconds is not None and self._watch is None:
                self._watch = loop.call_later(self._stall_seconds, self._check_stall)
            while self._control or self._updates:
                if self._control:
                    frame = self._control.popleft()
                else:
                    sub = next(iter(self._updates))
                    frame = self._updates.pop(sub)
                self._sending_since = loop.time()
                try:
                    await self._send(frame)
                except Exception:  # the peer is gone: the connection's reader ends it
                    log.debug("live frame not sent: connection gone")
                    self._stop()
                    return
                self._sending_since = None

    def _stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self.closed = True
        self._control.clear()
        self._updates.clear()

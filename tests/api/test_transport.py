"""`CoalescingTransport`: a connection's writes of one turn of the loop leave as one write."""

from __future__ import annotations

import asyncio
from typing import Any

from arena.api.transport import CoalescingTransport


class FakeTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.events: list[str] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)
        self.events.append("write")

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        self.closing = True
        self.events.append("close")

    def abort(self) -> None:
        self.closing = True
        self.events.append("abort")

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


def coalescing() -> tuple[CoalescingTransport, FakeTransport]:
    inner = FakeTransport()
    return CoalescingTransport(inner, asyncio.get_running_loop()), inner  # type: ignore[arg-type]


async def test_writes_of_one_turn_leave_as_one_write_at_the_next_turn() -> None:
    transport, inner = coalescing()
    transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
    transport.write(bytearray(b"{}"))
    transport.write(b"")
    assert inner.writes == [] and transport.get_write_buffer_size() == 21
    await asyncio.sleep(0)
    assert inner.writes == [b"HTTP/1.1 200 OK\r\n\r\n{}"]
    transport.write(b"next")
    await asyncio.sleep(0)
    assert inner.writes[1:] == [b"next"]


async def test_writes_held_leave_as_one_write_at_release_with_those_of_the_turn_before() -> None:
    transport, inner = coalescing()
    transport.write(b"a")  # before the hold: its flush is scheduled already
    transport.hold()
    transport.write(b"b")
    transport.write(b"c")
    assert inner.writes == []
    transport.release()
    assert inner.writes == [b"abc"]
    transport.hold()
    transport.write(b"d")
    transport.release()
    await asyncio.sleep(0)
    assert inner.writes == [b"abc", b"d"]  # nothing left for the scheduled flush


async def test_a_buffer_reused_by_the_caller_is_sent_as_it_was_written() -> None:
    transport, inner = coalescing()
    buffer = bytearray(b"abc")
    transport.write(buffer)
    buffer[:] = b"xyz"
    await asyncio.sleep(0)
    assert inner.writes == [b"abc"]


async def test_close_sends_what_is_kept_first_and_abort_drops_it() -> None:
    transport, inner = coalescing()
    transport.write(b"last words")
    transport.close()
    assert inner.events == ["write", "close"]
    await asyncio.sleep(0)
    assert inner.writes == [b"last words"]

    transport, inner = coalescing()
    transport.write(b"dropped")
    transport.abort()
    await asyncio.sleep(0)
    assert inner.events == ["abort"]


async def test_nothing_is_written_to_a_transport_closed_meanwhile() -> None:
    transport, inner = coalescing()
    transport.write(b"too late")
    inner.closing = True
    await asyncio.sleep(0)
    assert inner.writes == []


async def test_everything_else_is_the_wrapped_transports() -> None:
    transport, _inner = coalescing()
    assert transport.get_extra_info("peername") == ("127.0.0.1", 1)
    assert transport.is_closing() is False

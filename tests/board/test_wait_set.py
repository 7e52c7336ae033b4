"""`arena.clock.wait_set`: the wait every loop of the server parks in (the mailbox, the ownership
beats, the directory) ends when it is cancelled, even in the turn its event is set: the case
Python 3.11's `asyncio.wait_for` gets wrong, which left a node renewing its lease on SIGTERM."""

from __future__ import annotations

import asyncio

import pytest

from arena.board.clock import wait_set


async def test_a_cancel_in_the_turn_the_event_is_set_ends_the_waiting_loop() -> None:
    hinted = asyncio.Event()
    waits = 0

    async def beats() -> None:  # as Ownership.run waits between beats
        nonlocal waits
        while True:
            await wait_set(hinted, 10)
            hinted.clear()
            waits += 1

    task = asyncio.create_task(beats())
    await asyncio.sleep(0)  # parked in its wait
    hinted.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(5):
            await task
    assert waits == 0


async def test_it_says_whether_the_event_was_set_or_the_time_passed() -> None:
    event = asyncio.Event()
    assert await wait_set(event, 0.01) is False
    event.set()
    assert await wait_set(event, 0.01) is True

"""`Flag` behaves as `asyncio.Event` and keeps no list of waiters while nobody waits."""

from __future__ import annotations

import asyncio

from arena.board.clock import wait_set
from arena.board.flag import Flag


async def test_a_flag_wakes_every_waiter_and_forgets_them() -> None:
    flag = Flag()
    waiters = [asyncio.ensure_future(flag.wait()) for _ in range(3)]
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiters) and not flag.is_set()
    flag.set()
    assert await asyncio.gather(*waiters) == [True, True, True]
    assert flag._waiters is None
    assert await flag.wait() is True  # set: at once
    flag.clear()
    assert not flag.is_set() and await wait_set(flag, 0.01) is False
    assert flag._waiters is None  # the timed-out wait left nothing behind


async def test_a_cancelled_wait_leaves_the_others_waiting() -> None:
    flag = Flag()
    first, second = asyncio.ensure_future(flag.wait()), asyncio.ensure_future(flag.wait())
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    assert not second.done()
    flag.set()
    assert await second is True and flag._waiters is None


def test_a_flag_made_set_is_set() -> None:
    assert Flag(True).is_set() and not Flag().is_set()

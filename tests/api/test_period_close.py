"""A table is closed from the clock's close moment on (DESIGN.md "Period close"): the `periods`
listing and every table query say so alike, before the actor has journaled the close marker too."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import support.server
from support.server import make_config, until

MIN = 60_000
HOUR = 60 * MIN
D1 = 1_799_020_800_000  # 2027-01-04T00:00:00Z (after the wall clock: the test clock leads)
FIRST = "2027-01-04T00"
CLOSE = D1 + HOUR + MIN  # the end of the first hour plus the default grace of 60 s
BOARDS = {"b": {"aggregation": "best", "periods": ["hourly", "alltime"]}}


class Rig(support.server.Rig):
    async def get(self, path: str, **params: Any) -> dict[str, Any]:
        answer = await self.http.get(f"/v1/boards/b/{path}", params=params)
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    async def listed_closed(self) -> bool:
        """What the periods route says of the first hour."""
        listed = {p["period_id"]: p for p in (await self.get("hourly/periods"))["periods"]}
        closed: bool = listed[FIRST]["closed"]
        return closed

    async def queried_closed(self) -> set[bool]:
        """What the table queries say of the first hour, each of them."""
        answers = [
            await self.get("hourly/top", period_id=FIRST),
            await self.get("hourly/members/m", period_id=FIRST),
            await self.get("hourly/around/m", period_id=FIRST, radius=1),
            await self.get("hourly/digest", period_id=FIRST),
        ]
        return {answer["closed"] for answer in answers}


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with support.server.rig(Rig, make_config(tmp_path, BOARDS)) as r:
        await r.clock(D1 + 10 * MIN)
        assert (await r.client.submit("b", "m", 5, occurred_at=D1 + 5 * MIN, idempotency_key="k1")).recorded
        yield r


async def test_periods_and_the_table_agree_right_after_the_close_moment(rig: Rig) -> None:
    await rig.clock(CLOSE - 1)
    assert await rig.listed_closed() is False and await rig.queried_closed() == {False}
    await rig.clock(CLOSE)
    assert await rig.listed_closed() is True and await rig.queried_closed() == {True}


async def test_a_table_is_closed_by_the_clock_before_its_marker_is_journaled(rig: Rig) -> None:
    # The journal refuses the close marker: the actor retries it, and the clock route (which
    # waits for the actor to close what is due) answers only once the journal heals.
    assert (await rig.http.post("/v1/_test/boards/b/journal", json={"fault": "full"})).status_code == 200
    moved = asyncio.create_task(rig.clock(CLOSE))
    try:
        await until(rig.listed_closed, "the periods route to follow the clock", timeout=10)
        assert not moved.done()  # the marker is not journaled yet
        assert await rig.queried_closed() == {True}
    finally:
        assert (await rig.http.post("/v1/_test/boards/b/journal", json={"fault": None})).status_code == 200
        await asyncio.wait_for(moved, 10)
    assert await rig.listed_closed() is True and await rig.queried_closed() == {True}

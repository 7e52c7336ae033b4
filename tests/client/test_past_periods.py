"""Past tables: queries with `period_id` for the open and the last `keep_closed` closed tables,
the `periods` listing (newest first, with disputes), and 404s for older (`period_not_retained`)
and for malformed or future ids (`unknown_period`). The test clock moves through the windows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import support.server
from arena.client import ArenaClient, QueryFailed, ScoreEvent
from support.server import ADMIN_TOKEN, InProcessServer, make_config, token_for

MIN = 60_000
HOUR = 60 * MIN
DAY = 24 * HOUR
D1 = 1_799_020_800_000  # 2027-01-04T00:00:00Z, a Monday (after the wall clock: the test clock leads)
BOARDS = {"b": {"aggregation": "best", "periods": ["hourly", "daily", "weekly", "alltime"], "keep_closed": 2}}


def hour_id(ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H")


class Rig(support.server.Rig):
    async def get(self, path: str, **params: Any) -> httpx.Response:
        return await self.http.get(f"/v1/boards/b/{path}", params=params)


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with support.server.rig(Rig, make_config(tmp_path, BOARDS)) as r:
        yield r


async def five_hours(rig: Rig) -> None:
    """Member m{h} scores h+1 in hour h of D1, h = 0..4; the clock ends at 04:10."""
    for h in range(5):
        await rig.clock(D1 + h * HOUR + 10 * MIN)
        result = await rig.client.submit("b", f"m{h}", h + 1, occurred_at=D1 + h * HOUR + 5 * MIN, idempotency_key=f"h{h}")
        assert result.recorded


async def test_the_last_keep_closed_tables_answer_by_period_id(rig: Rig) -> None:
    await five_hours(rig)
    for h, closed in [(4, False), (3, True), (2, True)]:
        body = (await rig.get("hourly/top", period_id=hour_id(D1 + h * HOUR))).json()
        assert body["closed"] is closed and body["size"] == 1
        assert body["entries"][0]["member"] == f"m{h}" and body["entries"][0]["score"] == h + 1
    current = (await rig.get("hourly/top")).json()
    assert current["period_id"] == "2027-01-04T04"


async def test_every_query_takes_period_id(rig: Rig) -> None:
    await five_hours(rig)
    pid = "2027-01-04T03"
    assert (await rig.get("hourly/members/m3", period_id=pid)).json()["entry"]["rank"] == 1
    assert (await rig.get("hourly/around/m3", period_id=pid, radius=2)).json()["entries"][0]["member"] == "m3"
    assert (await rig.get("hourly/around", period_id=pid, rank=1)).json()["entries"][0]["member"] == "m3"
    assert (await rig.get("hourly/percentile/m3", period_id=pid)).json()["top_percent"] == 100.0
    assert (await rig.get("hourly/score_at_percentile", period_id=pid, p=50)).json()["entry"]["member"] == "m3"
    digest = (await rig.get("hourly/digest", period_id=pid)).json()
    assert digest["period_id"] == pid and digest["closed"] is True and digest["size"] == 1
    # and over the WebSocket, through the client
    standing = await rig.client.rank("b", "hourly", "m3", period_id=pid)
    assert standing.entry is not None and standing.entry.score == 4
    assert (await rig.client.top("b", "hourly", period_id=pid)).closed
    assert (await rig.client.around("b", "hourly", rank=1, period_id=pid)).entries[0].member == "m3"
    assert (await rig.client.percentile("b", "hourly", "m3", period_id=pid)).top_percent == 100.0
    at = await rig.client.score_at_percentile("b", "hourly", 100, period_id=pid)
    assert at.entry is not None and at.entry.member == "m3"
    missing = await rig.client.rank("b", "hourly", "m4", period_id=pid)  # not in that table: a state
    assert missing.entry is None and missing.period_id == pid and missing.closed


async def test_an_empty_retained_window_answers_size_0(rig: Rig) -> None:
    await five_hours(rig)
    body = (await rig.get("daily/top", period_id="2027-01-03")).json()
    assert body["size"] == 0 and body["entries"] == [] and body["closed"] is True
    assert (await rig.get("daily/top", period_id="2027-01-02")).json()["size"] == 0  # second closed one
    assert (await rig.get("weekly/top", period_id="2026-W53")).json()["size"] == 0


@pytest.mark.parametrize(
    ("period", "period_id"),
    [("hourly", "2027-01-04T01"), ("hourly", "2027-01-04T00"), ("hourly", "2026-12-01T00"), ("daily", "2027-01-01"),
     ("weekly", "2026-W51")],
)
async def test_older_tables_are_not_retained(rig: Rig, period: str, period_id: str) -> None:
    await five_hours(rig)
    for path in ("top", "members/m1", "digest", "percentile/m1"):
        answer = await rig.get(f"{period}/{path}", period_id=period_id)
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "period_not_retained", (path, answer.text)
    with pytest.raises(QueryFailed) as ws:
        await rig.client.top("b", period, period_id=period_id)
    assert ws.value.code == "period_not_retained"


@pytest.mark.parametrize(
    ("period", "period_id"),
    [
        ("hourly", "2027-01-04T05"),  # the next hour: future
        ("hourly", "2030-01-01T00"),
        ("daily", "2027-01-05"),
        ("weekly", "2027-W02"),
        ("hourly", "2027-01-04T4"),  # malformed
        ("hourly", "2027-01-04"),
        ("hourly", "2027-01-04T24"),
        ("daily", "2027-13-01"),
        ("daily", "2027-02-30"),
        ("weekly", "2027-W54"),
        ("daily", "banana"),
        ("daily", ""),
        ("alltime", "2027"),
    ],
)
async def test_malformed_or_future_ids_are_unknown_periods(rig: Rig, period: str, period_id: str) -> None:
    await five_hours(rig)
    answer = await rig.get(f"{period}/top", period_id=period_id)
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "unknown_period", answer.text


async def test_periods_lists_open_and_retained_tables_newest_first(rig: Rig) -> None:
    await five_hours(rig)
    listing = (await rig.get("hourly/periods")).json()
    assert listing["board"] == "b" and listing["period"] == "hourly"
    assert [(p["period_id"], p["closed"], p["size"], p["disputes"]) for p in listing["periods"]] == [
        ("2027-01-04T04", False, 1, 0),
        ("2027-01-04T03", True, 1, 0),
        ("2027-01-04T02", True, 1, 0),
    ]
    first, second, _ = listing["periods"]
    assert first["start"] == "2027-01-04T04:00:00.000Z" and first["end"] == "2027-01-04T05:00:00.000Z"
    assert first["closed_at"] is None
    assert second["closed_at"] == "2027-01-04T04:01:00.000Z"  # end + close_grace_seconds
    alltime = (await rig.get("alltime/periods")).json()["periods"]
    assert [(p["period_id"], p["start"], p["end"], p["size"]) for p in alltime] == [("alltime", None, None, 5)]


async def test_a_window_in_its_grace_is_listed_open_and_still_takes_events(rig: Rig) -> None:
    await five_hours(rig)
    await rig.clock(D1 + 5 * HOUR + 30_000)  # 05:00:30: hour 04 closes at 05:01
    listing = (await rig.get("hourly/periods")).json()["periods"]
    assert [(p["period_id"], p["closed"]) for p in listing] == [
        ("2027-01-04T05", False), ("2027-01-04T04", False), ("2027-01-04T03", True), ("2027-01-04T02", True),
    ]
    late = await rig.client.submit("b", "late", 9, occurred_at=D1 + 4 * HOUR + 59 * MIN)
    assert late.recorded
    assert (await rig.get("hourly/members/late", period_id="2027-01-04T04")).status_code == 200
    await rig.clock(D1 + 5 * HOUR + MIN)  # 05:01: closed now, and 02 falls out of the retention
    listing = (await rig.get("hourly/periods")).json()["periods"]
    assert [(p["period_id"], p["closed"]) for p in listing] == [
        ("2027-01-04T05", False), ("2027-01-04T04", True), ("2027-01-04T03", True),
    ]
    assert (await rig.get("hourly/top", period_id="2027-01-04T02")).json()["error"]["code"] == "period_not_retained"


async def test_an_event_for_a_closed_hour_still_counts_for_the_open_day(rig: Rig) -> None:
    await five_hours(rig)
    result = await rig.client.submit("b", "tardy", 99, occurred_at=D1 + 2 * HOUR + MIN)
    assert result.recorded
    assert (await rig.get("hourly/top", period_id="2027-01-04T02")).json()["size"] == 1  # closed: unchanged
    assert (await rig.get("daily/members/tardy")).json()["entry"]["rank"] == 1
    await rig.clock(D1 + 2 * DAY)  # the day has closed too: only the week and alltime take it now
    assert (await rig.client.submit("b", "tardier", 100, occurred_at=D1 + 2 * HOUR + MIN)).recorded
    assert (await rig.get("daily/members/tardier", period_id="2027-01-04")).status_code == 404
    assert (await rig.get("weekly/members/tardier")).json()["entry"]["rank"] == 1


async def test_an_event_whose_every_window_is_closed_is_rejected_period_closed(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"h": {"periods": ["hourly", "daily"], "keep_closed": 2}})
    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        async with ArenaClient(server.url, token_for("gs")) as client:
            await http.post("/v1/_test/clock", json={"now_ms": D1 + 2 * DAY})
            [late] = await client.submit_many([ScoreEvent("h", "m", 1, D1 + HOUR)])
    assert (late.status.value, late.reason) == ("rejected", "period_closed")


async def test_periods_counts_disputes_per_window(rig: Rig) -> None:
    await five_hours(rig)
    answer = await rig.http.post("/v1/boards/b/void", json={"idempotency_key": "h3", "reason": "cheat"},
                                 headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert answer.status_code == 200, answer.text
    hourly = {p["period_id"]: p for p in (await rig.get("hourly/periods")).json()["periods"]}
    assert {pid: p["disputes"] for pid, p in hourly.items()} == {"2027-01-04T04": 0, "2027-01-04T03": 1, "2027-01-04T02": 0}
    assert hourly["2027-01-04T03"]["size"] == 0  # the closed table changed
    daily = (await rig.get("daily/periods")).json()["periods"]
    assert [(p["period_id"], p["disputes"], p["size"]) for p in daily][0] == ("2027-01-04", 1, 4)

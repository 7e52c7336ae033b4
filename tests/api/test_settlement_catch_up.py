"""What a stop or a crash leaves undone in settlements, done by the next load, through real
servers on both journal backends:

- a crash between a void's commit and its revision's: the next start journals the revision the
  table's awards call for (revision 1, with its changes), and the feed tells it;
- windows with prizes that no event reached while the server was down (a stop across several
  days): each retained one the board's life spans is closed and settled with no award at the next
  start, loaded or activated on demand; windows before the board's first close are not."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from arena.client import ArenaClient, ScoreEvent
from arena.config import Config, JournalSettings
from arena.engine.records import VoidRecord
from arena.journal import journal_backend
from support import prize_oracle
from support.prized import DAY, MIN, W1, journaled_settlement
from support.server import ADMIN_TOKEN, InProcessServer, make_config, token_for, until

TIERS: list[dict[str, Any]] = [{"reward": "gold", "ranks": [1, 1]}, {"reward": "silver", "ranks": [2, 3]}]
BOARDS = {"d": {"aggregation": "best", "periods": ["daily"], "keep_closed": 7, "prizes": {"daily": TIERS}}}
SETTLEMENT = "/v1/boards/d/daily/settlement"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def feed(http: httpx.AsyncClient) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await http.get("/v1/settlements", params={"limit": 1000}, headers=ADMIN)).json()["items"]
    return items


async def first_day(config: Config) -> None:
    """Five members on 2027-01-04, and its close: revision 0 journaled; then a graceful stop."""
    async with InProcessServer(config, now_ms=W1 + 60 * MIN) as server, httpx.AsyncClient(base_url=server.url) as http:
        async with ArenaClient(server.url, token_for("gs")) as client:
            events = [ScoreEvent("d", f"m{i}", 10 * i, W1 + i, idempotency_key=f"k{i}") for i in range(5)]
            assert all(r.recorded for r in await client.submit_many(events))
        assert (await http.post("/v1/_test/clock", json={"now_ms": W1 + DAY + MIN})).status_code == 200
        body = await journaled_settlement(http, SETTLEMENT, "2027-01-04")
        assert [a["member"] for a in body["awards"]] == ["m4", "m3", "m2"]


async def test_a_void_journaled_without_its_revision_is_revised_at_the_next_start(
    tmp_path: Path, served_journal: JournalSettings
) -> None:
    config = make_config(tmp_path / "data", BOARDS, journal=served_journal, idle_unload_seconds=0)
    await first_day(config)
    # the crash: the void of the winner's event is journaled, its revision is not
    backend = journal_backend(config)
    try:
        journal = await backend.open(config.boards["d"])
        target = await journal.event_by_key("k4")
        assert target is not None
        await journal.append([VoidRecord(journal.last_seq + 1, target.seq, "k4", "cheat", "ops", W1 + DAY + 2 * MIN)])
        await journal.close()
    finally:
        await backend.close()
    async with InProcessServer(config, now_ms=W1 + DAY + 3 * MIN) as server, httpx.AsyncClient(base_url=server.url) as http:
        revised = await journaled_settlement(http, SETTLEMENT, "2027-01-04", revision=1)
        expected = prize_oracle.awards([(f"m{i}", 10 * i) for i in (3, 2, 1, 0)], "desc", TIERS)
        assert (revised["revision"], revised["awards"], revised["sha256"]) == (1, expected, prize_oracle.sha256(expected))
        assert revised["changes"] == [{"member": "m1", "before": None, "after": "silver"},
                                      {"member": "m3", "before": "silver", "after": "gold"},
                                      {"member": "m4", "before": "gold", "after": None}]

        async def told() -> bool:
            return [(i["period_id"], i["revision"]) for i in await feed(http)] == [("2027-01-04", 0), ("2027-01-04", 1)]

        await until(told, "the feed to tell both revisions")
    async with InProcessServer(config, now_ms=W1 + DAY + 4 * MIN) as server, httpx.AsyncClient(base_url=server.url) as http:
        assert (await journaled_settlement(http, SETTLEMENT, "2027-01-04"))["revision"] == 1  # made once: the next start finds it journaled
        assert len(await feed(http)) == 2


@pytest.mark.parametrize("on_demand", [False, True], ids=["loaded", "activated"])
async def test_days_no_event_reached_while_the_server_was_down_settle_with_no_award_at_the_next_start(
    tmp_path: Path, served_journal: JournalSettings, on_demand: bool
) -> None:
    config = make_config(tmp_path / "data", BOARDS, journal=served_journal, idle_unload_seconds=0)
    await first_day(config)  # the board's first close: 2027-01-04
    # down until 2027-01-09 01:00: 01-05 .. 01-08 closed without the server, no event reached them
    later = replace(config, server=replace(config.server, idle_unload_seconds=30 if on_demand else 0))
    async with InProcessServer(later, now_ms=W1 + 5 * DAY + 60 * MIN) as server, httpx.AsyncClient(base_url=server.url) as http:
        days = ["2027-01-05", "2027-01-06", "2027-01-07", "2027-01-08"]

        async def told() -> bool:  # without a query: a dormant board is activated to settle them
            return [i["period_id"] for i in await feed(http)] == ["2027-01-04", *days]

        await until(told, "the missed days to settle")
        for day in days:
            body = await journaled_settlement(http, SETTLEMENT, day)
            assert (body["revision"], body["size"], body["awards"], body["sha256"]) == (0, 0, [], prize_oracle.sha256([]))
            assert body["closed"] is True
        # the board's life starts with its first closed day: the retained days before it are not settled
        for day in ("2027-01-02", "2027-01-03"):
            answer = await http.get(SETTLEMENT, params={"period_id": day})
            assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_settled", answer.text
    async with InProcessServer(config, now_ms=W1 + 5 * DAY + 61 * MIN) as server, httpx.AsyncClient(base_url=server.url) as http:
        await until(lambda: server.arena is not None and server.arena.ready, "ready")
        assert len(await feed(http)) == 5  # closed once: the next start finds them journaled

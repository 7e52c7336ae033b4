"""Property, through a real server on both journal backends: after random events and voids, a
table's journaled settlement revisions are the oracle's (`support.prize_oracle`) awards of its
final standings at its close, and after each later void either the same revision (no award
changed) or the next one, with the oracle's awards and `changes`."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arena.client import ArenaClient, ScoreEvent
from arena.config import JournalSettings
from support import prize_oracle
from support.prized import DAY, MIN, W1, journaled_settlement
from support.server import ADMIN_TOKEN, InProcessServer, make_config, token_for, until

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
MEMBERS = ["ann", "bob", "cyd", "dan", "eve", "fay", "gus"]

tiers = st.lists(st.one_of(
    st.tuples(st.integers(1, 5), st.integers(0, 3)).map(lambda t: {"ranks": [t[0], t[0] + t[1]]}),
    st.sampled_from([10, 12.5, 33.3, 50, 100]).map(lambda p: {"top_percent": p}),
    st.integers(0, 20).map(lambda s: {"score": s}),
), min_size=1, max_size=3).map(lambda ts: [{"reward": f"r{i}", **t} for i, t in enumerate(ts)])
definitions = st.fixed_dictionaries({
    "aggregation": st.sampled_from(["best", "sum", "latest"]),
    "order": st.sampled_from(["desc", "asc"]),
    "tie": st.sampled_from(["earliest", "latest"]),
})
events = st.lists(st.tuples(st.sampled_from(MEMBERS), st.integers(0, 20), st.integers(0, 600)), min_size=0, max_size=25)


class Rig:
    def __init__(self, http: httpx.AsyncClient, client: ArenaClient) -> None:
        self.http = http
        self.client = client
        self.boards = itertools.count()

    async def settlement(self, board: str, period_id: str) -> dict[str, Any]:
        answer = await self.http.get(f"/v1/boards/{board}/daily/settlement", params={"period_id": period_id})
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    async def oracle(self, board: str, period_id: str, order: str, prizes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        top = (await self.http.get(f"/v1/boards/{board}/daily/top", params={"period_id": period_id, "limit": 1000})).json()
        return prize_oracle.awards([(e["member"], e["score"]) for e in top["entries"]], order, prizes)

    async def void(self, board: str, key: str) -> None:
        answer = await self.http.post(f"/v1/boards/{board}/void", json={"idempotency_key": key, "reason": "property"},
                                      headers=ADMIN)
        assert answer.status_code == 200, answer.text


@pytest.fixture
async def rig(tmp_path: Path, served_journal: JournalSettings) -> AsyncIterator[Rig]:
    config = make_config(tmp_path, {}, {"gs": ["*"]}, journal=served_journal)
    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        async with ArenaClient(server.url, token_for("gs")) as client:
            yield Rig(http, client)


def changes(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    was = {a["member"]: a["reward"] for a in before}
    now = {a["member"]: a["reward"] for a in after}
    return [{"member": m, "before": was.get(m), "after": now.get(m)} for m in sorted(was.keys() | now.keys())
            if was.get(m) != now.get(m)]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(definitions, tiers, events, st.data())
async def test_settlement_revisions_are_the_oracles_awards_at_each_close_and_void(
    rig: Rig, definition: dict[str, Any], prizes: list[dict[str, Any]], sent: list[tuple[str, int, int]], data: st.DataObject
) -> None:
    n = next(rig.boards)
    board, day = f"s{n}", W1 + 2 * n * DAY
    period_id = datetime.fromtimestamp(day / 1000, UTC).date().isoformat()
    assert (await rig.http.post("/v1/_test/clock", json={"now_ms": day + 12 * 60 * MIN})).status_code == 200
    created = await rig.http.put(f"/v1/boards/{board}", json={**definition, "periods": ["daily"],
                                                               "prizes": {"daily": prizes}}, headers=ADMIN)
    assert created.status_code == 201, created.text

    async def serving() -> bool:  # activated: its current table exists, so it closes even if no event came
        return (await rig.http.get(f"/v1/boards/{board}/daily/top")).status_code == 200

    await until(serving, f"{board} to serve")
    keys = [f"{board}-{i}" for i in range(len(sent))]
    results = await rig.client.submit_many([ScoreEvent(board, m, v, day + minute * MIN, key)
                                            for (m, v, minute), key in zip(sent, keys, strict=True)])
    assert all(r.recorded for r in results)
    before = data.draw(st.sets(st.sampled_from(keys)) if keys else st.just(set[str]()), "voids before the close")
    for key in sorted(before):
        await rig.void(board, key)
    assert (await rig.http.post("/v1/_test/clock", json={"now_ms": day + DAY + 2 * MIN})).status_code == 200

    await journaled_settlement(rig.http, f"/v1/boards/{board}/daily/settlement", period_id)
    order = definition["order"]
    expected = await rig.oracle(board, period_id, order, prizes)
    body = await rig.settlement(board, period_id)
    assert (body["revision"], body["awards"], body["sha256"]) == (0, expected, prize_oracle.sha256(expected))
    assert body["tiers"] == prizes and body["closed"]
    revision = 0
    after = data.draw(st.lists(st.sampled_from(keys), unique=True) if keys else st.just(list[str]()), "voids after")
    for key in after:
        await rig.void(board, key)
        awards = await rig.oracle(board, period_id, order, prizes)
        body = await rig.settlement(board, period_id)
        if awards != expected:
            revision += 1
            assert body["changes"] == changes(expected, awards)
        expected = awards
        assert (body["revision"], body["awards"], body["sha256"]) == (revision, awards, prize_oracle.sha256(awards))
        assert body["tiers"] == prizes

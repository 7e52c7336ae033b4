"""Webhooks through real servers on both journal backends and a real receiver: every settlement
revision reaches the receiver at least once, signed, one body per ``Arena-Delivery``, a table's
revisions in order, across a receiver that fails, hangs and is down; failed deliveries, the admin
routes (list by state and by table, retry, test) and the rotation of the secret."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import httpx
import orjson
import pytest

from arena.client import ArenaClient, ScoreEvent
from arena.config import Config, JournalSettings, Webhook
from support.prized import DAY, W1
from support.receiver import Receiver
from support.server import ADMIN_TOKEN, InProcessServer, make_config, token_for, until

BOARDS = {
    "hs": {"aggregation": "best", "periods": ["alltime", "weekly"], "prizes": {"weekly": [{"reward": "gold", "ranks": [1, 2]}]}},
    "other": {"aggregation": "best", "periods": ["weekly"], "prizes": {"weekly": [{"reward": "tin", "ranks": [1, 1]}]}},
}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SECRET_ENV = "ARENA_TEST_WEBHOOK_SECRET"
SECRET = "s3cret"


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.stop()


def config_for(tmp_path: Path, journal: JournalSettings, receiver: Receiver, **hook: object) -> Config:
    webhook = Webhook("rewards", receiver.url, SECRET_ENV, ("hs",), **hook)  # type: ignore[arg-type]
    return make_config(tmp_path / "data", BOARDS, journal=journal, webhooks=[webhook],
                       webhook_backoff_seconds=0.05, webhook_timeout_seconds=0.5)


async def settle(server: InProcessServer, void: bool = True) -> None:
    """Events on both boards' week, its close (revision 0), and a void that changes an award (revision 1)."""
    async with ArenaClient(server.url, token_for("gs")) as client:
        results = await client.submit_many(
            [ScoreEvent(board, f"m{i}", 10 * i, W1 + i, idempotency_key=f"{board}{i}") for board in BOARDS for i in range(5)])
        assert all(r.recorded for r in results)
    async with httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.post("/v1/_test/clock", json={"now_ms": W1 + 8 * DAY})).status_code == 200
        if void:
            await until_settled(http, 0)
            answer = await http.post("/v1/boards/hs/void", json={"idempotency_key": "hs4", "reason": "cheat"}, headers=ADMIN)
            assert answer.status_code == 200, answer.text


async def until_settled(http: httpx.AsyncClient, revision: int) -> None:
    async def settled() -> bool:
        answer = await http.get("/v1/boards/hs/weekly/settlement", params={"period_id": "2027-W01"})
        return answer.status_code == 200 and answer.json()["revision"] == revision

    await until(settled, f"revision {revision} of hs's week")


async def deliveries(http: httpx.AsyncClient, **params: str) -> list[dict[str, object]]:
    answer = await http.get("/v1/webhooks/rewards/deliveries", params=params, headers=ADMIN)
    assert answer.status_code == 200, answer.text
    listed: list[dict[str, object]] = answer.json()["deliveries"]
    return listed


REVISIONS = ["hs/weekly/2027-W01/*/0", "hs/weekly/2027-W01/*/1"]


async def test_a_failing_hanging_receiver_gets_every_revision_signed_in_order(
    tmp_path: Path, served_journal: JournalSettings, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    receiver.fail_first = 3
    config = config_for(tmp_path, served_journal, receiver)
    server = InProcessServer(config, now_ms=W1 + DAY)
    await server.start()
    try:
        await settle(server)
        await until(lambda: all(d in receiver.delivered() for d in REVISIONS), "both revisions delivered")
        receiver.check(SECRET)
        # r+1 waits until r is delivered: nothing of revision 1 arrived before revision 0's first 2xx
        ids = [r.delivery for r in receiver.received]
        first_ok = next(i for i, r in enumerate(receiver.received) if r.delivery == REVISIONS[0] and r.status == 200)
        assert REVISIONS[1] not in ids[:first_ok]
        assert set(ids) == set(REVISIONS)  # the board "other" is not this webhook's
        assert ids.count(REVISIONS[0]) == 4  # three 500s, then 200
        async with httpx.AsyncClient(base_url=server.url) as http:
            async def saved() -> bool:  # the receiver's 2xx is seen before the outbox records it
                return len(await deliveries(http, state="delivered")) == 2

            await until(saved, "both deliveries recorded as delivered")
            body = orjson.loads(receiver.delivered()[REVISIONS[1]][0].body)
            query = (await http.get("/v1/boards/hs/weekly/settlement", params={"period_id": "2027-W01", "limit": 1000})).json()
            assert {k: body[k] for k in ("board", "period", "period_id", "revision", "sha256", "awards", "changes")} == {
                k: query[k] for k in ("board", "period", "period_id", "revision", "sha256", "awards", "changes")}
            listed = await deliveries(http, state="delivered")
            assert [(d["delivery"], d["attempts"], d["last_error"]) for d in listed] == [
                (REVISIONS[0], 4, None), (REVISIONS[1], 1, None)]
            assert (await deliveries(http, state="pending")) == []
            hooks = (await http.get("/v1/webhooks", headers=ADMIN)).json()["webhooks"]
            assert hooks == [{"id": "rewards", "url": receiver.url, "boards": ["hs"], "max_age_hours": 72.0,
                              "deliveries": {"pending": 0, "delivered": 2, "failed": 0}}]
            metrics = (await http.get("/metrics")).text
            assert 'arena_webhook_deliveries_total{outcome="error",webhook="rewards"} 3.0' in metrics
            assert 'arena_webhook_deliveries_total{outcome="delivered",webhook="rewards"} 2.0' in metrics

        # a receiver that hangs: the attempt times out and is tried again; then it is down; then back
        receiver.answer = 0
        async with httpx.AsyncClient(base_url=server.url) as http:
            retried = await http.post(f"/v1/webhooks/rewards/deliveries/{REVISIONS[1]}/retry", headers=ADMIN)
            assert retried.status_code == 200 and retried.json()["state"] == "pending"

            async def timed_out() -> bool:
                return any(d["last_error"] == "timed out waiting for the receiver" for d in await deliveries(http, state="pending"))

            await until(timed_out, "an attempt to time out")
            await receiver.stop()

            async def refused() -> bool:
                pending = await deliveries(http, state="pending")
                return bool(pending) and "timed out" not in str(pending[0]["last_error"])

            await until(refused, "an attempt refused by a receiver that is down")
            receiver.answer = 200
            await receiver.start()
            await until(lambda: len(receiver.delivered()[REVISIONS[1]]) == 2, "revision 1 delivered again")
            receiver.check(SECRET)
    finally:
        await server.stop()


async def test_failed_after_max_age_then_retried_and_the_test_route(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, f"new-secret,{SECRET}")  # a rotation: both secrets sign
    receiver.answer = 500
    config = config_for(tmp_path, JournalSettings(), receiver, max_age_hours=0.5 / 3600)
    async with InProcessServer(config, now_ms=W1 + DAY) as server, httpx.AsyncClient(base_url=server.url) as http:
        await settle(server, void=False)

        async def failed() -> bool:
            return len(await deliveries(http, state="failed")) == 1

        await until(failed, "the delivery to fail past its max age")
        (gone,) = await deliveries(http, state="failed")
        assert gone["delivery"] == REVISIONS[0] and gone["last_error"] == "HTTP 500: no" and int(str(gone["attempts"])) >= 1
        assert 'arena_webhook_deliveries_total{outcome="failed",webhook="rewards"} 1.0' in (await http.get("/metrics")).text
        receiver.check("new-secret")
        receiver.check(SECRET)
        assert not any(r.headers["arena-signature"].count("v1=") != 2 for r in receiver.received)

        receiver.answer = 200
        retried = await http.post(f"/v1/webhooks/rewards/deliveries/{REVISIONS[0]}/retry", headers=ADMIN)
        assert retried.status_code == 200 and retried.json()["delivery"] == REVISIONS[0]
        await until(lambda: REVISIONS[0] in receiver.delivered(), "the retried delivery delivered")

        tested = await http.post("/v1/webhooks/rewards/test", headers=ADMIN)
        assert tested.status_code == 200 and tested.json()["delivered"] is True
        test_delivery = tested.json()["delivery"]
        assert [r for r in receiver.received if r.delivery == test_delivery][0].body.startswith(b'{"test":true')
        receiver.check(SECRET)

        assert (await http.post("/v1/webhooks/rewards/test")).status_code == 401
        assert (await http.post("/v1/webhooks/nope/test", headers=ADMIN)).json()["error"]["code"] == "unknown_webhook"
        missing = await http.post("/v1/webhooks/rewards/deliveries/hs/weekly/x/*/9/retry", headers=ADMIN)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_delivery"
        bad = await http.get("/v1/webhooks/rewards/deliveries", params={"state": "lost"}, headers=ADMIN)
        assert bad.status_code == 400


async def test_the_deliveries_of_one_table_by_board_period_period_id_and_partition(
    tmp_path: Path, served_journal: JournalSettings, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the console asks for one settled table: a webhook of both boards has three deliveries
    (hs's week, revisions 0 and 1; other's week, revision 0); each filter narrows the listing."""
    monkeypatch.setenv(SECRET_ENV, SECRET)
    config = replace(config_for(tmp_path, served_journal, receiver),
                     webhooks=(Webhook("rewards", receiver.url, SECRET_ENV, ("hs", "other")),))
    async with InProcessServer(config, now_ms=W1 + DAY) as server, httpx.AsyncClient(base_url=server.url) as http:
        await settle(server)
        other = "other/weekly/2027-W01/*/0"
        await until(lambda: {*REVISIONS, other} <= set(receiver.delivered()), "the three revisions delivered")

        async def listed(**params: str) -> list[str]:
            return [str(d["delivery"]) for d in await deliveries(http, **params)]

        async def recorded() -> bool:
            return len(await listed(state="delivered")) == 3

        await until(recorded, "the three deliveries recorded as delivered")
        week = {"period": "weekly", "period_id": "2027-W01"}
        assert await listed(board="hs", **week, partition="*") == REVISIONS
        assert await listed(board="other", **week) == [other]
        assert sorted(await listed(**week)) == sorted([*REVISIONS, other])
        assert await listed(board="hs", state="delivered", limit="1") == REVISIONS[:1]
        assert await listed(board="hs", state="pending") == []
        assert await listed(board="hs", period_id="2027-W02") == []
        assert await listed(board="hs", partition="eu") == []
        assert await listed(board="nope") == []


async def test_a_webhook_added_later_gets_only_what_is_journaled_after(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    config = config_for(tmp_path, JournalSettings(), receiver)
    without = replace(config, webhooks=())
    server = InProcessServer(without, now_ms=W1 + DAY)
    await server.start()
    try:
        await settle(server, void=False)
        async with httpx.AsyncClient(base_url=server.url) as http:
            await until_settled(http, 0)
    finally:
        await server.stop()
    server = InProcessServer(config, now_ms=W1 + 8 * DAY)
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url) as http:
            async def started() -> bool:
                hooks = (await http.get("/v1/webhooks", headers=ADMIN)).json()["webhooks"]
                return bool(hooks)

            await until(started, "the webhook listed")
            answer = await http.post("/v1/boards/hs/void", json={"idempotency_key": "hs4", "reason": "cheat"}, headers=ADMIN)
            assert answer.status_code == 200
            await until(lambda: REVISIONS[1] in receiver.delivered(), "revision 1 delivered")
            assert REVISIONS[0] not in receiver.delivered()
    finally:
        await server.stop()


async def test_a_revision_of_more_than_ten_thousand_awards_is_sent_in_pages(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    boards = {"big": {"aggregation": "best", "periods": ["weekly"], "prizes": {"weekly": [{"reward": "token", "top_percent": 100}]}}}
    config = make_config(tmp_path / "data", boards, webhooks=[Webhook("rewards", receiver.url, SECRET_ENV)],
                         webhook_backoff_seconds=0.05, webhook_timeout_seconds=5)
    async with InProcessServer(config, now_ms=W1 + DAY) as server:
        async with ArenaClient(server.url, token_for("gs")) as client:
            results = await client.submit_many([ScoreEvent("big", f"m{i:05}", i, W1 + i) for i in range(10_001)])
            assert all(r.recorded for r in results)
        async with httpx.AsyncClient(base_url=server.url) as http:
            assert (await http.post("/v1/_test/clock", json={"now_ms": W1 + 8 * DAY})).status_code == 200
        pages = ["big/weekly/2027-W01/*/0/1", "big/weekly/2027-W01/*/0/2"]
        await until(lambda: set(receiver.delivered()) == set(pages), "both pages delivered")
        receiver.check(SECRET)
        first, second = (orjson.loads(receiver.delivered()[page][0].body) for page in pages)
        assert (first["page"], first["awards_total"], len(first["awards"]), first["awards"][0]["rank"]) == (1, 10_001, 10_000, 1)
        assert (second["page"], len(second["awards"]), second["awards"][0]["rank"]) == (2, 1, 10_001)
        assert first["sha256"] == second["sha256"]
        async with httpx.AsyncClient(base_url=server.url) as http:
            async def none_pending() -> bool:
                return 'arena_webhook_pending{webhook="rewards"} 0.0' in (await http.get("/metrics")).text

            await until(none_pending, "arena_webhook_pending to say none is pending")

"""A public reader is a stranger (DESIGN.md "Live views"): strict views with one identity, the
per-connection budgets of view entries and members, and view evaluation within a budget per
push interval, through a real server on the public `/v1/live`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import websockets

from support.server import Client, InProcessServer, event, make_config, now_ms, token_for, until

BOARDS = {"b": {"aggregation": "best", "periods": ["alltime", "daily"]}}
PUSH_MS = 50
TOP: dict[str, Any] = {"op": "top", "board": "b", "period": "alltime"}



async def _public(server: InProcessServer) -> Client:
    return Client(await websockets.connect(server.url.replace("http", "ws") + "/v1/live", max_size=2**24))


async def _subscribe(client: Client, view: object) -> dict[str, Any]:
    return await client.request({"op": "subscribe", "view": view})


def _updates(client: Client, sub: str) -> list[dict[str, Any]]:
    return [f for f in client.unmatched if f.get("op") == "update" and f.get("sub") == sub]


pytestmark = pytest.mark.server(BOARDS, push_interval_ms=PUSH_MS, max_view_entries=25, max_view_members=3)

@pytest.mark.parametrize("view", [
    {**TOP, "junk": "x" * 600_000},  # DoS 5's view: any unknown field, whatever its size
    {**TOP, "id": 7},
    {**TOP, "member": "ann"},  # a field of another op
    {**TOP, "offset": None},  # as the query: an offset must be an integer
    {"op": "rank", "board": "b", "period": "alltime", "member": "ann", "limit": 10},
    {"op": "rank", "board": "b", "period": "alltime", "member": "m" * 129},  # longer than any member
    {"op": "members", "board": "b", "period": "alltime", "members": ["ann", "m" * 129]},
])
async def test_a_view_with_a_field_its_query_does_not_have_is_invalid(server: InProcessServer, view: dict[str, Any]) -> None:
    public = await _public(server)
    answer = await _subscribe(public, view)
    assert answer["op"] == "error" and answer["code"] == "invalid_request", answer
    assert len(answer["message"]) < 300  # the junk is not echoed
    assert server.arena is not None and server.arena.live is not None and not server.arena.live.views
    await public.close()


async def test_views_equal_after_defaults_are_one_view_evaluated_once_per_change(tmp_path: Path) -> None:
    async with InProcessServer(make_config(tmp_path / "data", BOARDS, push_interval_ms=PUSH_MS)) as server:
        await _one_view_after_defaults(server)


async def _one_view_after_defaults(server: InProcessServer) -> None:
    assert server.arena is not None and server.arena.live is not None
    live = server.arena.live
    public = await _public(server)
    same = [TOP, {**TOP, "limit": 10}, {**TOP, "offset": 0, "limit": 10}, {**TOP, "period_id": None}]
    subs = [(await _subscribe(public, view))["sub"] for view in same]
    around = [{"op": "around", "board": "b", "period": "alltime", "member": "ann"},
              {"op": "around", "board": "b", "period": "alltime", "member": "ann", "radius": 5, "rank": None}]
    subs += [(await _subscribe(public, view))["sub"] for view in around[:1]]
    assert len(live.views) == 2
    writer = await Client.connect(server.ws_url, token_for("gs"))
    before = live.evaluations
    await writer.submit([event("b", "ann", 3, now_ms(), "k")])
    await until(lambda: all(any(u["seq"] == 1 for u in _updates(public, s)) for s in subs), "every subscription's update")
    assert live.evaluations - before == 2  # one per view, not one per subscription
    await writer.close()
    await public.close()


def _too_many(answer: dict[str, Any], key: str) -> bool:
    return answer["op"] == "error" and answer["code"] == "too_many_subscriptions" and key in answer["message"]


async def test_a_connection_s_views_ask_at_most_their_budgets_and_unsubscribing_gives_them_back(
    server: InProcessServer,
) -> None:
    public = await _public(server)  # max_view_entries=25, max_view_members=3 here
    top = (await _subscribe(public, {**TOP, "limit": 20}))["sub"]  # 20 entries
    friends = (await _subscribe(public, {"op": "members", "board": "b", "period": "alltime",
                                         "members": ["ann", "bob", "cy"]}))["sub"]  # 23 entries, 3 members
    assert _too_many(await _subscribe(public, {"op": "rank", "board": "b", "period": "alltime", "member": "dee"}),
                     "max_view_members")
    assert _too_many(await _subscribe(public, {**TOP, "limit": 3}), "max_view_entries")
    assert _too_many(await _subscribe(public, {"op": "around", "board": "b", "period": "alltime", "rank": 1}),
                     "max_view_entries")  # the default radius 5: 11 entries
    other = await _public(server)  # the budgets are per connection
    assert (await _subscribe(other, {**TOP, "limit": 25}))["op"] == "subscribed"
    await other.close()
    assert (await public.request({"op": "unsubscribe", "sub": friends}))["op"] == "unsubscribed"
    assert (await _subscribe(public, {"op": "rank", "board": "b", "period": "alltime", "member": "dee"}))["op"] == "subscribed"
    assert (await _subscribe(public, {**TOP, "limit": 4}))["op"] == "subscribed"  # 25 entries again
    assert _too_many(await _subscribe(public, {"op": "score_at_percentile", "board": "b", "period": "alltime", "p": 50}),
                     "max_view_entries")
    assert (await public.request({"op": "unsubscribe", "sub": top}))["op"] == "unsubscribed"
    assert (await _subscribe(public, {"op": "around", "board": "b", "period": "alltime", "rank": 1}))["op"] == "subscribed"
    await public.close()


async def test_a_reader_at_its_limits_on_a_changing_board_gets_views_evaluated_within_the_budget(tmp_path: Path) -> None:
    """DoS 4, the deterministic part: one /v1/live connection holds ten distinct `members` views
    of a thousand members each (both budgets reached) while every push interval changes them
    all. The work evaluated in any budget window never exceeds the registry's budget, a
    bystander's small view keeps getting updates meanwhile, and once the writes stop every view
    ends on the plain query's answer. (The ingest ratio is measured by `python -m loadtest live
    --hostile`.)"""
    config = make_config(tmp_path / "data", BOARDS, push_interval_ms=PUSH_MS)
    async with InProcessServer(config) as server:
        assert server.arena is not None and server.arena.live is not None
        live = server.arena.live
        writer = await Client.connect(server.ws_url, token_for("gs"))
        names = [f"p{i:05d}" for i in range(10_000)]
        now = now_ms()
        for start in range(0, len(names), 1000):
            await writer.submit([event("b", n, i, now, f"fill-{n}") for i, n in enumerate(names[start:start + 1000])])
        hostile = await _public(server)
        views = [{"op": "members", "board": "b", "period": "alltime", "members": names[k * 1000:(k + 1) * 1000]}
                 for k in range(10)]
        subs = [(await _subscribe(hostile, view))["sub"] for view in views]
        assert _too_many(await _subscribe(hostile, {"op": "rank", "board": "b", "period": "alltime", "member": "x"}),
                         "max_view_entries")
        bystander = await _public(server)
        small = (await _subscribe(bystander, {**TOP, "limit": 3}))["sub"]
        rounds = 0
        while rounds < 40:  # every round moves a member of each view, and the top 3
            seen = len(_updates(bystander, small))
            await writer.submit([event("b", names[k * 1000 + rounds], 10_000 + 100 * rounds + k, now, f"r{rounds}-{k}")
                                 for k in range(10)])
            await until(lambda s=seen: len(_updates(bystander, small)) > s, "the bystander's update")  # type: ignore[misc]
            rounds += 1
        assert live.budget < 2 * sum(len(v["members"]) for v in views)  # the budget binds here: a view's cost is about 2 per member
        assert 0 < live.busiest <= live.budget
        for sub, view in zip(subs, views, strict=True):
            plain = {k: v for k, v in (await writer.request(view)).items() if k not in ("op", "id", "seq")}
            await until(lambda s=sub, p=plain: {k: v for k, v in _updates(hostile, s)[-1].items()  # type: ignore[misc]
                                                if k not in ("op", "sub", "seq")} == p, "the view's final answer", 10)
        await asyncio.gather(hostile.close(), bystander.close(), writer.close())

"""Forwarding between nodes through real servers: two in-process nodes on sqlite journals of their
own, whose boards the test moves as an ownership loop would (directory and supervisor), so that
each serves some boards and forwards the others. The ownership loop itself, on PostgreSQL, is in
`test_cluster_forwarding`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from arena.api import forward
from arena.api.forward import Forwarding
from arena.board.state import BoardEvent
from arena.cluster.directory import Directory, Owner
from arena.cluster.peer.client import Peers
from arena.cluster.peer.protocol import PATH, Answer, Answered, Ask, Http, Numbered, Submit, serialise
from arena.config import ClusterSettings
from arena.engine.events import Event, Status
from support.faults import parse_metric
from support.server import ADMIN_TOKEN, Client, InProcessServer, event, make_config, now_ms, statuses, token_for, until

SECRET = "a-cluster-secret-for-tests"
BOARDS: dict[str, dict[str, Any]] = {"a1": {"aggregation": "sum"}, "a2": {}, "b1": {"aggregation": "sum"}, "lost": {}}
NOW = now_ms()
FRAME_BYTES = 32_768


class Nodes:
    def __init__(self, a: InProcessServer, b: InProcessServer) -> None:
        self.a, self.b = a, b

    async def owners(self, **owners: InProcessServer | None) -> None:
        """Move boards as an ownership loop would: board -> the node serving it (None: ownerless)."""
        for node in (self.a, self.b):
            assert node.arena is not None
            node.arena.directory.renewed(time.monotonic())
        for board, owner in owners.items():
            # the new owner first: a node that forwards to it then finds it serving
            for node in sorted((self.a, self.b), key=lambda n: n is not owner):
                assert node.arena is not None
                directory, supervisor = node.arena.directory, node.arena.supervisor
                if owner is node and not supervisor.serving(board):
                    node.arena.states.move(board, BoardEvent.TAKE)
                    await supervisor.serve(board)
                    assert await supervisor.until_loaded(board)
                directory.set(board, None if owner is None else Owner(node_id(owner), owner.url, 1))
                if owner is not node and supervisor.serving(board):
                    node.arena.states.move(board, BoardEvent.HAND_OFF)
                    await supervisor.hand_off(board)


async def get(url: str) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.get(url)


def node_id(server: InProcessServer) -> str:
    assert server.config.cluster is not None and server.config.cluster.node_id is not None
    return server.config.cluster.node_id


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(node, board) of every wait of a node for a board's owner (`Directory.owner_within`), in order."""
    seen: list[tuple[str, str]] = []
    owner_within = Directory.owner_within

    async def recorded(directory: Directory, board: str, seconds: float, **kwargs: Any) -> Owner | None:
        seen.append((str(directory.node_id), board))
        return await owner_within(directory, board, seconds, **kwargs)

    monkeypatch.setattr(Directory, "owner_within", recorded)
    return seen


@pytest.fixture
async def nodes(tmp_path: Path) -> AsyncIterator[Nodes]:
    def config(name: str) -> Any:
        cluster = ClusterSettings(node_id=name, secret=SECRET, lease_seconds=3600)
        # idle_unload_seconds 0: a board moved here is loaded, as the moves below expect
        return make_config(tmp_path / name, BOARDS, cluster=cluster, max_frame_bytes=FRAME_BYTES, idle_unload_seconds=0)

    async with InProcessServer(config("node-a"), wait_ready=False) as a, \
            InProcessServer(config("node-b"), wait_ready=False) as b:
        pair = Nodes(a, b)
        await pair.owners(a1=a, a2=a, b1=b, lost=None)
        await a.until_ready()
        await b.until_ready()
        yield pair


async def test_the_peer_route_needs_the_cluster_secret(nodes: Nodes, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "arena")
    url = nodes.a.url.replace("http", "ws") + PATH
    for headers in ({}, {"Authorization": "Bearer not-the-secret"}, {"Authorization": SECRET}):
        with pytest.raises(InvalidStatus) as refused:
            await websockets.connect(url, additional_headers=headers)
        assert refused.value.response.status_code == 401
    async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {SECRET}"}):
        pass
    assert "not-the-secret" not in caplog.text and SECRET not in caplog.text


async def test_a_single_node_refuses_every_peer(tmp_path: Path) -> None:
    async with InProcessServer(make_config(tmp_path, BOARDS)) as server:
        with pytest.raises(InvalidStatus) as refused:
            await websockets.connect(server.url.replace("http", "ws") + PATH, additional_headers={"Authorization": "Bearer "})
        assert refused.value.response.status_code == 401


async def test_a_frame_for_boards_of_two_nodes_gets_one_ack_in_event_order(nodes: Nodes) -> None:
    frame = [event("b1", "m1", 5, NOW, "k1"), event("a1", "m1", 7, NOW, "k2"), {"board": "nope"},
             event("b1", "m2", 1, NOW, "k3"), event("a2", "m1", 3, NOW, "k4"), event("b1", "m1", 2, NOW, "k5")]
    for entry in (nodes.a, nodes.b):
        client = await Client.connect(entry.ws_url, token_for("gs"))
        try:
            first = await client.submit(frame)
            again = await client.submit(frame)
        finally:
            await client.close()
        if entry is nodes.a:
            assert statuses(first) == ["accepted", "accepted", "rejected:unknown_board", "accepted", "accepted", "accepted"]
            assert [r.get("idempotency_key") for r in first] == ["k1", "k2", None, "k3", "k4", "k5"]
        else:
            assert statuses(first) == ["duplicate", "duplicate", "rejected:unknown_board", "duplicate", "duplicate", "duplicate"]
        assert statuses(again)[0] == "duplicate"
    for server in (nodes.a, nodes.b):
        async with httpx.AsyncClient(base_url=server.url) as http:
            top = (await http.get("/v1/boards/b1/alltime/top")).json()
            assert [(e["member"], e["score"]) for e in top["entries"]] == [("m1", 7), ("m2", 1)]
            metrics = (await http.get("/metrics")).text
        counted = parse_metric(metrics, "arena_events_total", board="b1", status="accepted", reason="")
        assert counted == (3 if server is nodes.b else 0)  # once, by the owner
    a_metrics = (await get(f"{nodes.a.url}/metrics")).text
    assert parse_metric(a_metrics, "arena_forwarded_total", kind="frames") == 2


async def test_every_query_is_answered_the_same_on_every_node(nodes: Nodes) -> None:
    client = await Client.connect(nodes.b.ws_url, token_for("gs"))
    try:
        await client.submit([event("a1", f"m{i}", i, NOW, f"q{i}") for i in range(1, 8)])
        asked = {}
        for server in (nodes.a, nodes.b):
            async with httpx.AsyncClient(base_url=server.url) as http:
                paths = ["/v1/boards/a1/alltime/top?limit=3&offset=1", "/v1/boards/a1/alltime/members/m3",
                         "/v1/boards/a1/alltime/around/m4?radius=1", "/v1/boards/a1/alltime/percentile/m7",
                         "/v1/boards/a1/alltime/score_at_percentile?p=50", "/v1/boards/a1/alltime/members/nobody",
                         "/v1/boards/a1/alltime/digest", "/v1/boards/a1/alltime/periods", "/v1/boards/a1/nope/top"]
                answers = [(r.status_code, r.json()) for r in [await http.get(p) for p in paths]]
                posted = await http.post("/v1/boards/a1/alltime/members", json={"members": ["m1", "zz"]})
                answers.append((posted.status_code, posted.json()))
                audit = await http.get("/v1/boards/a1/events", params={"member": "m2"},
                                       headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
                answers.append((audit.status_code, audit.json()))
                answers.append(((await http.get("/v1/boards/a1/events", params={"member": "m2"})).status_code, None))
                answers.append(((await http.get("/v1/boards")).status_code, (await http.get("/v1/boards")).json()))
                head = await http.head("/v1/boards/a1/alltime/top")
                answers.append((head.status_code, head.headers["content-length"]))
            asked[server.url] = answers
        assert asked[nodes.a.url] == asked[nodes.b.url]
        assert [status for status, _ in asked[nodes.b.url]] == [200] * 5 + [404, 200, 200, 404, 200, 200, 401, 200, 200]
        listed = {entry["board"]: entry["state"] for entry in asked[nodes.b.url][-2][1]["boards"]}
        assert listed == {"a1": "ready", "a2": "ready", "b1": "ready", "lost": "elsewhere"}
        op = {"op": "around", "board": "a1", "period": "alltime", "member": "m4", "radius": 1}
        here = await Client.connect(nodes.a.ws_url, token_for("gs"))
        try:
            assert {**await here.request(op), "id": 0} == {**await client.request(op), "id": 0}
            refused = await client.request({"op": "top", "board": "a1", "period": "alltime", "limit": 0})
            assert (refused["op"], refused["code"]) == ("error", "invalid_request")
        finally:
            await here.close()
    finally:
        await client.close()
    b_metrics = (await get(f"{nodes.b.url}/metrics")).text
    assert parse_metric(b_metrics, "arena_forwarded_total", kind="queries") == 13
    assert parse_metric(b_metrics, "arena_forwarded_total", kind="admin") == 1


async def test_a_void_through_another_node_is_done_by_the_owner(nodes: Nodes) -> None:
    client = await Client.connect(nodes.a.ws_url, token_for("gs"))
    try:
        await client.submit([event("b1", "m1", 5, NOW, "v1"), event("b1", "m1", 6, NOW, "v2")])
    finally:
        await client.close()
    async with httpx.AsyncClient(base_url=nodes.a.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as http:
        voided = await http.post("/v1/boards/b1/void", json={"idempotency_key": "v1", "reason": "cheat"})
        assert (voided.status_code, voided.json()["voided"]) == (200, 1)
    entry = (await get(f"{nodes.b.url}/v1/boards/b1/alltime/members/m1")).json()["entry"]
    assert entry["score"] == 6


async def test_an_ownerless_board_answers_queries_503_at_once_and_frames_after_the_wait(
    nodes: Nodes, waits: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(forward, "OWNERLESS_WAIT_SECONDS", 1.0)
    async with httpx.AsyncClient(base_url=nodes.a.url) as http:
        answer = await http.get("/v1/boards/lost/alltime/top")
        assert (answer.status_code, answer.headers["retry-after"], answer.json()["error"]["code"]) == (503, "1", "unavailable")
    client = await Client.connect(nodes.a.ws_url, token_for("gs"))
    try:
        refused = await client.request({"op": "top", "board": "lost", "period": "alltime"})
        assert (refused["op"], refused["code"]) == ("error", "unavailable")
        assert waits == []  # neither query waited for an owner
        results = await client.submit([event("a1", "m", 1, NOW, "o1"), event("lost", "m", 1, NOW, "o2")])
        assert statuses(results) == ["accepted", "rejected:unavailable"]
        assert set(waits) == {("node-a", "lost")}  # the ownerless part waited for an owner, in vain
        waits.clear()
        monkeypatch.setattr(forward, "OWNERLESS_WAIT_SECONDS", 30.0)  # longer than the move below takes
        waiting = client.send({"op": "submit", "events": [event("lost", "m", 1, NOW, "o2")]})
        await until(lambda: waits, "the frame to wait for an owner")  # then one turns up
        await nodes.owners(lost=nodes.b)
        assert statuses((await asyncio.wait_for(waiting, 30))["results"]) == ["accepted"]
    finally:
        await client.close()


async def test_a_board_that_moved_is_re_routed_not_refused(nodes: Nodes, waits: list[tuple[str, str]]) -> None:
    """Node a still thinks b1 is on b, but b gave it to a: b answers `not_here`, a looks again."""
    assert nodes.b.arena is not None and nodes.a.arena is not None
    nodes.b.arena.directory.set("b1", Owner("node-a", nodes.a.url, 2))

    async def moved() -> None:
        await until(lambda: ("node-a", "b1") in waits, "b's not_here: node a looking for b1's next owner")
        assert nodes.a.arena is not None
        nodes.a.arena.states.move("b1", BoardEvent.TAKE)
        await nodes.a.arena.supervisor.serve("b1")
        nodes.a.arena.directory.set("b1", Owner("node-a", nodes.a.url, 2))

    mover = asyncio.create_task(moved())
    client = await Client.connect(nodes.a.ws_url, token_for("gs"))
    try:
        assert statuses(await client.submit([event("b1", "m", 1, NOW, "r1")])) == ["accepted"]
    finally:
        await client.close()
        await mover
    assert (await get(f"{nodes.a.url}/v1/boards/b1/alltime/members/m")).json()["entry"]["score"] == 1


async def test_on_one_connection_answers_about_a_board_never_go_back_in_seq(nodes: Nodes) -> None:
    """b1 moves from b to a, whose journal of it (each node keeps its own here) is behind b's:
    the connection that was sent b's seq gets `unavailable` rather than a's older answer; a new
    connection gets a's answer."""
    op = {"op": "top", "board": "b1", "period": "alltime"}
    client = await Client.connect(nodes.a.ws_url, token_for("gs"))
    try:
        await client.submit([event("b1", f"m{i}", i, NOW, f"s{i}") for i in range(3)])
        forwarded = await client.request(op)
        assert (forwarded["op"], forwarded["seq"]) == ("result", 3)
        await nodes.owners(b1=nodes.a)
        older = await client.request(op)
        assert (older["op"], older["code"]) == ("error", "unavailable")
        fresh = await Client.connect(nodes.a.ws_url, token_for("gs"))
        try:
            assert ((answer := await fresh.request(op))["op"], answer["seq"]) == ("result", 0)
        finally:
            await fresh.close()
    finally:
        await client.close()


async def test_an_owner_s_answer_older_than_one_the_connection_was_sent_is_asked_again_once(
    nodes: Nodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    op = {"op": "rank", "board": "b1", "period": "alltime", "member": "m"}
    client = await Client.connect(nodes.a.ws_url, token_for("gs"))
    try:
        await client.submit([event("b1", "m", 1, NOW, "t1"), event("b1", "m", 2, NOW, "t2")])
        assert (await client.request(op))["seq"] == 2
        ask = Forwarding.ask
        asked: list[int] = []

        async def an_old_owner_first(self: Forwarding, request: Ask | Http) -> Answer | None:
            answer = await ask(self, request)
            asked.append(len(asked))
            if len(asked) == 1 and isinstance(answer, Answered):  # as an old owner would answer, once
                return Answered({**answer.body, "seq": 1})
            return answer

        monkeypatch.setattr(Forwarding, "ask", an_old_owner_first)
        again = await client.request(op)
        assert (again["op"], again["seq"], again["entry"]["score"], len(asked)) == ("result", 2, 3, 2)
    finally:
        await client.close()


def updates(client: Client, sub: str) -> list[dict[str, Any]]:
    return [f for f in client.unmatched if f.get("op") == "update" and f.get("sub") == sub]


async def test_live_views_of_a_board_served_elsewhere_are_watched_once_and_fanned_out(nodes: Nodes) -> None:
    view = {"op": "top", "board": "b1", "period": "alltime", "limit": 3}
    watchers = [await Client.connect(nodes.a.ws_url, token_for("gs")) for _ in range(3)]
    writer = await Client.connect(nodes.a.ws_url, token_for("gs"))
    try:
        subs = [(await c.request({"op": "subscribe", "view": view}))["sub"] for c in watchers]
        for client, sub in zip(watchers, subs, strict=True):
            await until(lambda c=client, s=sub: updates(c, s), "the first update")  # type: ignore[misc]
            assert updates(client, sub)[0]["entries"] == []
        await writer.submit([event("b1", "m1", 4, NOW, "l1")])
        for client, sub in zip(watchers, subs, strict=True):
            await until(lambda c=client, s=sub: updates(c, s)[-1]["entries"], "the update after the event")  # type: ignore[misc]
            assert [(e["member"], e["score"]) for e in updates(client, sub)[-1]["entries"]] == [("m1", 4)]
        assert nodes.b.arena is not None and nodes.b.arena.live is not None
        assert [len(v.subscriptions) for v in nodes.b.arena.live.views.values()] == [1]  # one watch for three
        a_metrics = (await get(f"{nodes.a.url}/metrics")).text
        assert parse_metric(a_metrics, "arena_forwarded_total", kind="subscriptions") == 1

        async with httpx.AsyncClient(base_url=nodes.a.url, timeout=10) as http:
            async with http.stream("GET", "/v1/boards/b1/alltime/members/m1",
                                   headers={"Accept": "text/event-stream"}) as response:
                assert response.status_code == 200
                lines = response.aiter_lines()
                while not (line := await asyncio.wait_for(anext(lines), 10)).startswith("data:"):
                    pass
                assert '"score":4' in line

            refused = await http.get("/v1/boards/b1/hourly/top", headers={"Accept": "text/event-stream"})
            assert (refused.status_code, refused.json()["error"]["code"]) == (404, "unknown_period")
        refused_frame = await watchers[0].request({"op": "subscribe", "view": {**view, "period": "hourly"}})
        assert (refused_frame["op"], refused_frame["code"]) == ("error", "unknown_period")

        seen = len(updates(watchers[0], subs[0]))
        await nodes.owners(b1=nodes.a)  # the board moves: an update follows, from the new owner
        await until(lambda: len(updates(watchers[0], subs[0])) > seen, "an update after the owner change")
        seen = len(updates(watchers[0], subs[0]))
        await nodes.owners(b1=nodes.b)  # and back: watched at b again
        await until(lambda: len(updates(watchers[0], subs[0])) > seen, "an update after the second owner change")
        assert [(e["member"], e["score"]) for e in updates(watchers[0], subs[0])[-1]["entries"]] == [("m1", 4)]
    finally:
        for client in (*watchers, writer):
            await client.close()
    assert nodes.b.arena is not None and nodes.b.arena.live is not None
    b_live = nodes.b.arena.live
    await until(lambda: not b_live.views, "the owner to drop the watch once no one here subscribes")


async def test_events_waiting_on_a_board_this_node_loses_go_on_to_the_next_owner(nodes: Nodes) -> None:
    """a1 is fenced off node a (disowned) while a frame's events wait in its mailbox: they are
    answered `unavailable` there, and sent on to b, which takes the board next."""
    assert nodes.a.arena is not None and nodes.b.arena is not None
    forwarding = Forwarding(nodes.a.arena, Peers(SECRET, 3, 1 << 20))
    events = [Event("a1", "m", 3, NOW, "mv1"), Event("a1", "n", 4, NOW, "mv2")]
    answer = forwarding.submit("a1", events, NOW, "gs")
    await asyncio.sleep(0)  # queued in a1's mailbox on node a
    nodes.a.arena.directory.set("a1", Owner("node-b", nodes.b.url, 2))
    nodes.a.arena.states.move("a1", BoardEvent.DISOWN)
    await nodes.a.arena.supervisor.disown("a1")
    nodes.b.arena.states.move("a1", BoardEvent.TAKE)
    await nodes.b.arena.supervisor.serve("a1")
    nodes.b.arena.directory.set("a1", Owner("node-b", nodes.b.url, 2))
    try:
        assert [r.status for r in await asyncio.wait_for(answer, 10)] == [Status.ACCEPTED, Status.ACCEPTED]
    finally:
        await forwarding.close()
    a_metrics = (await get(f"{nodes.a.url}/metrics")).text
    assert parse_metric(a_metrics, "arena_events_total", board="a1", status="rejected", reason="unavailable") == 2
    top = (await get(f"{nodes.b.url}/v1/boards/a1/alltime/top")).json()
    assert {e["member"]: e["score"] for e in top["entries"]} == {"m": 3, "n": 4}


async def test_a_part_too_large_for_one_peer_message_goes_in_pieces_in_order(nodes: Nodes) -> None:
    """Escaped once more inside a peer message, a frame's events of one board can outgrow the
    frame limit that the owner's peer route enforces: they go in pieces, one after another."""
    quotes = {"q": '"' * 450}  # each quote is 2 bytes in the frame, 4 in a peer message
    frame = [event("b1", f"m{i}", 1, NOW, f"big{i}", meta=quotes) for i in range(25)]
    frame.append(event("b1", "m0", 1, NOW, "big0"))  # the same key again, last: a duplicate
    assert len(orjson.dumps({"op": "submit", "id": 1, "events": frame})) < FRAME_BYTES
    events = tuple(Event("b1", e["member"], 1, NOW, e["idempotency_key"], orjson.dumps(quotes).decode()) for e in frame)
    assert len(serialise(Numbered(1, Submit("b1", "gs", NOW, events)))) > FRAME_BYTES  # in one message, too large
    client = await Client.connect(nodes.a.ws_url, token_for("gs"))
    try:
        assert statuses(await client.submit(frame)) == ["accepted"] * 25 + ["duplicate"]
    finally:
        await client.close()
    async with httpx.AsyncClient(base_url=nodes.a.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as http:
        audit = (await http.get("/v1/boards/b1/events", params={"member": "m3"})).json()
        assert audit["events"][0]["meta"] == quotes
        too_large = await http.post("/v1/boards/b1/alltime/members", json={"members": ['"' * 9000] * 3})
        assert (too_large.status_code, too_large.json()["error"]["code"]) == (400, "invalid_request")


async def test_a_peer_speaking_nonsense_is_let_go(nodes: Nodes) -> None:
    url = nodes.a.url.replace("http", "ws") + PATH
    async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {SECRET}"}) as peer:
        await peer.send("not json")
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(peer.recv(), 5)
    async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {SECRET}"}) as peer:
        await peer.send(orjson.dumps({"id": 7, "op": "submit", "board": "b1", "source": "gs", "received_at": NOW,
                                      "events": []}).decode())
        assert orjson.loads(await asyncio.wait_for(peer.recv(), 5)) == {"id": 7, "not_here": True}  # b1 is on b
        await peer.send(orjson.dumps({"id": 8, "op": "what", "board": "a1"}).decode())
        assert orjson.loads(await asyncio.wait_for(peer.recv(), 5))["error"]["code"] == "invalid_request"
        await peer.send(orjson.dumps({"id": 9, "op": "submit", "board": "a1", "events": []}).decode())  # no source
        assert orjson.loads(await asyncio.wait_for(peer.recv(), 5))["error"]["code"] == "invalid_request"

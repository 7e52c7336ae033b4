"""Frames per board: in a cluster whose node owning board A is stopped (SIGSTOP), the client's
events for board B, owned by the node it is connected to, are all acked while A's wait; once A's
owner runs again A's are acked too, each event counted once. Boards never share a frame."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import httpx

from arena.cluster.placement import preference
from arena_client import ArenaClient, ScoreEvent, SubmitStatus
from support.cluster import NodeFactory, standings, start_cluster
from support.server import InProcessServer, make_config, token_for

NODES = ["node-a", "node-b"]


def _owned_by(node: str) -> str:
    return next(b for b in (f"board{i}" for i in range(100)) if preference(b, NODES)[0] == node)


STOPPED = _owned_by("node-b")  # its owner is stopped
RUNNING = _owned_by("node-a")  # owned by the node the client talks to
BOARDS: dict[str, dict[str, Any]] = {STOPPED: {"aggregation": "sum"}, RUNNING: {"aggregation": "sum"}}


async def test_a_board_whose_owner_is_stopped_holds_up_no_other_boards_acks(cluster_nodes: NodeFactory) -> None:
    # a long lease: the stopped owner keeps board A (no takeover) until it runs again
    node_a, node_b = await start_cluster(cluster_nodes, NODES, BOARDS, lease_seconds=120)
    async with ArenaClient(node_a.url, token_for("gs"), linger=0.01) as client:
        await client.submit_many([ScoreEvent(STOPPED, "warm", 1), ScoreEvent(RUNNING, "warm", 1)])  # peers connected
        node_b.signal(signal.SIGSTOP)
        try:
            held = [asyncio.create_task(client.submit(STOPPED, f"m{i % 5}", 1)) for i in range(50)]
            running = [asyncio.create_task(client.submit(RUNNING, f"m{i % 5}", 1)) for i in range(200)]
            async with asyncio.timeout(60):  # a deadline, not a measure
                results = await asyncio.gather(*running)
            assert {r.status for r in results} == {SubmitStatus.ACCEPTED}
            assert not any(task.done() for task in held), "board A's owner is stopped: its events cannot be acked yet"
            assert client.stats.frames_sent >= 3  # A's frame, and B's apart from it
        finally:
            node_b.signal(signal.SIGCONT)
        async with asyncio.timeout(60):
            held_results = await asyncio.gather(*held)
    assert {r.status for r in held_results} == {SubmitStatus.ACCEPTED}
    async with httpx.AsyncClient() as http:
        assert await standings(http, node_a.url, RUNNING) == {"warm": 1, **{f"m{i}": 40 for i in range(5)}}
        assert await standings(http, node_b.url, STOPPED) == {"warm": 1, **{f"m{i}": 10 for i in range(5)}}


BOTH = {"x": {"aggregation": "sum"}, "y": {"aggregation": "sum"}}


async def test_concurrent_submits_for_two_boards_travel_in_frames_of_one_board_each(tmp_path: Path) -> None:
    async with InProcessServer(make_config(tmp_path, BOTH)) as server:
        async with ArenaClient(server.url, token_for("gs"), linger=0.05) as client:
            results = await asyncio.gather(*(client.submit("xy"[i % 2], f"m{i}", 1) for i in range(40)))
            frames = client.stats.frames_sent
    assert {r.status for r in results} == {SubmitStatus.ACCEPTED}
    assert frames >= 2  # never one frame for both boards

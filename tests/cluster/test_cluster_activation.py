"""Activation on demand on a 3-node PostgreSQL cluster of real `arena serve` nodes (DESIGN.md,
"Many boards: activation on demand", "Cluster"): a node owns boards without loading them; the
first event or query for an inactive board, sent to a node that does not own it, activates it on
its owner; a SIGKILLed owner's active and inactive boards are served again with every acked event
(the inactive one taken over without a copy); a rolling restart hands inactive boards off without
loading them; the close marker of an inactive owned board is journaled at its close moment.
`/v1/cluster` and `/v1/boards` show ``active``. Deadline loops, no sleeps."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from arena.cluster.placement import preference
from arena.config import JournalSettings
from arena.engine.periods import PeriodKind
from arena.engine.records import CloseRecord
from arena.journal import journal_backend
from support.cluster import NodeFactory, OwnerWriter, check_nothing_lost, ingesting, oracle, settled, standings, start_cluster
from support.faults import parse_metric
from support.server import ChildServer, Client, event, make_config, now_ms, token_for, until

BOARDS: dict[str, dict[str, Any]] = {f"s{i}": {"aggregation": "sum", "periods": ["alltime", "daily"]} for i in range(6)}
NODES = ["node-a", "node-b", "node-c"]
IDLE = {"idle_unload_seconds": 0.5}
DAY = 86_400_000

pytestmark = pytest.mark.slow


def owner_of(servers: list[ChildServer], board: str) -> ChildServer:
    return servers[NODES.index(preference(board, NODES)[0])]


def not_owners(servers: list[ChildServer], board: str) -> list[ChildServer]:
    owner = owner_of(servers, board)
    return [s for s in servers if s is not owner]


async def cluster_active(http: httpx.AsyncClient, node: ChildServer) -> dict[str, bool]:
    """board -> ``active`` as node ``node``'s `/v1/cluster` shows it."""
    return {b: v["active"] for b, v in (await http.get(f"{node.url}/v1/cluster")).json()["boards"].items()}


async def inactive_everywhere(http: httpx.AsyncClient, servers: list[ChildServer], boards: list[str]) -> bool:
    """Every board of ``boards`` is inactive on its owner, as `/v1/cluster` and `/v1/boards` of every live node say."""
    for node in (s for s in servers if s.alive()):
        shown = await cluster_active(http, node)
        if any(shown[b] for b in boards):
            return False
        listed = {b["board"]: b for b in (await http.get(f"{node.url}/v1/boards")).json()["boards"]}
        if any(listed[b]["active"] for b in boards):
            return False
    return True


async def activations(http: httpx.AsyncClient, node: ChildServer) -> float:
    return parse_metric((await http.get(f"{node.url}/metrics")).text, "arena_board_activations_total")


async def submit(node: ChildServer, events: list[dict[str, Any]]) -> list[str]:
    client = await Client.connect(node.ws_url, token_for("gs"))
    try:
        return [r["status"] for r in await client.submit(events, timeout=10)]
    finally:
        await client.close()


async def test_an_inactive_board_is_activated_on_its_owner_by_an_event_or_a_query_sent_to_another_node(
        cluster_nodes: NodeFactory) -> None:
    servers = await start_cluster(cluster_nodes, NODES, BOARDS, standbys=1, settings=IDLE)
    async with httpx.AsyncClient(timeout=10) as http:
        await until(lambda: inactive_everywhere(http, servers, list(BOARDS)), "every board taken inactive")
        for node in servers:  # ready without loading any board
            assert (await http.get(f"{node.url}/readyz")).status_code == 200
        written, asked = "s0", "s1"
        owner = owner_of(servers, written)
        before = await activations(http, owner)
        now = now_ms()
        events = [event(written, f"m{i % 3}", 1 + i, now, f"k{i}") for i in range(5)]
        assert await submit(not_owners(servers, written)[0], events) == ["accepted"] * 5
        assert await activations(http, owner) == before + 1
        expected = {"m0": 1 + 4, "m1": 2 + 5, "m2": 3}
        for node in servers:  # after the ack every node's query sees the events
            assert await standings(http, node.url, written) == expected
        await until(lambda: inactive_everywhere(http, servers, [written]), "the written board unloaded again")
        again = not_owners(servers, written)[1]
        answer = (await http.get(f"{again.url}/v1/boards/{written}/alltime/top")).json()
        assert (answer["size"], answer["seq"]) == (3, 5)  # activated again from its snapshot: the same answer
        asker = not_owners(servers, asked)[0]
        before = await activations(http, owner_of(servers, asked))
        answer = (await http.get(f"{asker.url}/v1/boards/{asked}/alltime/top")).json()
        assert (answer["size"], answer["seq"], answer["entries"]) == (0, 0, [])
        assert await activations(http, owner_of(servers, asked)) == before + 1


async def test_a_sigkilled_owners_active_and_inactive_boards_are_served_again_with_every_acked_event(
        cluster_nodes: NodeFactory, pg_journal: Any) -> None:
    servers = await start_cluster(cluster_nodes, NODES, BOARDS, standbys=1, settings={"idle_unload_seconds": 1.0})
    victim_id = max(NODES, key=lambda n: sum(preference(b, NODES)[0] == n for b in BOARDS))
    victim = servers[NODES.index(victim_id)]
    busy, idle, *_ = [b for b in BOARDS if preference(b, NODES)[0] == victim_id]
    survivors = [s for s in servers if s is not victim]
    async with httpx.AsyncClient(timeout=10) as http:
        quiet = OwnerWriter(servers)
        try:
            now = now_ms()
            acked: dict[str, tuple[str, int]] = {}
            for frame in range(5):
                events = [event(idle, f"m{i % 7}", 1 + i, now, f"idle-{frame}-{i}") for i in range(20)]
                await quiet.deliver(idle, events)
                acked.update({e["idempotency_key"]: (e["member"], e["value"]) for e in events})
        finally:
            await quiet.close()
        taker = servers[NODES.index(next(n for n in preference(idle, NODES) if n != victim_id))]

        async def unfollowed() -> bool:  # its standby dropped its copy: a takeover needs none
            return f'arena_standby_seq{{board="{idle}"}}' not in (await http.get(f"{taker.url}/metrics")).text

        async with ingesting(servers, [busy]) as writer:
            await until(lambda: inactive_everywhere(http, servers, [idle]), "the idle board unloaded")
            await until(unfollowed, "the idle board's standby copy dropped")
            assert (await cluster_active(http, survivors[0]))[busy]
            victim.kill()
            for board in (busy, idle):
                async def served(board: str = board) -> bool:
                    owner = (await http.get(f"{survivors[0].url}/v1/cluster")).json()["boards"][board]["owner"]
                    return owner is not None and owner != victim_id
                await until(served, f"board {board} owned again", timeout=30)
            await writer.more([busy], 100, "ingest on the new owner")
        await check_nothing_lost(writer, servers, pg_journal)
        for node in survivors:  # the inactive board's next answer, through either node: every acked event, once
            assert await standings(http, node.url, idle) == oracle(acked)
    assert re.search(rf"board {idle}: granted to node \S+ \(epoch \d+\), inactive \(activated on demand\)", taker.log())


async def test_a_rolling_restart_hands_inactive_boards_off_without_loading_them(
        cluster_nodes: NodeFactory, pg_journal: Any) -> None:
    servers = await start_cluster(cluster_nodes, NODES, BOARDS, standbys=1, settings=IDLE)
    async with httpx.AsyncClient(timeout=10) as http:
        writer = OwnerWriter(servers)
        try:
            now = now_ms()
            for board in BOARDS:
                await writer.deliver(board, [event(board, f"m{i}", 1 + i, now, f"{board}-{i}") for i in range(4)])
        finally:
            await writer.close()
        expected = {f"m{i}": 1 + i for i in range(4)}
        await until(lambda: inactive_everywhere(http, servers, list(BOARDS)), "every board unloaded")
        for node_id, server in zip(NODES, servers, strict=True):
            owned = [b for b in BOARDS if preference(b, NODES)[0] == node_id]
            await asyncio.to_thread(server.stop)  # SIGTERM: hands its boards off, inactive ones unloaded
            log = server.log()
            assert f"node {node_id} leaving: handing off {len(owned)} boards" in log, log
            assert "not released yet" not in log, log
            await asyncio.to_thread(server.start)
            await settled(servers, NODES, BOARDS)
        for board in BOARDS:
            for node in servers:
                assert await standings(http, node.url, board) == expected
    for node_id, server in zip(NODES, servers, strict=True):  # taken back inactive after its restart: no copy, no load
        if not any(preference(b, NODES)[0] == node_id for b in BOARDS):
            continue
        assert ", inactive (activated on demand)" in server.log(), server.log_tail()
        assert "from its standby copy" not in server.log(), server.log_tail()


async def test_the_close_marker_of_an_inactive_owned_board_is_journaled_at_its_close_moment(
        cluster_nodes: NodeFactory, pg_journal: JournalSettings, tmp_path: Path) -> None:
    servers = await start_cluster(cluster_nodes, NODES, BOARDS, standbys=1, settings=IDLE)
    board = "s2"
    owner = owner_of(servers, board)
    occurred = now_ms()
    assert await submit(not_owners(servers, board)[0], [event(board, "m", 3, occurred, "c1")]) == ["accepted"]
    close_moment = occurred - occurred % DAY + DAY + 60_000  # close_grace_seconds 60
    (tmp_path / "reader").mkdir()
    config = make_config(tmp_path / "reader", BOARDS, journal=pg_journal)
    backend = journal_backend(config)

    async def markers() -> list[CloseRecord]:
        journal = await backend.open(config.boards[board], readonly=True)
        try:
            return [m for m in await journal.close_markers() if m.window.kind is PeriodKind.DAILY]
        finally:
            await journal.close()

    try:
        async with httpx.AsyncClient(timeout=10) as http:
            await until(lambda: inactive_everywhere(http, servers, [board]), "the board unloaded")
            before = await activations(http, owner)
            assert (await http.post(f"{owner.url}/v1/_test/clock", json={"now_ms": close_moment - 1})).status_code == 200
            assert await markers() == []
            assert (await http.post(f"{owner.url}/v1/_test/clock", json={"now_ms": close_moment})).status_code == 200
            await until(markers, "the close marker of the inactive owned board's daily table")
            [marker] = await markers()
            assert (marker.seq, marker.closed_at) == (2, close_moment)
            assert await activations(http, owner) == before  # journaled without loading it
            assert not (await cluster_active(http, owner))[board]
    finally:
        await backend.close()
    assert sum(s.log().count(f"board {board} (inactive): 1 close markers journaled") for s in servers) == 1

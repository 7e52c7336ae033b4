"""Takeover on real `arena serve` nodes under ingest sent to the owners: a SIGKILLed owner's
boards are served by the next node of their placement (the takeover counted there), and nothing
acked is lost or counted twice (sum boards against an oracle of the acked events), a board of
100k events with all of them; an owner paused past its lease (SIGSTOP) and
resumed never commits another append for the boards it lost, and never answers for them from its
stale tables (`arena verify` against each node finds no difference). How long a takeover takes
is measured by `python -m loadtest cluster`, not here."""

from __future__ import annotations

import asyncio
import re
import signal
from typing import Any

import httpx
import pytest

from arena.cluster.placement import preference
from support.arena_cli import run_arena
from support.cluster import NodeFactory, check_nothing_lost, ingesting, oracle, owner_urls, start_cluster
from support.server import ChildServer, Client, event, now_ms, token_for, until

BOARDS: dict[str, dict[str, Any]] = {f"s{i}": {"aggregation": "sum"} for i in range(6)}
NODES = ["node-a", "node-b", "node-c"]

pytestmark = pytest.mark.slow


def victim_of(servers: list[ChildServer]) -> tuple[ChildServer, list[str]]:
    """The node owning the most boards, and its boards."""
    owned = {n: [b for b in BOARDS if preference(b, NODES)[0] == n] for n in NODES}
    node = max(NODES, key=lambda n: len(owned[n]))
    return servers[NODES.index(node)], owned[node]


async def served_again(http: httpx.AsyncClient, survivors: list[ChildServer], board: str) -> str:
    """The URL of the surviving node that owns ``board`` and answers a query on it, once there is one."""
    served: list[str] = []

    async def answered() -> bool:
        url = (await owner_urls(http, survivors)).get(board)
        if url is not None and url in {s.url for s in survivors}:
            if (await http.get(f"{url}/v1/boards/{board}/alltime/top")).status_code == 200:
                served.append(url)
        return bool(served)

    await until(answered, f"board {board} served again", timeout=30)
    return served[0]


def next_owners(servers: list[ChildServer], victim: ChildServer, boards: list[str], node_ids: list[str] = NODES) -> list[str]:
    """The URL of each board's next owner by placement once ``victim`` is gone."""
    urls = dict(zip(node_ids, (s.url for s in servers), strict=True))
    gone = node_ids[servers.index(victim)]
    return [urls[next(n for n in preference(b, node_ids) if n != gone)] for b in boards]


async def test_a_sigkilled_owners_boards_are_served_by_their_next_owners_and_nothing_acked_is_lost(
        cluster_nodes: NodeFactory, pg_journal: Any) -> None:
    servers = await start_cluster(cluster_nodes, NODES, BOARDS)
    victim, boards = victim_of(servers)
    survivors = [s for s in servers if s is not victim]
    async with ingesting(servers, BOARDS) as writer, httpx.AsyncClient() as http:
        victim.kill()
        owners = await asyncio.gather(*(served_again(http, survivors, b) for b in boards))
        assert owners == next_owners(servers, victim, boards)
        await writer.more(boards, 100, "ingest on the new owners")
        observed = 0.0
        for s in survivors:
            text = (await http.get(f"{s.url}/metrics")).text
            observed += sum(float(v) for v in re.findall(r"^arena_takeover_seconds_count (\S+)$", text, re.M))
        assert observed >= len(boards)
    await check_nothing_lost(writer, servers, pg_journal)


async def test_an_owner_paused_past_its_lease_commits_nothing_more_and_never_answers_from_stale_tables(
        cluster_nodes: NodeFactory, pg_journal: Any) -> None:
    servers = await start_cluster(cluster_nodes, NODES, BOARDS)
    victim, boards = victim_of(servers)
    survivors = [s for s in servers if s is not victim]
    async with ingesting(servers, BOARDS) as writer, httpx.AsyncClient() as http:
        victim.signal(signal.SIGSTOP)  # frames sent to it meanwhile wait in its socket and its mailboxes
        await asyncio.gather(*(served_again(http, survivors, b) for b in boards))
        await writer.more(boards, 100, "ingest on the new owners")
    expected = {b: oracle(writer.acked[b]) for b in boards}
    victim.signal(signal.SIGCONT)
    # at once: whatever it answers (its own tables until its first beat, or forwarded) is what an
    # offline rebuild gives; a 503 (stale lease) is no answer, never a difference
    code, out, err = await run_arena("verify", "--config", victim.config_path, "--url", victim.url)
    assert "MISMATCH" not in out and (code == 0 or "HTTP 503" in err), (code, out, err)
    async with httpx.AsyncClient() as http:
        async def forwarding_all() -> bool:
            """One round of queries, each checked: all answered once it has seen the new owners."""
            answered = 0
            for board in boards:
                answer = await http.get(f"{victim.url}/v1/boards/{board}/alltime/top", params={"limit": 1000})
                if answer.status_code == 200:  # only an answer forwarded to the new owner
                    assert {e["member"]: int(e["score"]) for e in answer.json()["entries"]} == expected[board]
                    answered += 1
                else:
                    assert answer.status_code == 503 and answer.headers["retry-after"] == "1", answer.text
            return answered == len(boards)

        await until(forwarding_all, "the resumed node to forward every query to the new owners")
    for server in servers:  # every node, the resumed one included, answers as the journal says
        code, out, err = await run_arena("verify", "--config", server.config_path, "--url", server.url)
        assert code == 0 and "MISMATCH" not in out, (server.url, out, err)
    await check_nothing_lost(writer, servers, pg_journal)
    assert victim.alive()


@pytest.mark.parametrize("standbys", [0, 1])
async def test_the_takeover_of_a_board_of_100k_events(cluster_nodes: NodeFactory, standbys: int) -> None:
    """A board of 100k journaled events, its owner SIGKILLed: the next owner serves all of them,
    with a standby from its copy (which replays only the tail), without one from the journal.

    Only the next owner's log after the kill tells how it took the board over: the nodes start
    at once, so with standbys=0 it may have taken the board at the start from the copy a joining
    node keeps of the boards coming to it (another node, up first, owned the board then)."""
    boards = {"big": {"aggregation": "sum"}}
    servers = await start_cluster(cluster_nodes, NODES, boards, standbys=standbys)
    order = preference("big", NODES)
    owner, standby = (servers[NODES.index(n)] for n in order[:2])
    client = await Client.connect(owner.ws_url, token_for("gs"))
    try:
        now = now_ms()
        frames = [[event("big", f"m{(f * 1000 + i) % 10_000}", 1, now, f"k{f}-{i}") for i in range(1000)] for f in range(100)]
        for start in range(0, len(frames), 8):  # 8 frames in flight
            answers = await asyncio.gather(*(client.request({"op": "submit", "events": f}, 30) for f in frames[start:start + 8]))
            assert all(r["status"] == "accepted" for a in answers for r in a["results"])
    finally:
        await client.close()
    async with httpx.AsyncClient() as http:
        if standbys:
            async def caught_up() -> bool:
                text = (await http.get(f"{standby.url}/metrics")).text
                return re.search(r'^arena_standby_seq\{board="big"\} 100000\.0$', text, re.M) is not None
            await until(caught_up, "the standby caught up", timeout=30)
        before_kill = len(standby.log())
        owner.kill()
        assert await served_again(http, [s for s in servers if s is not owner], "big") == standby.url
        top = (await http.get(f"{standby.url}/v1/boards/big/alltime/top", params={"limit": 1000})).json()
    assert top["size"] == 10_000 and {e["score"] for e in top["entries"]} == {10}  # every event, each once
    copied = re.search(r"board big: granted to node \S+ \(epoch \d+\), from its standby copy", standby.log()[before_kill:])
    assert (copied is not None) == bool(standbys), standby.log_tail()

"""Boards as data in a cluster of real `arena serve` nodes on one PostgreSQL: a board created
through one node is served through every other one without a restart, and its retirement through
another node holds on all of them; `/v1/boards` lists the boards of every owner on every page."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from arena.api.queries import MAX_BOARDS_LIMIT
from arena.cluster.placement import preference
from support.cluster import NodeFactory, settled, start_cluster
from support.server import ADMIN_TOKEN, Client, now_ms, token_for, until

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
CUP = {"aggregation": "sum", "periods": ["alltime", "daily"], "metadata": {"category": "cup"}}


def event(key: str, member: str = "ann", value: int = 10) -> dict[str, Any]:
    return {"board": "cup-1", "member": member, "value": value, "occurred_at": now_ms(), "idempotency_key": key}


async def test_a_board_created_on_one_node_is_served_by_the_others(cluster_nodes: NodeFactory) -> None:
    a, b, c = await start_cluster(cluster_nodes, ["node-a", "node-b", "node-c"], {"fixed": {"periods": ["alltime"]}})
    async with httpx.AsyncClient(timeout=10) as http:
        created = await http.put(f"{a.url}/v1/boards/cup-1", json=CUP, headers=ADMIN)
        assert created.status_code == 201, created.text
        started = time.monotonic()
        writer = await Client.connect(b.ws_url, token_for("gs"))
        try:
            first = event("k1")
            results = await writer.submit([first])
            assert results[0]["status"] == "accepted", results

            async def served_everywhere() -> bool:
                for node in (a, b, c):
                    answer = await http.get(f"{node.url}/v1/boards/cup-1/alltime/top")
                    if answer.status_code != 200 or [e["member"] for e in answer.json()["entries"]] != ["ann"]:
                        return False
                return True

            await until(served_everywhere, "the new board served by every node", timeout=10)
            seconds = time.monotonic() - started
            print(f"created on node-a, written through node-b and served by all three after {seconds:.3f}s")

            changed = await http.put(f"{c.url}/v1/boards/cup-1", json={**CUP, "max_value": 5}, headers=ADMIN)
            assert changed.status_code == 200 and changed.json()["version"] == 2, changed.text
            assert (await writer.submit([event("k2", value=6)]))[0]["reason"] == "value_out_of_range"

            retired = await http.delete(f"{b.url}/v1/boards/cup-1", headers=ADMIN)
            assert retired.status_code == 200, retired.text
            other = await Client.connect(a.ws_url, token_for("gs"))
            try:
                results = await other.submit([first, event("k3")])
                assert [(r["status"], r.get("reason")) for r in results] == [("duplicate", None), ("rejected", "board_retired")]
            finally:
                await other.close()

            async def listed_retired() -> bool:
                for node in (a, b, c):
                    boards = (await http.get(f"{node.url}/v1/boards", params={"category": "cup"})).json()["boards"]
                    if [x["board"] for x in boards] != ["cup-1"] or not boards[0]["retired"]:
                        return False
                return True

            await until(listed_retired, "the retirement listed by every node", timeout=10)
            assert (await http.put(f"{c.url}/v1/boards/cup-1", json=CUP, headers=ADMIN)).json()["error"]["code"] == "board_retired"
        finally:
            await writer.close()


async def test_a_node_whose_config_boards_differ_is_shown(cluster_nodes: NodeFactory) -> None:
    a = cluster_nodes("node-a", {"fixed": {"periods": ["alltime"]}, "same": {}})
    b = cluster_nodes("node-b", {"fixed": {"periods": ["alltime"], "max_value": 5}, "same": {}})
    a.start()
    b.start()
    async with httpx.AsyncClient(timeout=10) as http:
        async def shown() -> bool:
            view = (await http.get(f"{a.url}/v1/cluster")).json()
            return bool(view.get("config_mismatch") == ["fixed"] and all(n["alive"] for n in view["nodes"]) and len(view["nodes"]) == 2)

        await until(shown, "the differing config board shown by /v1/cluster", timeout=15)


async def test_every_page_of_the_boards_lists_the_tables_of_boards_served_elsewhere(cluster_nodes: NodeFactory) -> None:
    """Past the first page (more boards than `limit` at most), a board owned by another node is
    listed with the tables its owner lists, not only its state."""
    nodes = ["node-a", "node-b"]
    boards = {f"b{i:04}": {"periods": ["alltime"]} for i in range(MAX_BOARDS_LIMIT + 2)}
    # loaded (idle_unload_seconds 0): a board activated on demand lists no table before its first load
    a, b = servers = [cluster_nodes(n, boards, standbys=0, settings={"idle_unload_seconds": 0}) for n in nodes]
    await asyncio.gather(*(asyncio.to_thread(s.start) for s in servers))
    await settled(servers, nodes, boards, timeout=120)  # a thousand boards placed: seconds, more on a busy machine
    last = list(boards)[-1]
    asked = a if preference(last, nodes)[0] == "node-b" else b  # the node that does not own the last board
    async with httpx.AsyncClient(timeout=30) as http:
        first = (await http.get(f"{asked.url}/v1/boards")).json()
        assert len(first["boards"]) == MAX_BOARDS_LIMIT and first["next"] == list(boards)[MAX_BOARDS_LIMIT - 1]
        assert all(row["periods"] for row in first["boards"])  # each with its alltime table, wherever it is served
        second: dict[str, Any] = {}

        async def owners_rows() -> bool:  # an owner that misses the forwarded page's bound (a busy machine) leaves its rows as listed here
            second.update((await http.get(f"{asked.url}/v1/boards", params={"after": first["next"]})).json())
            return bool(second["boards"][-1]["state"] == "ready")

        await until(owners_rows, "the second page with its last board as its owner lists it")
        assert [row["board"] for row in second["boards"]] == list(boards)[MAX_BOARDS_LIMIT:] and second["next"] is None
        assert [(t["period"], t["size"]) for t in second["boards"][-1]["periods"]] == [("alltime", 0)]
        small = (await http.get(f"{asked.url}/v1/boards", params={"after": list(boards)[-4], "limit": 2})).json()
        assert [row["board"] for row in small["boards"]] == list(boards)[-3:-1] and small["next"] == list(boards)[-2]
        assert all(row["state"] == "ready" and row["periods"] for row in small["boards"])


async def test_a_node_whose_config_board_differs_journals_nothing_under_it(cluster_nodes: NodeFactory) -> None:
    """The board is placed over the nodes defining it as most do (a tie: as the lowest node id
    does), so the node that defines it differently neither owns nor follows it: its events are
    decided by the owner under the other definition, whichever node they come through."""
    nodes = ["node-a", "node-b"]
    board = next(name for i in range(100) if preference(name := f"fixed-{i}", nodes)[0] == "node-b")  # b's by hash
    a = cluster_nodes("node-a", {board: {"periods": ["alltime"]}, "same": {}})
    b = cluster_nodes("node-b", {board: {"periods": ["alltime"], "max_value": 5}, "same": {}})
    await asyncio.to_thread(a.start)
    await asyncio.to_thread(b.start)
    async with httpx.AsyncClient(timeout=10) as http:
        async def placed() -> bool:
            view = (await http.get(f"{b.url}/v1/cluster")).json()
            return bool(view.get("config_mismatch") == [board] and sum(n["alive"] for n in view["nodes"]) == 2
                        and view["boards"][board]["owner"] == "node-a" and view["boards"][board]["standbys"] == []
                        and view["boards"]["same"]["owner"] == preference("same", nodes)[0])

        await until(placed, "the differing board owned by node-a alone, the other placed as usual", timeout=20)
        for node, key in ((b, "through-b"), (a, "through-a")):
            client = await Client.connect(node.ws_url, token_for("gs"))
            try:
                event = {"board": board, "member": "ann", "value": 6, "occurred_at": now_ms(), "idempotency_key": key}
                assert [r["status"] for r in await client.submit([event])] == ["accepted"]  # node-b's max_value 5 holds nowhere
            finally:
                await client.close()
        top = (await http.get(f"{b.url}/v1/boards/{board}/alltime/top")).json()
        assert [(e["member"], e["score"]) for e in top["entries"]] == [("ann", 6)] and top["seq"] >= 2
        assert (await http.get(f"{b.url}/v1/cluster")).json()["boards"][board]["owner"] == "node-a"

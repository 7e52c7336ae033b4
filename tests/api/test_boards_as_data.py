"""Boards as data through a real server, on both backends: an admin creates, changes and retires
boards at runtime (`PUT`/`GET .../definition`/`DELETE /v1/boards/{board}`); they are journaled in
the board's own journal, kept in the store's catalog, and survive a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from arena.config import JournalSettings, parse_board
from arena.engine.records import BoardKind
from arena.engine.spec import BoardSpec
from arena.journal import journal_backend
from support.arena_cli import run_arena
from support.faults import write_config
from support.server import ADMIN_TOKEN, InProcessServer, make_config, now_ms, submit

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
CUP = {"aggregation": "best", "order": "desc", "periods": ["alltime", "daily"], "min_value": 0, "max_value": 100,
       "metadata": {"title": "Winter cup", "category": "cup"}}


def event(key: str, member: str = "ann", value: int = 10, board: str = "cup-1") -> dict[str, Any]:
    return {"board": board, "member": member, "value": value, "occurred_at": now_ms(), "idempotency_key": key}


def config(tmp_path: Path, journal: JournalSettings, **settings: Any) -> Any:
    return make_config(tmp_path, {"config_board": {"periods": ["alltime"]}}, {"gs": ["cup-*"], "other": ["config_board"]},
                       journal=journal, **settings)


async def test_create_write_change_retire_and_restart(tmp_path: Path, served_journal: JournalSettings) -> None:
    async with InProcessServer(config(tmp_path, served_journal)) as server, httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.put("/v1/boards/cup-1", json=CUP)).status_code == 401
        created = await http.put("/v1/boards/cup-1", json=CUP, headers=ADMIN)
        assert created.status_code == 201, created.text
        assert created.json()["version"] == 1 and created.json()["definition"]["metadata"]["category"] == "cup"
        again = await http.put("/v1/boards/cup-1", json=CUP, headers=ADMIN)  # identical: nothing journaled
        assert again.status_code == 200 and again.json()["version"] == 1
        first = event("k1")
        results = await submit(server, [first, event("k2", value=500)])
        assert [r["status"] for r in results] == ["accepted", "rejected"]
        assert results[1]["reason"] == "value_out_of_range"
        # a pattern: "gs" may write cup-*, "other" may not
        assert (await submit(server, [event("k9")], sid="other"))[0]["reason"] == "forbidden"

        stale = await http.put("/v1/boards/cup-1", json={**CUP, "max_value": 1000}, headers={**ADMIN, "If-Match": "7"})
        assert stale.status_code == 412
        changed = await http.put("/v1/boards/cup-1", json={**CUP, "max_value": 1000}, headers={**ADMIN, "If-Match": "1"})
        assert changed.status_code == 200 and changed.json()["version"] == 2
        assert (await submit(server, [event("k2", value=500)]))[0]["status"] == "accepted"  # from the next record on
        conflict = await http.put("/v1/boards/cup-1", json={**CUP, "aggregation": "sum"}, headers=ADMIN)
        assert conflict.status_code == 409 and conflict.json()["error"]["code"] == "definition_conflict"
        bad = await http.put("/v1/boards/cup-2", json={**CUP, "order": "up"}, headers=ADMIN)
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request"
        assert "order" in bad.json()["error"]["message"]
        managed = await http.put("/v1/boards/config_board", json=CUP, headers=ADMIN)
        assert managed.status_code == 409 and managed.json()["error"]["code"] == "managed_by_config"
        assert (await http.delete("/v1/boards/config_board", headers=ADMIN)).json()["error"]["code"] == "managed_by_config"

        definition = (await http.get("/v1/boards/cup-1/definition", headers=ADMIN)).json()
        assert definition["version"] == 2 and definition["definition"]["max_value"] == 1000
        listed = (await http.get("/v1/boards", params={"category": "cup"})).json()["boards"]
        assert [b["board"] for b in listed] == ["cup-1"] and listed[0]["metadata"]["title"] == "Winter cup"
        assert listed[0]["retired"] is False and listed[0]["active"] is True
        assert all(p["partitions"] == 0 for p in listed[0]["periods"])

        retired = await http.delete("/v1/boards/cup-1", headers=ADMIN)
        assert retired.status_code == 200 and retired.json()["retired"] is True
        results = await submit(server, [first, event("k3")])
        assert [(r["status"], r.get("reason")) for r in results] == [("duplicate", None), ("rejected", "board_retired")]
        top = (await http.get("/v1/boards/cup-1/alltime/top")).json()
        assert top["closed"] is True and [e["member"] for e in top["entries"]] == ["ann"]
        reuse = await http.put("/v1/boards/cup-1", json=CUP, headers=ADMIN)
        assert reuse.status_code == 409 and reuse.json()["error"]["code"] == "board_retired"
        void = await http.post("/v1/boards/cup-1/void", json={"idempotency_key": "k1", "reason": "cheat"}, headers=ADMIN)
        assert void.status_code == 200 and void.json()["voided"] == 1
        assert (await http.get("/v1/boards", params={"category": "cup"})).json()["boards"][0]["retired"] is True

    async with InProcessServer(config(tmp_path, served_journal)) as server, httpx.AsyncClient(base_url=server.url) as http:
        listed = {b["board"]: b for b in (await http.get("/v1/boards")).json()["boards"]}
        assert listed["cup-1"]["retired"] is True
        assert (await submit(server, [event("k4")]))[0]["reason"] == "board_retired"
        top = (await http.get("/v1/boards/cup-1/alltime/top")).json()
        assert top["closed"] is True and [e["member"] for e in top["entries"]] == ["ann"]

    # the board's journal holds its definitions and retirement in seq order
    backend = journal_backend(make_config(tmp_path, {}, journal=served_journal))
    journal = await backend.open(BoardSpec("cup-1", periods=parse_board("x", CUP).periods), readonly=True)
    try:
        kinds = [(r.kind, r.seq) for r in await journal.board_records()]
        assert [k for k, _ in kinds] == [BoardKind.DEFINITION, BoardKind.DEFINITION, BoardKind.RETIRED]
        assert kinds[0][1] == 1 and kinds[-1][1] == journal.last_seq - 1  # the void came after
    finally:
        await journal.close()
        await backend.close()


async def test_fixed_fields_may_change_until_the_first_event_and_the_restart_agrees(tmp_path: Path,
                                                                                   served_journal: JournalSettings) -> None:
    async with InProcessServer(config(tmp_path, served_journal)) as server, httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.put("/v1/boards/cup-1", json=CUP, headers=ADMIN)).status_code == 201
        summed = await http.put("/v1/boards/cup-1", json={**CUP, "aggregation": "sum"}, headers=ADMIN)
        assert summed.status_code == 200, summed.text  # no event yet: a fixed field may change
        assert [r["status"] for r in await submit(server, [event("k1", value=4), event("k2", value=5)])] == ["accepted"] * 2
        assert (await http.get("/v1/boards/cup-1/alltime/top")).json()["entries"][0]["score"] == 9
    async with InProcessServer(config(tmp_path, served_journal)) as server, httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.get("/v1/boards/cup-1/alltime/top")).json()["entries"][0]["score"] == 9


async def test_max_boards_and_unknown_board(tmp_path: Path) -> None:
    async with InProcessServer(config(tmp_path, JournalSettings(), max_boards=2)) as server, \
            httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.put("/v1/boards/cup-1", json=CUP, headers=ADMIN)).status_code == 201
        full = await http.put("/v1/boards/cup-2", json=CUP, headers=ADMIN)
        assert full.status_code == 409 and full.json()["error"]["code"] == "too_many_boards"
        assert (await http.delete("/v1/boards/cup-1", headers=ADMIN)).status_code == 200
        assert (await http.put("/v1/boards/cup-2", json=CUP, headers=ADMIN)).status_code == 201  # retired ones do not count
        assert (await submit(server, [event("k1", board="cup-3")]))[0]["reason"] == "unknown_board"
        assert (await http.delete("/v1/boards/cup-3", headers=ADMIN)).status_code == 404


async def test_a_config_board_named_like_an_api_board_stops_the_start(tmp_path: Path) -> None:
    async with InProcessServer(config(tmp_path / "data", JournalSettings())) as server, \
            httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.put("/v1/boards/cup-1", json=CUP, headers=ADMIN)).status_code == 201
    path = write_config(tmp_path, {"cup-1": {"periods": ["alltime"]}})
    code, _out, err = await run_arena("serve", "--config", path, "--port", "0")
    lines = [line for line in err.splitlines() if line.startswith("arena serve:")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err
    assert "boards.cup-1: a board created through the admin API holds this name" in lines[0]

"""`arena rebuild` and `arena migrate` cover the boards created through the admin API: their
tables, their definition and retirement records, and the catalog that lists them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from arena.config import JournalSettings, load_config
from arena.engine.records import BoardKind, BoardRecord
from arena.journal import board_catalog, journal_backend
from support.arena_cli import arena, rebuild_digests
from support.faults import write_config
from support.server import ADMIN_TOKEN, Client, InProcessServer, make_config, now_ms, token_for

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
CUP = {"aggregation": "sum", "periods": ["alltime", "daily"], "metadata": {"category": "cup"}}
BOARDS = {"fixed": {"periods": ["alltime"]}}


async def test_rebuild_and_migrate_cover_api_boards(tmp_path: Path, pg_journal: JournalSettings) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    on_sqlite = write_config(tmp_path / "a", BOARDS, journal=JournalSettings("sqlite", None, pg_journal.schema))
    config = load_config(on_sqlite)
    async with InProcessServer(make_config(config.server.data_dir, BOARDS)) as server, \
            httpx.AsyncClient(base_url=server.url) as http:
        for name in ("cup-1", "cup-2"):
            assert (await http.put(f"/v1/boards/{name}", json=CUP, headers=ADMIN)).status_code == 201
        client = await Client.connect(server.ws_url, token_for("gs"))
        events = [{"board": b, "member": m, "value": v, "occurred_at": now_ms(), "idempotency_key": f"{b}{m}"}
                  for b in ("cup-1", "cup-2") for m, v in (("ann", 3), ("bob", 5))]
        assert {r["status"] for r in await client.submit(events)} == {"accepted"}
        await client.close()
        assert (await http.put("/v1/boards/cup-2", json={**CUP, "max_value": 9}, headers=ADMIN)).status_code == 200
        assert (await http.delete("/v1/boards/cup-1", headers=ADMIN)).status_code == 200
        live = (await http.get("/v1/boards/cup-2/alltime/digest")).json()["sha256"]

    done = await asyncio.to_thread(arena, "rebuild", "--config", on_sqlite)
    assert done.returncode == 0, done.stderr
    digests = rebuild_digests(done.stdout)
    assert {board for board, _p, _i in digests} == {"fixed", "cup-1", "cup-2"}
    assert digests[("cup-2", "alltime", "alltime")].sha256 == live

    assert pg_journal.url is not None
    done = await asyncio.to_thread(arena, "migrate", "--config", on_sqlite, "--to", pg_journal.url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 of 3 boards copied" in done.stdout
    on_postgresql = write_config(tmp_path / "b", BOARDS, journal=pg_journal)
    again = await asyncio.to_thread(arena, "rebuild", "--config", on_postgresql)
    assert again.returncode == 0, again.stderr
    assert rebuild_digests(again.stdout) == digests

    target = load_config(on_postgresql)
    backend = journal_backend(target)
    catalog = board_catalog(target, backend, readonly=True)
    try:
        entries = {e.name: e for e in await catalog.entries()}
        assert entries["cup-1"].retired and entries["cup-2"].version == 2
        journal = await backend.open(make_config(tmp_path, {"cup-1": CUP}).boards["cup-1"], readonly=True)
        kinds = [r.kind for r in (r for chunk in [c async for c in journal.records()] for r in chunk) if isinstance(r, BoardRecord)]
        await journal.close()
        assert kinds == [BoardKind.DEFINITION, BoardKind.RETIRED]
    finally:
        await catalog.close()
        await backend.close()

"""The conformance scenarios through the real protocol: uvicorn, WebSocket, HTTP, test clock; on
both journal backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from arena.config import JournalSettings
from support import scenarios
from support.server import Client, InProcessServer, make_config, token_for


async def _standings(http: httpx.AsyncClient, scenario: dict[str, Any]) -> list[dict[str, Any]]:
    """Every table the server lists (current and retained) that has entries."""
    found = []
    for board, body in scenario["boards"].items():
        for period in body["periods"]:
            listing = (await http.get(f"/v1/boards/{board}/{period}/periods")).json()
            for p in listing["periods"]:
                if not p["size"]:
                    continue
                top = (await http.get(f"/v1/boards/{board}/{period}/top", params={"limit": 1000, "period_id": p["period_id"]})).json()
                found.append({k: top[k] for k in ("board", "period", "period_id", "start", "end")} | {"entries": top["entries"]})
    return sorted(found, key=lambda s: (s["board"], s["period"], s["period_id"]))


@pytest.mark.parametrize("name", scenarios.NAMES)
async def test_scenario_over_the_wire(name: str, tmp_path: Path, served_journal: JournalSettings) -> None:
    scenario = scenarios.load(name)
    config = make_config(tmp_path, scenario["boards"], scenario["servers"], journal=served_journal)
    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        clients = {sid: await Client.connect(server.ws_url, token_for(sid)) for sid in scenario["servers"]}
        for step in scenario["steps"]:
            assert (await http.post("/v1/_test/clock", json={"now_ms": step["now_ms"]})).status_code == 200
            results = await clients[step["server"]].submit(step["events"])
            assert scenarios.without_messages(results) == scenarios.expected_results(step)
        assert await _standings(http, scenario) == scenario["standings"]
        for client in clients.values():
            await client.close()

"""The JavaScript client's wire types never drift from the server: clients/js/openapi.json (what
src/openapi.ts is generated from) is the document the server serves, and regenerating from it
gives the checked-in src/openapi.ts."""

from __future__ import annotations

import json

import httpx
import pytest

from support.node import PACKAGE, in_package
from support.server import InProcessServer

pytestmark = pytest.mark.server({"b": {}}, fault_injection=False)

REGENERATE = "in clients/js, with a server running: npm run generate -- --from http://127.0.0.1:PORT"


async def test_the_checked_in_document_is_the_served_one(server: InProcessServer) -> None:
    async with httpx.AsyncClient(base_url=server.url) as http:
        served = (await http.get("/v1/openapi.json")).json()
    checked_in = json.loads((PACKAGE / "openapi.json").read_text())
    assert checked_in == served, f"clients/js/openapi.json is not the served document: {REGENERATE}"


def test_the_checked_in_types_are_generated_from_the_checked_in_document() -> None:
    run = in_package("npm", "run", "generate", "--", "--check")
    assert run.returncode == 0, f"{run.stdout}{run.stderr}\nsrc/openapi.ts drifted: {REGENERATE}"

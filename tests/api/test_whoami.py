"""`GET /v1/admin/whoami`: an admin's token names its admin; anything else is 401 (as on every
admin route). The console checks a token with it as it is typed in."""

from __future__ import annotations

import httpx
import pytest

from support.documented import assert_documented
from support.server import ADMIN_TOKEN, InProcessServer, token_for

pytestmark = pytest.mark.server({"b": {"periods": ["alltime"]}}, fault_injection=False)


async def test_an_admin_token_names_its_admin(server: InProcessServer) -> None:
    async with httpx.AsyncClient(base_url=server.url) as http:
        answer = await http.get("/v1/admin/whoami", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert answer.status_code == 200 and answer.json() == {"admin": "ops"}
    assert_documented("/v1/admin/whoami", "GET", answer.json())


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", f"Bearer {token_for('gs')}", f"Basic {ADMIN_TOKEN}"],
                         ids=["missing", "wrong", "game_server", "not_bearer"])
async def test_any_other_token_is_401(server: InProcessServer, authorization: str | None) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    async with httpx.AsyncClient(base_url=server.url) as http:
        answer = await http.get("/v1/admin/whoami", headers=headers)
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized"
    assert_documented("/v1/admin/whoami", "GET", answer.json(), 401)

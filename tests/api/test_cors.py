"""CORS (`[server] cors_origins`): the public routes' answers (errors too) and preflights carry
the headers for an allowed origin; admin routes, health, `/v1/cluster` and `/v1/ws` never do; with no origins
configured nothing changes."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import orjson
import pytest
import websockets

from arena.config import parse_config
from arena.errors import ConfigError
from support.server import ADMIN_TOKEN, InProcessServer, make_config, token_for

BOARDS = {"b": {"periods": ["alltime"]}}
GAME = "https://game.example"
OTHER = "https://evil.example"
ALLOW_ORIGIN = "access-control-allow-origin"

PUBLIC: list[tuple[str, str, object]] = [  # (method, path, body): answers and errors of the public routes
    ("GET", "/v1/boards", None),
    ("GET", "/v1/boards/b/alltime/top", None),
    ("GET", "/v1/boards/b/alltime/top?limit=0", None),  # 400
    ("GET", "/v1/boards/b/alltime/members/nobody", None),  # 404
    ("GET", "/v1/boards/nope/alltime/digest", None),  # 404
    ("HEAD", "/v1/boards/b/alltime/periods", None),
    ("GET", "/v1/openapi.json", None),
    ("GET", "/v1/stats", None),
    ("POST", "/v1/boards/b/alltime/members", {"members": ["a"]}),
    ("POST", "/v1/boards/b/alltime/members", {"members": []}),  # 400
    ("DELETE", "/v1/boards/b/alltime/top", None),  # 405
]
PRIVATE: list[tuple[str, str, object]] = [  # never CORS
    ("GET", "/v1/boards/b/events?member=a", None),
    ("POST", "/v1/boards/b/void", {"idempotency_key": "k", "reason": "r"}),
    ("POST", "/v1/boards/b/members/a/void", {"reason": "r"}),
    ("GET", "/healthz", None),
    ("GET", "/readyz", None),
    ("GET", "/metrics", None),
    ("GET", "/v1/cluster", None),
    ("GET", "/v1/admin/whoami", None),
]


@asynccontextmanager
async def served(tmp_path: Path, origins: Sequence[str]) -> AsyncIterator[httpx.AsyncClient]:
    config = make_config(tmp_path, BOARDS, cors_origins=tuple(origins))
    async with InProcessServer(config, fault_injection=False) as server, httpx.AsyncClient(base_url=server.url) as http:
        yield http


async def ask(http: httpx.AsyncClient, method: str, path: str, body: object, origin: str | None, **headers: str) -> httpx.Response:
    if origin is not None:
        headers["Origin"] = origin
    return await http.request(method, path, json=body, headers=headers)


def cors_headers(answer: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in answer.headers.items() if k.startswith("access-control-")}


async def test_with_a_star_every_public_answer_allows_any_origin(tmp_path: Path) -> None:
    async with served(tmp_path, ["*"]) as http:
        for method, path, body in PUBLIC:
            for origin in (GAME, None):
                answer = await ask(http, method, path, body, origin)
                assert cors_headers(answer) == {ALLOW_ORIGIN: "*"}, (method, path, answer.status_code)
                assert "vary" not in answer.headers


async def test_with_a_list_a_listed_origin_is_echoed_with_vary(tmp_path: Path) -> None:
    async with served(tmp_path, [GAME, "http://localhost:3000"]) as http:
        for method, path, body in PUBLIC:
            answer = await ask(http, method, path, body, GAME)
            assert cors_headers(answer) == {ALLOW_ORIGIN: GAME}, (method, path)
            assert answer.headers["vary"] == "Origin"
        assert (await ask(http, "GET", "/v1/boards", None, "http://localhost:3000")).headers[ALLOW_ORIGIN] == "http://localhost:3000"


async def test_with_a_list_another_origin_gets_no_cors_headers(tmp_path: Path) -> None:
    async with served(tmp_path, [GAME]) as http:
        for method, path, body in PUBLIC:
            for origin in (OTHER, None, GAME + ":8443", "https://game.example.evil"):
                answer = await ask(http, method, path, body, origin)
                assert cors_headers(answer) == {}, (method, path, origin)
                assert answer.headers["vary"] == "Origin"  # a cache must not serve it to GAME


async def test_a_preflight_from_an_allowed_origin_gets_204_with_methods_and_headers(tmp_path: Path) -> None:
    for origins, allowed in (([GAME], GAME), (["*"], "*")):
        async with served(tmp_path, origins) as http:
            for path in ("/v1/boards/b/alltime/members", "/v1/boards/b/alltime/top", "/v1/openapi.json"):
                answer = await ask(http, "OPTIONS", path, None, GAME, **{
                    "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
                assert answer.status_code == 204 and answer.content == b""
                assert cors_headers(answer) == {
                    ALLOW_ORIGIN: allowed,
                    "access-control-allow-methods": "GET, POST",
                    "access-control-allow-headers": "Content-Type",
                }


async def test_a_preflight_from_another_origin_gets_204_without_cors_headers(tmp_path: Path) -> None:
    async with served(tmp_path, [GAME]) as http:
        answer = await ask(http, "OPTIONS", "/v1/boards/b/alltime/members", None, OTHER, **{"Access-Control-Request-Method": "POST"})
        assert answer.status_code == 204 and cors_headers(answer) == {}


@pytest.mark.parametrize("origins", [["*"], [GAME]])
async def test_admin_health_and_metrics_never_get_cors_headers(tmp_path: Path, origins: list[str]) -> None:
    async with served(tmp_path, origins) as http:
        for method, path, body in PRIVATE:
            for auth in ({}, {"Authorization": f"Bearer {ADMIN_TOKEN}"}):
                answer = await ask(http, method, path, body, GAME, **auth)
                assert cors_headers(answer) == {} and "vary" not in answer.headers, (method, path)
            preflight = await ask(http, "OPTIONS", path.partition("?")[0], None, GAME, **{"Access-Control-Request-Method": method})
            assert cors_headers(preflight) == {}, path


async def test_the_ingest_websocket_never_gets_cors_headers(tmp_path: Path) -> None:
    config = make_config(tmp_path, BOARDS, cors_origins=("*",))
    async with InProcessServer(config, fault_injection=False) as server:
        headers = {"Authorization": f"Bearer {token_for('gs')}", "Origin": GAME}
        async with websockets.connect(server.ws_url, additional_headers=headers) as ws:
            assert ws.response is not None
            assert not any(name.lower().startswith("access-control-") for name in ws.response.headers)


async def test_no_origins_configured_means_no_cors_headers_and_answers_unchanged(tmp_path: Path) -> None:
    async with served(tmp_path, []) as http:
        for method, path, body in PUBLIC:
            answer = await ask(http, method, path, body, GAME)
            assert cors_headers(answer) == {} and "vary" not in answer.headers, (method, path)
        preflight = await ask(http, "OPTIONS", "/v1/boards/b/alltime/top", None, GAME)
        assert preflight.status_code == 204 and cors_headers(preflight) == {}


@pytest.mark.parametrize(("origins", "message"), [
    ("*", "must be a list of strings"),
    (["*", GAME], '"*" must be the only entry'),
    (["https://game.example/"], "is not an origin"),
    (["game.example"], "is not an origin"),
])
def test_a_bad_cors_origins_is_one_line_naming_the_key(origins: object, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config({"server": {"cors_origins": origins}, "boards": {"b": {}}})
    text = str(error.value)
    assert text.startswith("server.cors_origins: ") and message in text and "\n" not in text


def test_cors_origins_default_to_none() -> None:
    assert parse_config({"boards": {"b": {}}}).server.cors_origins == ()


def refusals_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "arena.cors" and r.levelno == logging.WARNING]


async def test_a_refused_origin_is_logged_once_with_the_path_and_its_answer_is_unchanged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="arena")
    async with served(tmp_path, [GAME]) as http:
        for _ in range(3):
            answer = await ask(http, "GET", "/v1/boards/b/alltime/top", None, OTHER)
            assert answer.status_code == 200 and cors_headers(answer) == {}
        assert (await ask(http, "GET", "/v1/boards", None, GAME)).status_code == 200
        assert (await ask(http, "GET", "/v1/boards", None, None)).status_code == 200
    assert refusals_logged(caplog) == [
        f"cross-origin request from {OTHER} to /v1/boards/b/alltime/top refused: the origin is not in [server] cors_origins"]


async def test_a_refused_event_stream_or_live_websocket_says_why_to_the_browser_and_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="arena")
    third = "https://third.example"
    config = make_config(tmp_path, BOARDS, cors_origins=(GAME,))
    async with InProcessServer(config, fault_injection=False) as server, httpx.AsyncClient(base_url=server.url) as http:
        answer = await ask(http, "GET", "/v1/boards/b/alltime/top", None, OTHER, Accept="text/event-stream")
        assert answer.status_code == 403
        assert cors_headers(answer) == {ALLOW_ORIGIN: OTHER}  # the browser may read why, and only that
        assert answer.json()["error"] == {
            "code": "forbidden", "message": f"origin {OTHER} may not open a live stream: it is not in [server] cors_origins"}
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(server.url.replace("http", "ws") + "/v1/live", additional_headers={"Origin": third})
        response = refused.value.response
        assert response.status_code == 403 and response.headers[ALLOW_ORIGIN] == third
        assert orjson.loads(response.body)["error"]["message"].startswith(f"origin {third} may not open a live stream")
    assert refusals_logged(caplog) == [
        f"cross-origin event stream from {OTHER} to /v1/boards/b/alltime/top refused: the origin is not in [server] cors_origins",
        f"cross-origin live websocket from {third} to /v1/live refused: the origin is not in [server] cors_origins",
    ]

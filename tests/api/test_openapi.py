"""`GET /v1/openapi.json`: a valid OpenAPI 3.1 document that matches the app's HTTP routes both
ways. The app's own route table (`QueryRoutes.routes`: the dispatcher's table and starlette's)
is the reference, so a route added without documentation, or documented and not served, fails."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import orjson
import pytest
import websockets
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate

from arena.api import openapi
from arena.api.app import create_app
from support.server import InProcessServer, event, now_ms, token_for

BOARDS = {"b": {"periods": ["alltime", "daily"]}}


pytestmark = pytest.mark.server(BOARDS, fault_injection=False)

async def document(server: InProcessServer) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=server.url) as http:
        answer = await http.get("/v1/openapi.json")
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    body: dict[str, Any] = answer.json()
    return body


async def test_the_served_document_is_valid_openapi_3_1(server: InProcessServer) -> None:
    body = await document(server)
    assert body["openapi"].startswith("3.1")
    validate(body)
    assert body == openapi.DOCUMENT


async def test_every_served_http_route_is_documented_and_every_documented_one_served(server: InProcessServer) -> None:
    assert server.arena is not None
    served = set(create_app(server.arena).routes())
    documented = {(path, method.upper()) for path, item in (await document(server))["paths"].items() for method in item}
    assert served - documented == set(), "served but not in arena/api/openapi.py"
    assert documented - served == set(), "documented but not served"
    assert ("/v1/ws", "GET") not in served  # WebSocket routes are not HTTP routes


async def test_every_documented_operation_reaches_a_route(server: InProcessServer) -> None:
    """Asked for real: no documented path and method falls through to the router's 404 or 405."""
    samples = {"board": "b", "period": "alltime", "member": "m", "name": "console.js", "webhook": "w", "delivery": "b/weekly/x/*/0"}
    async with httpx.AsyncClient(base_url=server.url) as http:
        for path, item in openapi.PATHS.items():
            url = re.sub(r"\{(\w+)\}", lambda m: samples[m.group(1)], path)
            for method in item:
                answer = await http.request(method.upper(), url, json={})
                code = answer.json()["error"]["code"] if answer.status_code >= 400 and path != "/readyz" else None
                assert code not in ("not_found", "method_not_allowed"), (method, path, answer.status_code)


async def test_each_operation_documents_the_error_codes_it_answers(server: InProcessServer) -> None:
    """Errors actually answered (asked with bad parameters) are in the operation's responses."""
    cases: list[tuple[str, str, str, object]] = [
        ("get", "/v1/boards/{board}/{period}/top", "/v1/boards/b/alltime/top?limit=0", None),
        ("get", "/v1/boards/{board}/{period}/top", "/v1/boards/nope/alltime/top", None),
        ("get", "/v1/boards/{board}/{period}/top", "/v1/boards/b/hourly/top", None),
        ("get", "/v1/boards/{board}/{period}/top", "/v1/boards/b/daily/top?period_id=2000-01-01", None),
        ("get", "/v1/boards/{board}/{period}/members/{member}", "/v1/boards/b/alltime/members/nobody", None),
        ("post", "/v1/boards/{board}/{period}/members", "/v1/boards/b/alltime/members", {"members": []}),
        ("get", "/v1/boards/{board}/{period}/around", "/v1/boards/b/alltime/around", None),
        ("get", "/v1/boards/{board}/{period}/score_at_percentile", "/v1/boards/b/alltime/score_at_percentile?p=0", None),
        ("get", "/v1/boards/{board}/{period}/periods", "/v1/boards/b/weekly/periods", None),
        ("get", "/v1/boards/{board}/events", "/v1/boards/b/events", None),
        ("post", "/v1/boards/{board}/void", "/v1/boards/b/void", {}),
        ("get", "/v1/admin/whoami", "/v1/admin/whoami", None),
    ]
    async with httpx.AsyncClient(base_url=server.url) as http:
        for method, template, url, body in cases:
            answer = await http.request(method.upper(), url, json=body)
            documented = openapi.PATHS[template][method]["responses"][str(answer.status_code)]
            codes = documented["content"]["application/json"]["schema"]["properties"]["error"]["properties"]["code"]["enum"]
            assert answer.json()["error"]["code"] in codes, (url, answer.status_code, answer.text)


def frame_validator(name: str) -> Draft202012Validator:
    """A validator of one of the document's WebSocket frame schemas (ClientFrame, ServerFrame)."""
    return Draft202012Validator({"$ref": f"#/components/schemas/{name}", "components": openapi.DOCUMENT["components"]})


async def test_the_frame_schemas_describe_what_is_sent_both_ways(server: InProcessServer) -> None:
    """Each frame a client sends here is a ClientFrame, and each frame the server answers (ack,
    result, pong, subscribed, update, unsubscribed, errors) is a ServerFrame."""
    now = now_ms()
    sent = [
        {"op": "submit", "id": 1, "events": [event("b", "ann", 5, now, "k1"), event("b", "bob", 1, now + 86_400_000, "k2")]},
        {"op": "top", "id": 2, "board": "b", "period": "alltime", "limit": 3},
        {"op": "rank", "id": "three", "board": "b", "period": "alltime", "member": "nobody"},
        {"op": "around", "id": 4, "board": "b", "period": "alltime", "rank": 1, "radius": 2},
        {"op": "members", "id": 5, "board": "b", "period": "alltime", "members": ["ann", "zed"]},
        {"op": "percentile", "id": 6, "board": "b", "period": "alltime", "member": "ann"},
        {"op": "score_at_percentile", "id": 7, "board": "b", "period": "alltime", "p": 50},
        {"op": "ping", "id": 8},
        {"op": "subscribe", "id": 9, "view": {"op": "rank", "board": "b", "period": "alltime", "member": "cid"}},
        {"op": "unsubscribe", "id": 10, "sub": "not-mine"},
        {"op": "nope", "id": 11},
    ]
    client_frame, server_frame = frame_validator("ClientFrame"), frame_validator("ServerFrame")
    for frame in sent[:-1]:
        client_frame.validate(frame)
    assert not client_frame.is_valid(sent[-1])
    received: list[dict[str, Any]] = []
    url = server.url.replace("http", "ws", 1)
    async with websockets.connect(f"{url}/v1/ws", additional_headers={"Authorization": f"Bearer {token_for('gs')}"}) as ws:
        for frame in sent:
            await ws.send(orjson.dumps(frame).decode())
        while not (any(f.get("id") == 11 for f in received) and {"ack", "update"} <= {f["op"] for f in received}):
            received.append(orjson.loads(await asyncio.wait_for(ws.recv(), 10)))
    async with websockets.connect(f"{url}/v1/live") as live:
        await live.send(orjson.dumps(sent[0]).decode())
        received.append(orjson.loads(await asyncio.wait_for(live.recv(), 10)))
    ops = {f["op"] for f in received}
    assert ops == {"ack", "result", "error", "pong", "subscribed", "update", "unsubscribed"}, received
    for frame in received:
        errors = [e.message for e in server_frame.iter_errors(frame)]
        assert errors == [], (frame, errors)

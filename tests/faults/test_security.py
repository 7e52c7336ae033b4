"""Security: no write without a valid game-server token, a token writes only its boards, tokens
never reach logs or answers, query routes never write, and audit needs an admin token."""

from __future__ import annotations

import hashlib
import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from websockets.sync.client import connect

from support.faults import journal_file, journaled
from support.server import ADMIN_TOKEN, ChildServer, now_ms, token_for

BOARDS: dict[str, dict[str, Any]] = {
    "a": {"aggregation": "best", "periods": ["alltime", "daily"]},
    "b": {"aggregation": "sum", "periods": ["alltime"]},
}
SERVERS = {"gs": ["*"], "scoped": ["a"]}
WRONG_TOKEN = "token-nobody-knows"
TOKENS = [token_for("gs"), token_for("scoped"), ADMIN_TOKEN, WRONG_TOKEN]



def _event(board: str, member: str, key: str, value: int = 10) -> dict[str, Any]:
    return {"board": board, "member": member, "value": value, "occurred_at": now_ms() - 1000, "idempotency_key": key}


class Session:
    """Everything the server sent back, to look for tokens in it."""

    def __init__(self) -> None:
        self.answers: list[str] = []

    def submit(self, url: str, token: str, events: list[dict[str, Any]]) -> list[str]:
        with connect(url, additional_headers={"Authorization": f"Bearer {token}"}) as ws:
            ws.send(json.dumps({"op": "submit", "id": 1, "events": events}))
            text = ws.recv(timeout=60)
        self.answers.append(str(text))
        return [r["status"] if r["status"] != "rejected" else f"rejected:{r['reason']}" for r in json.loads(text)["results"]]

    def http(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        response = httpx.request(method, url, timeout=30, **kwargs)
        self.answers.append(response.text)
        return response


# DEBUG logging (handshake headers included) and the access log: the most a log can show.
pytestmark = pytest.mark.server(BOARDS, SERVERS, log_level="DEBUG", serve_args=["--access-log"], fault_injection=False)


@pytest.fixture(scope="module")
def session() -> Session:
    return Session()


@pytest.mark.parametrize("headers", [
    {},
    {"Authorization": f"Bearer {WRONG_TOKEN}"},
    {"Authorization": f"Bearer {ADMIN_TOKEN}"},
    {"Authorization": f"Basic {token_for('gs')}"},
    {"Authorization": "Bearer"},
    {"Authorization": f"Bearer {token_for('gs')}x"},
    {"Authorization": f"{token_for('gs')}"},
], ids=["missing", "wrong", "admin", "basic", "empty", "suffix", "no_scheme"])
def test_ws_handshake_without_a_game_server_token_is_refused(child_server: ChildServer, headers: dict[str, str]) -> None:
    with pytest.raises(websockets.InvalidStatus) as refused:
        connect(child_server.ws_url, additional_headers=headers, open_timeout=30)
    assert refused.value.response.status_code in (401, 403)
    assert not any(token.encode() in (refused.value.response.body or b"") for token in TOKENS)


def test_a_scoped_token_cannot_write_another_board(child_server: ChildServer, session: Session) -> None:
    results = session.submit(child_server.ws_url, token_for("scoped"), [
        _event("a", "alice", "scoped-a-1"), _event("b", "alice", "scoped-b-1"), _event("nope", "alice", "scoped-x-1"),
    ])
    assert results == ["accepted", "rejected:forbidden", "rejected:unknown_board"]
    assert session.submit(child_server.ws_url, token_for("gs"), [_event("b", "bob", "gs-b-1")]) == ["accepted"]
    data = child_server.config_path.parent / "data"
    assert "scoped-b-1" not in journaled(data, "b")


QUERY_PATHS = [
    "/v1/boards",
    "/v1/boards/a/alltime/top",
    "/v1/boards/a/alltime/members/alice",
    "/v1/boards/a/alltime/around/alice",
    "/v1/boards/a/alltime/around?rank=1",
    "/v1/boards/a/alltime/percentile/alice",
    "/v1/boards/a/alltime/score_at_percentile?p=50",
    "/v1/boards/a/alltime/digest",
    "/v1/boards/a/alltime/periods",
    "/v1/boards/a/daily/top",
    "/healthz",
    "/readyz",
    "/metrics",
]


def _fingerprint(data: Path) -> dict[str, str]:
    found = {}
    for board in BOARDS:
        for suffix in ("", "-wal"):
            path = Path(f"{journal_file(data, board)}{suffix}")
            if path.exists():
                found[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def test_query_routes_never_write(child_server: ChildServer, session: Session) -> None:
    session.submit(child_server.ws_url, token_for("gs"), [_event("a", "alice", "q-1")])
    data = child_server.config_path.parent / "data"
    before = _fingerprint(data), {board: journaled(data, board) for board in BOARDS}
    body = json.dumps([_event("a", "mallory", "via-http")])
    for path in QUERY_PATHS:
        assert session.http("GET", child_server.url + path).status_code == 200, path
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            for auth in ({}, {"Authorization": f"Bearer {token_for('gs')}"}, {"Authorization": f"Bearer {ADMIN_TOKEN}"}):
                answer = session.http(method, child_server.url + path, content=body, headers=auth)
                assert answer.status_code == 405, (method, path, answer.status_code)
    members = child_server.url + "/v1/boards/a/alltime/members"  # the one public POST: a query all the same
    for auth in ({}, {"Authorization": f"Bearer {token_for('gs')}"}, {"Authorization": f"Bearer {ADMIN_TOKEN}"}):
        for body in (json.dumps({"members": ["alice", "mallory"]}), json.dumps({"members": ["x"], "events": [_event("a", "m", "k")]})):
            assert session.http("POST", members, content=body, headers=auth).status_code == 200
        for method in ("GET", "PUT", "PATCH", "DELETE"):
            assert session.http(method, members, content=body, headers=auth).status_code == 405, method
    assert (_fingerprint(data), {board: journaled(data, board) for board in BOARDS}) == before


def test_audit_lists_a_members_events_only_for_an_admin(child_server: ChildServer, session: Session) -> None:
    session.submit(child_server.ws_url, token_for("scoped"), [_event("a", "carol", "audit-1", 30)])
    session.submit(child_server.ws_url, token_for("gs"), [_event("a", "carol", "audit-2", 40), _event("a", "dave", "audit-3")])
    url = child_server.url + "/v1/boards/a/events"
    for headers in ({}, {"Authorization": f"Bearer {token_for('gs')}"}, {"Authorization": f"Bearer {WRONG_TOKEN}"},
                    {"Authorization": ADMIN_TOKEN}):
        answer = session.http("GET", url, params={"member": "carol"}, headers=headers)
        assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized"
        void = session.http("POST", child_server.url + "/v1/boards/a/void", headers=headers,
                            json={"idempotency_key": "audit-1", "reason": "x"})
        assert void.status_code == 401
    answer = session.http("GET", url, params={"member": "carol"}, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert answer.status_code == 200
    events = answer.json()["events"]
    assert [(e["idempotency_key"], e["source"], e["value"], e["voided"]) for e in events] == [
        ("audit-2", "gs", 40, None), ("audit-1", "scoped", 30, None)]
    for e in events:
        assert e["member"] == "carol"
        assert e["occurred_at"].endswith("Z") and e["received_at"].endswith("Z")
        assert e["occurred_at"] <= e["received_at"]


@pytest.mark.parametrize("name", ["token", "access_token", "api_key", "auth", "secret", "password"])
def test_a_token_sent_in_a_url_is_never_logged(child_server: ChildServer, session: Session, name: str) -> None:
    # Some clients put credentials in the query string; the access log writes the whole path.
    session.http("GET", f"{child_server.url}/v1/boards?{name}={ADMIN_TOKEN}&limit=5")
    session.http("GET", f"{child_server.url}/v1/boards/a/alltime/top?limit=3&{name}={WRONG_TOKEN}")
    for path in ("/v1/stats", "/v1/admin/whoami", "/console", "/v1/boards/a/alltime/search?prefix=x"):  # the console's routes
        session.http("GET", f"{child_server.url}{path}{'&' if '?' in path else '?'}{name}={ADMIN_TOKEN}")
    with connect(f"{child_server.ws_url}?{name}={token_for('scoped')}", additional_headers={"Authorization": f"Bearer {token_for('gs')}"}):
        pass
    with pytest.raises(websockets.InvalidStatus):
        connect(f"{child_server.ws_url}?x=1&{name}={token_for('gs')}")


def test_tokens_never_appear_in_logs_or_answers(child_server: ChildServer, session: Session) -> None:
    # Refused handshakes, failed admin calls and URLs above carried every token; now look for them.
    with pytest.raises(websockets.InvalidStatus):
        connect(child_server.ws_url, additional_headers={"Authorization": f"Bearer {WRONG_TOKEN}"})
    child_server.signal(signal.SIGTERM)
    assert child_server.wait() == 0
    log = child_server.log()
    assert " DEBUG " in log  # the most verbose log there is
    assert "GET /v1/boards?" in log and "[redacted]" in log  # the access log wrote those URLs, blanked
    for token in TOKENS:
        assert token not in log, f"token {token!r} appears in the server log"
        for answer in session.answers:
            assert token not in answer

"""The protocol between the nodes of a cluster, without I/O: its messages as frozen dataclasses,
and `serialise` and the two parsers that both ends share (the client, `arena.cluster.peer.client`;
the server, the `/v1/peer` route in `arena.api.peer`).

A node opens one WebSocket to each peer at `PATH`, with the cluster secret as a bearer token
(`authorization`, `secret_matches`). On it, each request (`Submit`, `Ask`, `Http`, `Watch`)
travels with an ``id`` unique on its connection (`Numbered`), and the peer answers each with the
same ``id`` (`Reply`), in any order, so that many requests share one connection at once:

- `Submit` ``{"op":"submit","board","source","received_at","events":[[member,value,occurred_at,key,meta(,region)],…]}``
  → `Submitted` ``{"results":[[key,status,reason|null],…]}``: one frame's events of one board,
  after their COMMIT on the owner; with ``"moved":true`` when the owner lost the board
  meanwhile: its events answered ``unavailable`` go on to the next owner.
- `Ask` ``{"op":"ask","board","frame":{…}}`` → `Answered` ``{"body":{…}}`` or `Refused`
  ``{"error":{"code","message","status"}}``: a WebSocket query op, answered as the owner's own
  connection would.
- `Http` ``{"op":"http","board","method","path","query","headers":[[name,value],…],"body"}`` →
  `HttpAnswer` ``{"status","headers":[[name,value],…],"body"}``: an HTTP route (queries, admin);
  with an empty ``board``, a route about the peer itself (its `/v1/stats`), answered by any node.
  A body travels as text when it is UTF-8 (JSON bodies are), else byte for byte as latin-1, with
  ``"latin1":true``.
- `Watch` ``{"op":"watch","board","view":{…}}`` → `Watching` ``{"watching":true}``, then a stream
  of `Update` ``{"watch":ID,"seq","body":{…}}`` (the view's answers, as a subscription on the
  owner gets them) and perhaps `Ended` ``{"watch":ID,"ended":CODE,"message"}``, where ID is the
  watch request's id; `Unwatch` ``{"op":"unwatch","watch":ID}`` (no id, no answer) ends it.

Any request may be answered `Elsewhere` ``{"not_here":true}``: the peer does not serve the board
(any more); the forwarder asks again where it is, and the client never sees it. `Refused` also
answers a request the peer failed to serve (503) or could not read (`invalid_request`, 400).

Errors: `ProtocolError`, for a message that is not of this protocol; it carries the request's
``id`` when one could be read, so that the server can answer that request.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from arena.engine.events import Event, Reason, Result, Status
from arena.jsontext import dumps

PATH = "/v1/peer"

Headers = tuple[tuple[str, str], ...]
JsonObject = dict[str, Any]


class ProtocolError(ValueError):
    """A message that is not of the peer protocol. ``id``: the id of the request it was meant to
    be, when one could be read (the server answers it `invalid_request`); None otherwise."""

    def __init__(self, message: str, id: int | None = None) -> None:
        super().__init__(message)
        self.id = id


# -- requests (client → server) ---------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Submit:
    """One frame's events of ``board`` (each of them of that board), read at ``received_at`` from
    game server ``source``."""

    board: str
    source: str
    received_at: int
    events: tuple[Event, ...]


@dataclass(frozen=True, slots=True)
class Ask:
    """A WebSocket query op's frame (its ``id`` left out)."""

    board: str
    frame: JsonObject


@dataclass(frozen=True, slots=True)
class Http:
    """An HTTP request to run through the owner's own routes (``board`` empty: through the
    peer's own routes, about that node)."""

    board: str
    method: str
    path: str
    query: str
    headers: Headers
    body: bytes


@dataclass(frozen=True, slots=True)
class Watch:
    """Stream a live view's answers (its fields, as `arena.live.views.ViewSpec` holds them)."""

    board: str
    view: JsonObject


Request = Submit | Ask | Http | Watch


@dataclass(frozen=True, slots=True)
class Numbered:
    """A request as it travels: with its id on the connection."""

    id: int
    request: Request


@dataclass(frozen=True, slots=True)
class Unwatch:
    """End the watch whose request had id ``watch``; nothing answers it."""

    watch: int


# -- answers (server → client) ----------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Submitted:
    """A `Submit`'s results, in its events' order; ``moved``: the owner lost the board meanwhile."""

    results: tuple[Result, ...]
    moved: bool = False


@dataclass(frozen=True, slots=True)
class Answered:
    """An `Ask`'s answer body."""

    body: JsonObject


@dataclass(frozen=True, slots=True)
class Refused:
    """A request answered with an error: an `Ask`'s query refused, or a request the peer could
    not read or failed to serve."""

    code: str
    message: str
    status: int


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    """An `Http` request's response (without Content-Length)."""

    status: int
    headers: Headers
    body: bytes


@dataclass(frozen=True, slots=True)
class Watching:
    """A `Watch` started: its `Update`s follow."""


@dataclass(frozen=True, slots=True)
class Elsewhere:
    """The peer does not serve the request's board (any more)."""


Answer = Submitted | Answered | Refused | HttpAnswer | Watching | Elsewhere


@dataclass(frozen=True, slots=True)
class Reply:
    """An answer as it travels: with the id of the request it answers."""

    id: int
    answer: Answer


@dataclass(frozen=True, slots=True)
class Update:
    """A watched view's answer: ``body`` without its ``seq``."""

    watch: int
    seq: int
    body: JsonObject


@dataclass(frozen=True, slots=True)
class Ended:
    """A watched view ended (its table left retention): ``code`` says why."""

    watch: int
    code: str
    message: str


ToServer = Numbered | Unwatch
ToClient = Reply | Update | Ended


# -- the handshake ----------------------------------------------------------------------------

def authorization(secret: str) -> str:
    """The handshake's ``Authorization`` header."""
    return f"Bearer {secret}"


def secret_matches(secret: str, header: str | None) -> bool:
    """Whether a handshake's ``Authorization`` header carries the cluster secret; constant time
    in the secret's content. An empty secret (no ``[cluster]``) matches nothing."""
    if not secret or header is None:
        return False
    return hmac.compare_digest(header.encode(), authorization(secret).encode())


# -- serialising ------------------------------------------------------------------------------

def serialise(message: ToServer | ToClient) -> bytes:
    """A message as JSON text (UTF-8). O(size of the message)."""
    if isinstance(message, Update):
        return update_frame(message.watch, message.seq, dumps(message.body))
    return dumps(_fields(message))


def update_frame(watch: int, seq: int, body: bytes) -> bytes:
    """An `Update` whose body is JSON text already: the owner's live views serialise each answer
    once, for every subscriber."""
    return b'{"watch":%d,"seq":%d,"body":%b}' % (watch, seq, body)


def _fields(message: ToServer | ToClient) -> JsonObject:
    match message:
        case Numbered(request_id, request):
            return {**_request_fields(request), "id": request_id}
        case Unwatch(watch):
            return {"op": "unwatch", "watch": watch}
        case Reply(request_id, answer):
            return {**_answer_fields(answer), "id": request_id}
        case Ended(watch, code, text):
            return {"watch": watch, "ended": code, "message": text}
    raise TypeError(f"not a peer message: {message!r}")


def _request_fields(request: Request) -> JsonObject:
    match request:
        case Submit(board, source, received_at, events):
            return {"op": "submit", "board": board, "source": source, "received_at": received_at,
                    "events": [_event_fields(e) for e in events]}
        case Ask(board, frame):
            return {"op": "ask", "board": board, "frame": frame}
        case Http(board, method, path, query, headers, body):
            return {"op": "http", "board": board, "method": method, "path": path, "query": query,
                    "headers": [list(h) for h in headers], **_body_fields(body)}
        case Watch(board, view):
            return {"op": "watch", "board": board, "view": view}


def _answer_fields(answer: Answer) -> JsonObject:
    match answer:
        case Submitted(results, moved):
            fields: JsonObject = {"results": [[r.idempotency_key, r.status.value, r.reason.value if r.reason else None]
                                              for r in results]}
            messages = [r.message for r in results]
            if any(messages):  # beside the results, which keep their shape: a node of the release before ignores it
                fields["messages"] = messages
            return {**fields, "moved": True} if moved else fields
        case Answered(body):
            return {"body": body}
        case Refused(code, message, status):
            return {"error": {"code": code, "message": message, "status": status}}
        case HttpAnswer(status, headers, body):
            return {"status": status, "headers": [list(h) for h in headers], **_body_fields(body)}
        case Watching():
            return {"watching": True}
        case Elsewhere():
            return {"not_here": True}


def _body_fields(body: bytes) -> JsonObject:
    try:
        return {"body": body.decode()}
    except UnicodeDecodeError:
        return {"body": body.decode("latin-1"), "latin1": True}


# -- parsing ----------------------------------------------------------------------------------

_LONG_NUMBER = re.compile(rb"\d{19}")


def _loads(data: str | bytes) -> JsonObject:
    """A message's JSON object. orjson reads an integer literal beyond 64 bits as a float: a
    message with a 19-digit run (rare) is read by json, exactly. Raises ProtocolError."""
    raw = data if isinstance(data, bytes) else data.encode()
    try:
        value = json.loads(raw) if _LONG_NUMBER.search(raw) else orjson.loads(raw)
    except (ValueError, RecursionError) as exc:  # orjson.JSONDecodeError is a ValueError
        raise ProtocolError("a peer message must be JSON text") from exc
    if not isinstance(value, dict):
        raise ProtocolError("a peer message must be a JSON object")
    return value


def parse_request(data: str | bytes) -> ToServer:
    """What a client sent. Raises ProtocolError (with the request's id when it could be read)."""
    message = _loads(data)
    op = message.get("op")
    if op == "unwatch":
        return Unwatch(_int(message, "watch"))
    request_id = message.get("id")
    if type(request_id) is not int:
        raise ProtocolError("a peer request must have an integer id")
    read = _REQUESTS.get(op) if isinstance(op, str) else None
    try:
        if read is None:
            raise ProtocolError(f"unknown peer op {op!r}")
        return Numbered(request_id, read(message, _str(message, "board")))
    except ProtocolError as exc:
        raise ProtocolError(str(exc), request_id) from None


def parse_answer(data: str | bytes) -> ToClient:
    """What a server sent. Raises ProtocolError."""
    message = _loads(data)
    watch = message.get("watch")
    if watch is not None:
        if "ended" in message:
            return Ended(_int(message, "watch"), _str(message, "ended"), _str(message, "message"))
        return Update(_int(message, "watch"), _int(message, "seq"), _object(message, "body"))
    request_id = _int(message, "id")
    if message.get("not_here") is True:
        return Reply(request_id, Elsewhere())
    if message.get("watching") is True:
        return Reply(request_id, Watching())
    if "results" in message:
        results = [_result(fields) for fields in _list(message, "results")]
        messages = _list(message, "messages") if "messages" in message else [None] * len(results)
        if len(messages) != len(results) or not all(m is None or isinstance(m, str) for m in messages):
            raise ProtocolError("messages must be a string or null per result")
        return Reply(request_id, Submitted(tuple(r._replace(message=m) for r, m in zip(results, messages, strict=True)),
                                           message.get("moved") is True))
    if "error" in message:
        error = _object(message, "error")
        return Reply(request_id, Refused(_str(error, "code"), _str(error, "message"), _int(error, "status")))
    if "status" in message:
        return Reply(request_id, HttpAnswer(_int(message, "status"), _headers(message), _body(message)))
    if "body" in message:
        return Reply(request_id, Answered(_object(message, "body")))
    raise ProtocolError("a peer answer of no known kind")


def _submit(message: JsonObject, board: str) -> Submit:
    return Submit(board, _str(message, "source"), _int(message, "received_at"),
                  tuple(_event(board, fields) for fields in _list(message, "events")))


def _ask(message: JsonObject, board: str) -> Ask:
    return Ask(board, _object(message, "frame"))


def _http(message: JsonObject, board: str) -> Http:
    return Http(board, _str(message, "method"), _str(message, "path"), _str(message, "query"), _headers(message),
                _body(message))


def _watch(message: JsonObject, board: str) -> Watch:
    return Watch(board, _object(message, "view"))


_REQUESTS: dict[str, Callable[[JsonObject, str], Request]] = {"submit": _submit, "ask": _ask, "http": _http, "watch": _watch}


def _event_fields(e: Event) -> list[object]:
    """An event on the wire; its region last, and only when it has one (so that an event
    without one reads the same to a node from before regions)."""
    fields: list[object] = [e.member, e.value, e.occurred_at, e.idempotency_key, e.meta]
    return fields if e.region is None else [*fields, e.region]


def _event(board: str, fields: object) -> Event:
    if not isinstance(fields, list) or len(fields) not in (5, 6):
        raise ProtocolError("an event must be [member, value, occurred_at, key, meta(, region)]")
    member, value, occurred_at, key, meta, *rest = fields
    region = rest[0] if rest else None
    if not (isinstance(member, str) and type(value) is int and type(occurred_at) is int and isinstance(key, str)
            and (meta is None or isinstance(meta, str)) and (region is None or isinstance(region, str))):
        raise ProtocolError("an event must be [member, value, occurred_at, key, meta(, region)]")
    return Event(board, member, value, occurred_at, key, meta, region)


def _result(fields: object) -> Result:
    if not isinstance(fields, list) or len(fields) != 3:
        raise ProtocolError("a result must be [key, status, reason]")
    key, status, reason = fields
    if key is not None and not isinstance(key, str):
        raise ProtocolError("a result's key must be a string or null")
    try:
        return Result(key, Status(status), Reason(reason) if reason is not None else None)
    except ValueError:
        raise ProtocolError(f"a result of unknown status {status!r} or reason {reason!r}") from None


def _headers(message: JsonObject) -> Headers:
    headers = _list(message, "headers")
    if not all(isinstance(h, list) and len(h) == 2 and isinstance(h[0], str) and isinstance(h[1], str) for h in headers):
        raise ProtocolError("headers must be [name, value] pairs of strings")
    return tuple((name, value) for name, value in headers)


def _body(message: JsonObject) -> bytes:
    text = _str(message, "body")
    try:
        return text.encode("latin-1") if message.get("latin1") is True else text.encode()
    except UnicodeEncodeError:
        raise ProtocolError("a body must be UTF-8 text, or latin-1 text flagged latin1") from None


def _str(message: JsonObject, name: str) -> str:
    value = message.get(name)
    if not isinstance(value, str):
        raise ProtocolError(f"{name} must be a string")
    return value


def _int(message: JsonObject, name: str) -> int:
    value = message.get(name)
    if type(value) is not int:
        raise ProtocolError(f"{name} must be an integer")
    return value


def _list(message: JsonObject, name: str) -> list[Any]:
    value = message.get(name)
    if not isinstance(value, list):
        raise ProtocolError(f"{name} must be a list")
    return value


def _object(message: JsonObject, name: str) -> JsonObject:
    value = message.get(name)
    if not isinstance(value, dict):
        raise ProtocolError(f"{name} must be an object")
    return value

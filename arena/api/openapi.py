"""`GET /v1/openapi.json`: the OpenAPI 3.1 document of every HTTP route, as data built once.

Each operation lists its parameters, body and the error codes of the contract it can answer
(`{"error":{"code","message"}}`). `tests/api/test_openapi.py` holds it against the app's own
route table both ways, so a route served without a document here (or documented and not
served) fails the tests. WebSocket routes (`/v1/ws`, `/v1/live`) are outside OpenAPI's paths;
their frames are schemas of `components.schemas` (`ClientFrame`, `ServerFrame` and their parts),
from which clients generate their types (clients/js); docs/protocol.md tells the protocol.
"""

from __future__ import annotations

from typing import Any

from arena.api.live import TABLE_FIELDS as VIEW_TABLE_FIELDS
from arena.api.live import VIEW_FIELDS
from arena.api.queries import (
    FEED_LIMIT,
    MAX_AUDIT_LIMIT,
    MAX_FEED_LIMIT,
    MAX_LIMIT,
    MAX_MEMBER_CODE_POINTS,
    MAX_MEMBERS,
    MAX_PARTITIONS_LIMIT,
    MAX_RADIUS,
    MAX_SEARCH_LIMIT,
)
from arena.api.ws import MAX_ECHOED_CHARS
from arena.engine.events import MAX_KEY_CHARS, MAX_MEMBER_CHARS, MAX_META_BYTES, Reason, Status
from arena.engine.periods import PeriodKind

PATH = "/v1/openapi.json"
JSON = "application/json"
TABLE = "/v1/boards/{board}/{period}"

Doc = dict[str, Any]


def _ref(name: str) -> Doc:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(required: list[str], **properties: Doc) -> Doc:
    return {"type": "object", "required": required, "properties": properties}


def _json(schema: Doc, description: str) -> Doc:
    return {"description": description, "content": {JSON: {"schema": schema}}}


def _error_body(*codes: str) -> Doc:
    code = {"type": "string", "enum": list(codes)}
    return _object(["error"], error=_object(["code", "message"], code=code, message={"type": "string"}))


def _error(description: str, *codes: str) -> Doc:
    return _json(_error_body(*codes), description)


def _param(name: str, where: str, schema: Doc, description: str, required: bool = False) -> Doc:
    return {"name": name, "in": where, "required": required or where == "path", "description": description, "schema": schema}


def _int(low: int, high: int | None = None, default: int | None = None, description: str | None = None) -> Doc:
    schema: Doc = {"type": "integer", "minimum": low}
    if description is not None:
        schema["description"] = description
    if high is not None:
        schema["maximum"] = high
    if default is not None:
        schema["default"] = default
    return schema


_STRING = {"type": "string"}
_TIME = {"type": "string", "format": "date-time", "description": "RFC 3339 UTC with milliseconds and Z"}
_NULLABLE_TIME = {"type": ["string", "null"], "format": "date-time", "description": "null for the alltime table"}

BOARD = _param("board", "path", _STRING, "a board of config.toml")
PERIOD = _param("period", "path", _STRING, "a period kind (" + ", ".join(PeriodKind) + ") or one of the board's custom periods")
MEMBER = _param("member", "path", _STRING, "percent-encoded; may contain '/'")
PERIOD_ID = _param("period_id", "query", _STRING, (
    "a past table: 2026-12-02T13, 2026-12-02, 2026-W49, 2026-12, 2026; a custom period's 2026-01-05 or 2026-01-05T06Z"
    " (default: the current one)"))
PARTITION = _param("partition", "query", _STRING, (
    "a partition of the table (a region, or a league's division; GET .../partitions lists them); default: the global table"))
RADIUS = _param("radius", "query", _int(0, MAX_RADIUS, 5), "neighbours on each side, clipped at both ends")
ADMIN_HEADERS = "Authorization: Bearer <token> of an [[admins]] entry"
SERVER_HEADERS = "Authorization: Bearer <token> of a [[servers]] entry (a game server)"

TABLE_MISSING = ("unknown_board", "unknown_period", "period_not_retained", "unknown_partition")
INVALID = _error("a bad parameter or body", "invalid_request")
UNAUTHORIZED = _error("no valid admin token", "unauthorized")
NOT_READY = _error("the board is still loading its tables, or failed", "not_ready", "unavailable")


def _operation(summary: str, parameters: list[Doc], ok: Doc, errors: dict[str, Doc], **extra: Any) -> Doc:
    return {"summary": summary, "parameters": parameters, "responses": {"200": ok, **errors}, **extra}


EVENT_STREAM = {"schema": {"type": "string", "description": (
    "With Accept: text/event-stream, a live view of the answer: `event: update`, `id: <seq>`, `data:` the answer "
    "with its `seq`, at once and after each change (at most one per push_interval_ms), and a `: ping` comment "
    "every 15 s. A member not in the table is a state (entry null), not a 404."
)}}


def _table_query(
    summary: str, parameters: list[Doc], answer: str, *, invalid: bool = False, member: bool = False, live: bool = False,
    **extra: Any,
) -> Doc:
    """A table query: board, period and period_id, and the errors every table query may answer;
    ``live``: it also streams as server-sent events."""
    errors = {"400": INVALID} if invalid else {}
    errors["404"] = _error("no such board, period or table" + (", or no entry" if member else ""),
                           *TABLE_MISSING, *(("member_not_found",) if member else ()))
    errors["503"] = NOT_READY
    ok = _json(_ref(answer), "the table's answer")
    if live:
        ok["content"]["text/event-stream"] = EVENT_STREAM
    return _operation(summary, [BOARD, PERIOD, *parameters, PERIOD_ID, PARTITION], ok, errors, **extra)


def _admin(summary: str, parameters: list[Doc], ok: Doc, missing: tuple[str, ...], **extra: Any) -> Doc:
    errors = {"400": INVALID, "401": UNAUTHORIZED, "404": _error("not found", *missing), "503": _error("the board failed", "unavailable")}
    return _operation(summary, [BOARD, *parameters], ok, errors, security=[{"admin": []}], **extra)


_OUTBOX_DOWN = _error("the webhooks' outbox cannot be reached", "unavailable")
_WEBHOOK = _object(["id", "url", "boards", "max_age_hours", "deliveries"], id=_STRING,
                   url={"type": "string", "description": "without credentials"}, boards={"type": "array", "items": _STRING},
                   max_age_hours={"type": "number"},
                   deliveries=_object(["pending", "delivered", "failed"], pending={"type": "integer"},
                                      delivered={"type": "integer"}, failed={"type": "integer"}))
_NULLABLE_INT = {"type": ["integer", "null"]}
_DELIVERY = _object(
    ["delivery", "state", "attempts", "next_at", "last_error", "board", "period", "period_id", "partition", "revision", "page",
     "created_at", "delivered_at"],
    delivery={"type": "string", "description": "the Arena-Delivery id: <board>/<period>/<period_id>/<partition or *>/<revision>[/<page>]"},
    state={"type": "string", "enum": ["pending", "delivered", "failed"]}, attempts={"type": "integer"},
    next_at={"type": "integer", "description": "epoch ms of the next attempt (pending)"}, last_error={"type": ["string", "null"]},
    board=_STRING, period=_STRING, period_id=_STRING, partition={"type": ["string", "null"]}, revision={"type": "integer"},
    page=_NULLABLE_INT, created_at={"type": "integer", "description": "epoch ms"},
    delivered_at={**_NULLABLE_INT, "description": "epoch ms"})


def _webhook_op(summary: str, parameters: list[Doc], ok: Doc, missing: tuple[str, ...] = ()) -> Doc:
    errors = {"400": INVALID, "401": UNAUTHORIZED, "404": _error("no such webhook or delivery", "unknown_webhook", *missing),
              "503": _OUTBOX_DOWN}
    return _operation(summary, [_param("webhook", "path", _STRING, "a webhook's id"), *parameters], ok, errors,
                      security=[{"admin": []}])


def _body(schema: Doc) -> Doc:
    return {"required": True, "content": {JSON: {"schema": schema}}}


def _with(base: str, **properties: Doc) -> Doc:
    """Schema ``base`` plus more required properties."""
    return {"allOf": [_ref(base), _object(list(properties), **properties)]}


ENTRY = _object(["rank", "member", "score", "reached_at"], rank=_int(1), member=_STRING, score={"type": "integer"}, reached_at=_TIME)
SEQ = {**_int(0), "description": "the board's last journal seq the answer reflects; on one WebSocket connection, "
       "answers about one board never go back in seq"}
TABLE_FIELDS = _object(
    ["board", "period", "period_id", "start", "end", "closed", "size", "seq"],
    board=_STRING,
    period=_STRING,
    period_id=_STRING,
    start=_NULLABLE_TIME,
    end=_NULLABLE_TIME,
    closed={"type": "boolean"},
    size=_int(0),
    seq=SEQ,
    partition={**_STRING, "description": "a partition's table only: its name (absent: the global table)"},
)
_ENTRIES = {"type": "array", "items": _ref("Entry")}
_VOID_EVENT = _object(["board", "idempotency_key", "voided", "already_voided"], board=_STRING, idempotency_key=_STRING,
                      voided=_int(0, 1), already_voided={"type": "boolean", "description": "voided before: the call changed nothing"})
_VOID_MEMBER = _object(["board", "member", "voided"], board=_STRING, member=_STRING,
                       voided=_int(0, description="events voided by this call (0 when none was left)"))

_AWARD = _object(["rank", "member", "score", "reward"], rank=_int(1), member=_STRING, score={"type": "integer"}, reward=_STRING)
_TIER = {"type": "object", "required": ["reward"], "description": "a prize tier as defined: reward and one of ranks, "
         "top_percent or score", "properties": {
             "reward": _STRING, "ranks": {"type": "array", "items": _int(1), "minItems": 2, "maxItems": 2},
             "top_percent": {"type": "number", "exclusiveMinimum": 0, "maximum": 100}, "score": {"type": "integer"},
             "tier": {**_STRING, "description": "a league board only: the league tier whose divisions it is for"}}}
_CHANGE = _object(["member", "before", "after"], member=_STRING, before={"type": ["string", "null"]},
                  after={"type": ["string", "null"]})

_COUNTS = {"type": "array", "items": _int(0), "description": "one value per second, oldest first"}
_MS = {"type": "array", "items": {"type": ["number", "null"]}, "description": "milliseconds per second, null without samples"}
_DURATIONS = _object(["count", "mean", "max"], count=_COUNTS, mean=_MS, max=_MS)

_DIVISIONS = {"type": "object", "properties": {"divisions": {
    "type": "object", "additionalProperties": {"type": ["string", "null"]},
    "description": "a league board's global table only: each listed member's division in the window (null: none yet)"}}}

SCHEMAS: Doc = {
    "Entry": ENTRY,
    "Table": TABLE_FIELDS,
    "TableEntries": _with("Table", entries=_ENTRIES),
    "TableEntry": _with("Table", entry=_ref("Entry")),
    "MemberEntry": {"allOf": [_ref("TableEntry"), {"type": "object", "properties": {"division": {
        "type": ["string", "null"],
        "description": "a league board's global table only: the member's division in the window (null: none yet)"}}}]},
    "TableMembers": {"allOf": [_with("Table", entries=_ENTRIES, missing={"type": "array", "items": _STRING}), _DIVISIONS]},
    "TableSearch": {"allOf": [_ref("TableEntries"), _DIVISIONS]},
    "Percentile": _with("Table", entry=_ref("Entry"), top_percent={"type": "number"}),
    "ScoreAtPercentile": _with("Table", p={"type": "number"}, entry={"oneOf": [_ref("Entry"), {"type": "null"}]}),
    "Digest": _with("Table", sha256={"type": "string", "pattern": "^[0-9a-f]{64}$"}),
    "Award": _AWARD,
    "Settlement": {"allOf": [_with(
        "Table",
        revision=_int(0, description="0 at the close; each void that changes an award adds one"),
        sha256={"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "of every award, one line "
                "rank\\tmember\\tscore\\treward\\n each in rank order"},
        tiers={"type": "array", "items": _TIER, "description": "the prize tiers in force"},
        awards_total=_int(0),
        awards={"type": "array", "items": _ref("Award"), "description": "the page asked (limit, offset), in rank order"},
    ), {"type": "object", "properties": {
        "preview": {"const": True, "description": "an open table's awards if it closed now: not journaled"},
        "changes": {"type": "array", "items": _CHANGE, "description": "after revision 0: members whose reward changed"},
    }}]},
    "SettlementMember": _with(
        "Table",
        revision=_int(0, description="the latest revision"),
        sha256={"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "the revision's"},
        member=_STRING,
        award={"oneOf": [_ref("Award"), {"type": "null"}], "description": "null: no reward in this revision"},
    ),
    "SettlementFeed": _object(
        ["items", "next"],
        items={"type": "array", "items": _ref("SettlementFeedItem"), "description": "in log order"},
        next=_int(0, description="the cursor to pass as `after` next: the last item's, or `after` when there is none"),
    ),
    "SettlementFeedItem": _object(
        ["cursor", "board", "period", "period_id", "partition", "revision", "seq", "sha256", "awards"],
        cursor=_int(1, description="the revision's position in the settlement log"),
        board=_STRING,
        period=_STRING,
        period_id=_STRING,
        partition={"type": ["string", "null"], "description": "a region or division; null: the global table"},
        revision=_int(0),
        seq=_int(1, description="the board's journal seq of the revision"),
        sha256={"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "the revision's (see Settlement)"},
        awards=_int(0, description="the number of awards: read them at /v1/boards/{board}/{period}/settlement"),
    ),
    "Partitions": _with(
        "Table",
        partitions={"type": "array", "items": _object(["partition", "size"], partition=_STRING, size=_int(0))},
        next={"type": ["string", "null"], "description": "the last partition listed when more follow (the next page's after)"},
    ),
    "Periods": _object(
        ["board", "period", "periods", "seq"],
        board=_STRING,
        period=_STRING,
        seq=SEQ,
        periods={"type": "array", "items": _object(
            ["period_id", "start", "end", "closed", "closed_at", "size", "disputes", "revision"],
            period_id=_STRING, start=_NULLABLE_TIME, end=_NULLABLE_TIME, closed={"type": "boolean"},
            closed_at={"type": ["string", "null"], "format": "date-time"}, size=_int(0), disputes=_int(0),
            revision={"type": ["integer", "null"], "minimum": 0,
                      "description": "the latest revision of its settlement (null: not settled)"},
        )},
    ),
    "Stats": _object(
        ["seconds", "start", "end", "events", "visibility_ms", "query_ms"],
        seconds=_int(1),
        start={**_TIME, "description": "the start of the first second of every series"},
        end={**_TIME, "description": "the end of the last (current) second"},
        events=_object(["accepted", "duplicate", "rejected"], accepted=_COUNTS, duplicate=_COUNTS, rejected={
            "type": "object", "additionalProperties": _COUNTS, "description": "by reason; only reasons seen in the window",
        }),
        visibility_ms={**_DURATIONS, "description": "from reading an event's frame to the event being queryable"},
        query_ms={**_DURATIONS, "description": "HTTP query latency inside the server"},
        nodes={"type": "array", "items": _STRING, "description": "cluster only: the nodes whose figures these are "
               "(counts summed; mean and max: the largest of any node that second)"},
        unanswered={"type": "array", "items": _STRING, "description": "cluster only: live nodes that did not answer "
                    "in time, left out of the figures"},
    ),
    "Audit": _object(["board", "member", "events"], board=_STRING, member=_STRING, events={"type": "array", "items": _object(
        ["seq", "member", "value", "occurred_at", "received_at", "source", "idempotency_key", "meta", "voided"],
        seq=_int(1), member=_STRING, value={"type": "integer"}, occurred_at=_TIME, received_at=_TIME, source=_STRING,
        idempotency_key=_STRING, meta={"type": ["object", "null"], "description": "as sent"},
        voided={"oneOf": [{"type": "null"}, {**_object(["seq", "reason", "admin", "at"], seq=_int(1), reason=_STRING,
                                                       admin=_STRING, at=_TIME),
                                            "description": "the void record: its journal seq, reason, admin id and time"}]},
    )}),
    "Boards": _object(["boards", "next"], boards={"type": "array", "items": _object(
        ["board", "aggregation", "order", "tie", "state", "active", "retired", "metadata", "prizes", "periods"],
        board=_STRING,
        aggregation={"enum": ["best", "sum", "latest"]},
        order={"enum": ["desc", "asc"]},
        tie={"enum": ["earliest", "latest"]},
        state={"enum": ["loading", "ready", "failed", "elsewhere"]},
        active={"type": "boolean", "description": "its tables are in memory"},
        retired={"type": "boolean", "description": "retired: it takes no more events; its tables stay queryable"},
        metadata={"type": ["object", "null"], "description": "the definition's metadata (title, category...)"},
        prizes={"type": "object", "additionalProperties": {"type": "array", "items": _TIER},
                "description": "the prize tiers in force by period; a period without prizes is absent"},
        periods={"type": "array", "items": {"type": "object", "description": "table fields without board, and partitions"}},
    )}, next={"type": ["string", "null"], "description": "more boards follow: pass it as `after` for the next page"}),
    "BoardDefinition": _object(
        ["board", "version", "managed_by", "retired", "definition"],
        board=_STRING,
        version=_int(0, description="the catalog's version of an API board (If-Match); 0 for a config board"),
        managed_by={"enum": ["api", "config"]},
        retired={"type": "boolean"},
        definition={"type": "object", "description": "the keys of a [boards.NAME] table, metadata included"},
    ),
    "Cluster": _object(
        ["node", "nodes", "boards"],
        node={"type": ["string", "null"], "description": "this node; null on sqlite (no cluster)"},
        nodes={"type": "array", "items": _object(
            ["node_id", "url", "alive", "boards"], node_id=_STRING, url=_STRING, alive={"type": "boolean"},
            boards={"type": "array", "items": _STRING},
        )},
        boards={"type": "object", "additionalProperties": _object(
            ["owner", "epoch", "standbys"], owner={"type": ["string", "null"]}, epoch=_int(0),
            standbys={"type": "array", "items": _STRING},
        )},
        config_mismatch={"type": "array", "items": _STRING,
                         "description": "on postgresql: the config boards the live nodes' configs define differently"},
    ),
}


# -- WebSocket frames (`/v1/ws`, and `/v1/live` without submit) ------------------------------------

_ID = {"type": ["string", "integer"], "maxLength": MAX_ECHOED_CHARS,
       "description": "chosen by the client, echoed in the answer: a string of at most 128 code points or an integer"}
_ECHOED_ID = {"type": ["string", "integer", "null"], "description": "the frame's id; null when it had none or a bad one"}
_SUB = {"type": "string", "maxLength": MAX_ECHOED_CHARS, "description": "a subscription, unique on its connection"}
_VIEW_FIELD_SCHEMAS: Doc = {
    "limit": _int(1, MAX_LIMIT, 10),
    "offset": _int(0, default=0),
    "member": {"type": "string", "minLength": 1, "maxLength": MAX_MEMBER_CHARS},
    "rank": _int(1, description="around: the rank at the centre, instead of member"),
    "radius": _int(0, MAX_RADIUS, 5),
    "p": {"type": "number", "exclusiveMinimum": 0, "maximum": 100},
    "members": {"type": "array", "items": _STRING, "minItems": 1, "maxItems": MAX_MEMBERS},
}
_VIEW_ANSWERS = {"top": "TableEntries", "rank": "MemberEntry", "around": "TableEntries", "percentile": "Percentile",
                 "score_at_percentile": "ScoreAtPercentile", "members": "TableMembers"}
"""Each query op's answer: its HTTP route's body."""


def _view_name(op: str) -> str:
    return "".join(part.title() for part in op.split("_")) + "View"


def _view(op: str) -> Doc:
    """A query op's fields (a WS query frame without its id, or a subscription's view)."""
    own = VIEW_FIELDS[op]
    either = op == "around"  # member or rank
    required = ["op", "board", "period", *(name for name, default in own.items() if default is None and not either)]
    schema = _object(required, op={"const": op}, board=_STRING, period=PERIOD["schema"],
                     period_id={"type": ["string", "null"], "description": "a past table (default: the current one)"},
                     partition={"type": ["string", "null"], "description": "a partition of the table (default: the global one)"},
                     **{name: _VIEW_FIELD_SCHEMAS[name] for name in own})
    schema["description"] = "exactly these fields: another one is invalid_request"
    if either:
        schema["oneOf"] = [{"required": ["member"]}, {"required": ["rank"]}]
    assert set(schema["properties"]) == {"op", *VIEW_TABLE_FIELDS, *own}
    return schema


def _frame(op: str, required: list[str], **properties: Doc) -> Doc:
    return _object(["op", *required], op={"const": op}, **properties)


_VIEWS = [_view_name(op) for op in VIEW_FIELDS]
_ANSWERS = sorted(set(_VIEW_ANSWERS.values()))
_NULLABLE_ENTRY = {"oneOf": [_ref("Entry"), {"type": "null"}], "description": "null: the member is not (yet) in the table"}
_EVENT = _object(
    ["board", "member", "value", "occurred_at", "idempotency_key"],
    board=_STRING,
    member={"type": "string", "minLength": 1, "maxLength": MAX_MEMBER_CHARS, "description": "no control characters"},
    value={"type": "integer", "description": "within the board's min_value..max_value"},
    occurred_at={"type": ["integer", "string"], "description": "epoch milliseconds, or RFC 3339 with an offset"},
    idempotency_key={"type": "string", "minLength": 1, "maxLength": MAX_KEY_CHARS,
                     "description": "unique per board, forever; a resend with the same key is `duplicate`"},
    meta={"type": ["object", "null"], "description": f"at most {MAX_META_BYTES} bytes as compact JSON; stored for audit"},
)

FRAME_SCHEMAS: Doc = {
    "ScoreEvent": _EVENT,
    **{_view_name(op): _view(op) for op in VIEW_FIELDS},
    "View": {"oneOf": [_ref(name) for name in _VIEWS], "description": "a table query op with exactly its fields"},
    "SubmitFrame": _frame("submit", ["id", "events"], id=_ID, events={
        "type": "array", "items": _ref("ScoreEvent"), "minItems": 1, "description": "1..max_batch (default 1000)"}),
    "QueryFrame": {"allOf": [_ref("View"), _object([], id=_ID)], "description": "answered by a ResultFrame or an ErrorFrame"},
    "PingFrame": _frame("ping", [], id=_ID),
    "SubscribeFrame": _frame("subscribe", ["view"], id=_ID, view=_ref("View")),
    "UnsubscribeFrame": _frame("unsubscribe", ["sub"], id=_ID, sub=_SUB),
    "ClientFrame": {"oneOf": [_ref(n) for n in ("SubmitFrame", "QueryFrame", "PingFrame", "SubscribeFrame", "UnsubscribeFrame")],
                    "description": "a text frame a client sends (submit only on /v1/ws, with a game server's token)"},
    "SubmitResult": _object(
        ["idempotency_key", "status"],
        idempotency_key={"type": ["string", "null"]},
        status={"enum": [s.value for s in Status]},
        reason={"type": "string", "description": "rejected only: " + ", ".join(r.value for r in Reason)
                + " (and any reason of docs/protocol.md); unavailable: resend later with the same key"},
        message={"type": "string", "description": "rejected only: one line for a person; match on reason"},
    ),
    "AckFrame": _frame("ack", ["id", "results"], id=_ECHOED_ID, results={
        "type": "array", "items": _ref("SubmitResult"), "description": "one per event, in the submitted order"}),
    "ResultFrame": {"allOf": [_frame("result", ["id"], id=_ECHOED_ID), {"anyOf": [_ref(a) for a in _ANSWERS]}],
                    "description": "a query's answer: the HTTP route's body"},
    "PongFrame": _frame("pong", ["id"], id=_ECHOED_ID),
    "SubscribedFrame": _frame("subscribed", ["id", "sub"], id=_ECHOED_ID, sub=_SUB),
    "UnsubscribedFrame": _frame("unsubscribed", ["id", "sub"], id=_ECHOED_ID, sub=_SUB),
    "Update": {"allOf": [_ref("Table"), _object([], entry=_NULLABLE_ENTRY, entries=_ENTRIES,
                                                missing={"type": "array", "items": _STRING},
                                                top_percent={"type": ["number", "null"]}, p={"type": "number"})],
               "description": "a live view's whole answer: the query's body (the fields of its op's answer), where a "
                              "member not in the table is entry null (top_percent null) or entries []"},
    "UpdateFrame": {"allOf": [_frame("update", ["sub", "seq"], sub=_SUB, seq=SEQ), _ref("Update")]},
    "ErrorFrame": _frame("error", ["id", "code", "message"], id=_ECHOED_ID, code={"type": "string", "description": (
        "bad_frame, unknown_op, batch_too_large, invalid_request, forbidden, too_many_subscriptions, or a query "
        "error of the HTTP API (unknown_board, unknown_period, period_not_retained, member_not_found, not_ready, "
        "unavailable)")}, message=_STRING, sub={**_SUB, "description": "the subscription this error ends"}),
    "ServerFrame": {"oneOf": [_ref(n) for n in ("AckFrame", "ResultFrame", "PongFrame", "SubscribedFrame",
                                                "UnsubscribedFrame", "UpdateFrame", "ErrorFrame")],
                    "description": "a text frame the server sends"},
}
"""The WebSocket frames, both ways."""
SCHEMAS.update(FRAME_SCHEMAS)

PATHS: Doc = {
    "/v1/boards": {"get": _operation("Boards and their current tables, by name, paged", [
        _param("limit", "query", _int(1, 1000, 1000), "boards per page"),
        _param("after", "query", _STRING, "list the boards named after this one (the previous page's next)"),
        _param("category", "query", _STRING, "only the boards whose metadata.category is this"),
    ], _json(_ref("Boards"), "the boards"), {"400": INVALID})},
    "/v1/boards/{board}": {
        "put": _operation(
            "Create (201) or change (200) an API board; an identical definition journals nothing", [
                BOARD, _param("If-Match", "header", _STRING, "the version the change is based on: 412 when stale")],
            _json(_ref("BoardDefinition"), "changed, or unchanged"), {
                "201": _json(_ref("BoardDefinition"), "created"), "400": _error("a definition the config check refuses",
                                                                                 "invalid_request"),
                "401": UNAUTHORIZED,
                "409": _error("declared in config.toml, retired, a fixed field changed once events exist, or max_boards",
                              "managed_by_config", "board_retired", "definition_conflict", "too_many_boards"),
                "412": _error("If-Match names another version", "precondition_failed"),
                "503": _error("the board's owner cannot be reached", "unavailable")},
            security=[{"admin": []}], requestBody=_body({"type": "object", "description": "the keys of a [boards.NAME] table"})),
        "delete": _operation("Retire an API board: its open tables close, it takes no more events", [BOARD],
                             _json(_ref("BoardDefinition"), "retired"), {
                                 "401": UNAUTHORIZED, "404": _error("no such board", "unknown_board"),
                                 "409": _error("declared in config.toml", "managed_by_config"),
                                 "503": _error("the board's owner cannot be reached", "unavailable")},
                             security=[{"admin": []}]),
    },
    "/v1/boards/{board}/definition": {"get": _admin("A board's definition and version", [],
                                                    _json(_ref("BoardDefinition"), "the definition"), ("unknown_board",))},
    "/v1/cluster": {"get": _operation("The nodes and each board's owner, as the journal says", [],
                                      _json(_ref("Cluster"), "the cluster"),
                                      {"503": _error("the journal's database cannot be reached", "unavailable")})},
    f"{TABLE}/top": {"get": _table_query("Entries at ranks offset+1 .. offset+limit", [
        _param("limit", "query", _int(1, MAX_LIMIT, 10), "entries to return"),
        _param("offset", "query", _int(0, default=0), "entries to skip; past the end gives no entries"),
    ], "TableEntries", invalid=True, live=True)},
    f"{TABLE}/members/{{member}}": {"get": _table_query("A member's entry", [MEMBER], "MemberEntry", member=True, live=True)},
    f"{TABLE}/members": {"post": _table_query(
        "A set of members (friends): those in the table in rank order with their global ranks, and the missing",
        [], "TableMembers", invalid=True, requestBody=_body(_object(["members"], members={
            "type": "array", "items": _STRING, "minItems": 1, "maxItems": MAX_MEMBERS,
            "description": "repeats are ignored; missing lists the others, first occurrences in request order",
        })),
    )},
    f"{TABLE}/around/{{member}}": {"get": _table_query("A member's neighbours", [MEMBER, RADIUS], "TableEntries",
                                                       invalid=True, member=True, live=True)},
    f"{TABLE}/around": {"get": _table_query("The entries around a rank", [
        _param("rank", "query", _int(1), "the rank at the centre", required=True), RADIUS,
    ], "TableEntries", invalid=True, live=True)},
    f"{TABLE}/percentile/{{member}}": {"get": _table_query("A member's entry and top_percent = 100 * rank / size", [MEMBER],
                                                           "Percentile", member=True, live=True)},
    f"{TABLE}/score_at_percentile": {"get": _table_query("The entry at rank ceil(p / 100 * size), null on an empty table", [
        _param("p", "query", {"type": "number", "exclusiveMinimum": 0, "maximum": 100}, "the percentage", required=True),
    ], "ScoreAtPercentile", invalid=True, live=True)},
    f"{TABLE}/search": {"get": _table_query(
        "The members whose name starts with a prefix, in code point order, each with its rank. O(log n + limit log n)", [
            _param("prefix", "query", {"type": "string", "minLength": 1, "maxLength": MAX_MEMBER_CODE_POINTS},
                   "case-sensitive, code points as sent (no normalisation)", required=True),
            _param("limit", "query", _int(1, MAX_SEARCH_LIMIT, 20), "members to return"),
        ], "TableSearch", invalid=True)},
    f"{TABLE}/digest": {"get": _table_query("sha256 of the canonical standings and the journal seq it reflects. O(n)", [],
                                            "Digest")},
    f"{TABLE}/settlement": {"get": _operation(
        "What the table's prizes award: a closed table's journaled settlement (its latest revision, or the one "
        "named); with preview=true on an open table, what it would award if it closed now", [
            BOARD, PERIOD,
            _param("preview", "query", {"type": "boolean", "default": False}, "true: an open table's awards as of now"),
            _param("revision", "query", _int(0), "a revision of a closed table's settlement (default: the latest)"),
            _param("limit", "query", _int(1, MAX_LIMIT, MAX_LIMIT), "awards to return"),
            _param("offset", "query", _int(0, default=0), "awards to skip; past the end gives no awards"),
            PERIOD_ID, PARTITION,
        ], _json(_ref("Settlement"), "the awards"), {
            "400": INVALID,
            "404": _error("no such board, period or table; a kind without prizes; a table not settled (open, without "
                          "preview; or closed a moment ago: being settled)", *TABLE_MISSING, "no_prizes", "not_settled"),
            "503": NOT_READY,
        })},
    f"{TABLE}/settlement/members/{{member}}": {"get": _operation(
        "What a member won: its award in the latest revision of the table's settlement (null: none)",
        [BOARD, PERIOD, MEMBER, PERIOD_ID, PARTITION], _json(_ref("SettlementMember"), "the member's award"), {
            "404": _error("no such board, period or table; a kind without prizes; a table not settled yet",
                          *TABLE_MISSING, "no_prizes", "not_settled"),
            "503": NOT_READY,
        })},
    f"{TABLE}/partitions": {"get": _operation("The partitions of a window's table (regions in config order) with their sizes, paged", [
        BOARD, PERIOD, PERIOD_ID,
        _param("limit", "query", _int(1, MAX_PARTITIONS_LIMIT, MAX_PARTITIONS_LIMIT), "partitions per page"),
        _param("after", "query", _STRING, "list the partitions after this one (the previous page's next)"),
    ], _json(_ref("Partitions"), "the partitions"), {
        "400": INVALID,
        "404": _error("no such board, period, table or partition (after)", *TABLE_MISSING),
        "503": NOT_READY,
    })},
    f"{TABLE}/periods": {"get": _operation("The open and retained tables, newest first", [BOARD, PERIOD],
                                           _json(_ref("Periods"), "the tables"),
                                           {"404": _error("no such board or period", "unknown_board", "unknown_period"),
                                            "503": NOT_READY})},
    "/v1/stats": {"get": _operation(
        "The last ten minutes per second (a ring buffer each node keeps): events by outcome, visibility lag, "
        "query latency; in a cluster, of every live node together, or of one", [
            _param("node", "query", _STRING, "cluster only: one node's figures (a node id of GET /v1/cluster)"),
        ], _json(_ref("Stats"), "per-second series"), {
            "400": _error("node is not a live node of the cluster", "invalid_request"),
            "503": _error("the node asked for did not answer in time", "unavailable"),
        })},
    PATH: {"get": _operation("This document", [], _json({"type": "object"}, "OpenAPI 3.1"), {})},
    "/healthz": {"get": _operation("The process is up", [], _json(_object(["status"], status={"const": "ok"}), "up"), {})},
    "/readyz": {"get": _operation("Every board's current tables are loaded", [],
                                  _json(_object(["ready", "boards"], ready={"const": True}, boards={"type": "object"}), "ready"),
                                  {"503": _json({"oneOf": [
                                      _object(["ready", "boards"], ready={"const": False}, boards={"type": "object"},
                                              failures={"type": "object"}),
                                      _error_body("draining"),
                                  ]}, "not ready yet, a board failed, or the node is draining (SIGTERM; Retry-After)")})},
    "/metrics": {"get": _operation("Prometheus metrics", [], {"description": "Prometheus text",
                                                             "content": {"text/plain": {"schema": _STRING}}}, {})},
    "/": {"get": {"summary": "Redirects to the console", "parameters": [],
                  "responses": {"307": {"description": "Location: /console"}}}},
    "/console": {"get": _operation("The operator's console (HTML; see docs/operations.md)", [],
                                   {"description": "the page", "content": {"text/html": {"schema": _STRING}}}, {})},
    "/console/{name}": {"get": _operation("A file of the console (script, style, icon)", [_param("name", "path", _STRING, "a file name")],
                                          {"description": "the file", "content": {"text/javascript": {"schema": _STRING},
                                                                                  "text/css": {"schema": _STRING},
                                                                                  "image/svg+xml": {"schema": _STRING}}},
                                          {"404": _error("no such file", "not_found")})},
    "/v1/settlements": {"get": _operation(
        "The settlement feed: every settlement revision in the settlement log's order (commit order), after a cursor, "
        "of the boards the caller may write (an admin: every board); poll with the last `next`", [
            _param("after", "query", _int(0, default=0), "the cursor of the last item seen (0: from the start)"),
            _param("limit", "query", _int(1, MAX_FEED_LIMIT, FEED_LIMIT), "items to return"),
        ], _json(_ref("SettlementFeed"), "the items"), {
            "400": INVALID,
            "401": _error("no valid game-server or admin token", "unauthorized"),
            "503": _error("the settlement log cannot be read now", "unavailable"),
        }, security=[{"server": []}, {"admin": []}])},
    "/v1/admin/whoami": {"get": _operation("The admin a bearer token belongs to", [],
                                           _json(_object(["admin"], admin=_STRING), "the admin's id"),
                                           {"401": UNAUTHORIZED}, security=[{"admin": []}])},
    "/v1/webhooks": {"get": _operation("The webhooks of the config and their deliveries per state", [],
                                       _json(_object(["webhooks"], webhooks={"type": "array", "items": _WEBHOOK}), "the webhooks"),
                                       {"401": UNAUTHORIZED, "503": _OUTBOX_DOWN}, security=[{"admin": []}])},
    "/v1/webhooks/{webhook}/deliveries": {"get": _webhook_op("A webhook's deliveries, in the order they were made", [
        _param("state", "query", {"type": "string", "enum": ["pending", "delivered", "failed"]}, "only those in this state"),
        _param("board", "query", _STRING, "only those of this board"),
        _param("period", "query", _STRING, "only those of this period kind"),
        _param("period_id", "query", _STRING, "only those of this window"),
        _param("partition", "query", _STRING, "only those of this partition (`*`: the global table)"),
        _param("limit", "query", _int(1, MAX_LIMIT, 100), "deliveries to return"),
        _param("after", "query", _int(0, None, 0), "the `next` of the page before"),
    ], _json(_object(["webhook", "deliveries", "next"], webhook=_STRING, deliveries={"type": "array", "items": _DELIVERY},
                     next={"type": ["integer", "null"], "description": "the `after` of the next page; null: no more"}),
             "the deliveries"))},
    "/v1/webhooks/{webhook}/deliveries/{delivery}/retry": {"post": _webhook_op(
        "Make a delivery pending again, due now, with a new max age", [
            _param("delivery", "path", _STRING, "its Arena-Delivery id (it contains '/')")],
        _json({"allOf": [_DELIVERY, _object(["webhook"], webhook=_STRING)]}, "the delivery"), ("unknown_delivery",))},
    "/v1/webhooks/{webhook}/test": {"post": _webhook_op("Send a signed test delivery now (not stored, not retried)", [], _json(
        _object(["webhook", "delivery", "delivered", "error"], webhook=_STRING, delivery=_STRING, delivered={"type": "boolean"},
                error={"type": ["string", "null"]}), "whether the receiver answered 2xx"))},
    "/v1/boards/{board}/events": {"get": _admin("A member's journaled events, newest first (audit)", [
        _param("member", "query", _STRING, "the member", required=True),
        _param("limit", "query", _int(1, MAX_AUDIT_LIMIT, 100), "events to return"),
        _param("before_seq", "query", {"type": "integer"}, "only events before this journal seq"),
    ], _json(_ref("Audit"), "the events"), ("unknown_board",))},
    "/v1/boards/{board}/void": {"post": _admin("Void one event; its tables are recomputed", [],
                                               _json(_VOID_EVENT, "what was voided"), ("unknown_board", "unknown_event"),
                                               requestBody=_body(_object(["idempotency_key", "reason"],
                                                                         idempotency_key=_STRING, reason=_STRING)))},
    "/v1/boards/{board}/members/{member}/void": {"post": _admin("Void every event of a member (a ban)", [MEMBER],
                                                                _json(_VOID_MEMBER, "what was voided"), ("unknown_board",),
                                                                requestBody=_body(_object(["reason"], reason=_STRING)))},
}

DOCUMENT: Doc = {
    "openapi": "3.1.0",
    "info": {
        "title": "Arena",
        "version": "1",
        "description": "A realtime leaderboard server. Game servers stream events over the WebSocket GET /v1/ws "
        "(see docs/protocol.md); these are its HTTP routes. Errors are {\"error\":{\"code\",\"message\"}}.",
    },
    "paths": PATHS,
    "components": {
        "schemas": SCHEMAS,
        "securitySchemes": {"admin": {"type": "http", "scheme": "bearer", "description": ADMIN_HEADERS},
                            "server": {"type": "http", "scheme": "bearer", "description": SERVER_HEADERS}},
    },
}
"""The document; served as is (see `arena.api.http`)."""


def operations() -> set[tuple[str, str]]:
    """Every documented (path template, METHOD)."""
    return {(path, method.upper()) for path, item in PATHS.items() for method in item}

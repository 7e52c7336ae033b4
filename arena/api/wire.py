"""JSON shapes of the contract: entries, table fields, results, errors."""

from __future__ import annotations

from typing import Any

from arena.engine.events import Result
from arena.engine.periods import Window
from arena.engine.table import Entry, RankedTable
from arena.engine.times import format_ms, format_optional_ms
from arena.errors import QueryError
from arena.jsontext import dumps as dumps  # the edge writes every body with it

Body = dict[str, Any]

RETRY_AFTER = "1"
"""The `Retry-After` of every 503 (loading, unavailable, ownerless, too many connections,
draining): what was missing comes back within seconds."""


def entry(e: Entry) -> Body:
    return {"rank": e.rank, "member": e.member, "score": e.score, "reached_at": format_ms(e.reached_at)}


def table_fields(board: str, table: RankedTable, closed: bool) -> Body:
    """A table's fields; ``closed`` by the clock (`BoardEngine.window_closed`), as the periods
    route says it, not by whether the actor has journaled the close marker yet. A partition's
    table carries its ``partition`` too."""
    fields = window_fields(board, table.window, len(table), closed)
    if table.partition is not None:
        fields["partition"] = table.partition
    return fields


def window_fields(board: str, window: Window, size: int, closed: bool) -> Body:
    """The fields of the table of ``window`` holding ``size`` entries (`table_fields`)."""
    return {
        "board": board,
        "period": str(window.kind),
        "period_id": window.period_id,
        "start": format_optional_ms(window.start_ms),
        "end": format_optional_ms(window.end_ms),
        "closed": closed,
        "size": size,
    }


def results(answers: list[Result]) -> list[Body]:
    """An ack's results (a rejection with its reason and message). Status and Reason are str
    enums, which orjson writes as their values."""
    return [
        {"idempotency_key": key, "status": status} if reason is None
        else {"idempotency_key": key, "status": status, "reason": reason, "message": message}
        for key, status, reason, message in answers
    ]


def error(exc: QueryError) -> Body:
    return {"error": {"code": exc.code, "message": exc.message}}

"""The read side shared by HTTP routes and WebSocket query ops: ask a board, shape the answer.

Every function takes already-parsed parameters and returns the contract's body, or raises
QueryError (its ``status`` is the HTTP hint). All are O(log n) plus the entries returned,
except `digest`: O(n), and a coroutine that lets the event loop run while it hashes.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Iterable
from fractions import Fraction

import orjson

from arena.api import wire
from arena.api.service import Arena
from arena.api.wire import Body
from arena.board import settling
from arena.engine import settlement as settlements
from arena.engine.periods import Window, period_name
from arena.engine.routing import table_key
from arena.engine.settlement import SettlementRecord
from arena.engine.spec import BoardSpec
from arena.engine.table import RankedTable
from arena.engine.times import format_optional_ms
from arena.errors import QueryError, invalid_request, not_found

MAX_LIMIT = 1000
MAX_RADIUS = 100
MAX_MEMBERS = 1000
MAX_AUDIT_LIMIT = 1000  # the admin audit route's limit
FEED_LIMIT, MAX_FEED_LIMIT = 100, 1000  # the settlement feed's items per answer (arena.api.feed)
MAX_SEARCH_LIMIT = 100
MAX_MEMBER_CODE_POINTS = 128  # a member name's longest (the event field's rule)


def period_kind(spec: BoardSpec, period: str) -> str:
    """The board's period named ``period``: a built-in kind or one of its custom periods. Raises
    QueryError unknown_period."""
    if period not in spec.periods and period not in spec.kinds:  # a built-in kind first: `kinds` is built per call
        raise not_found("unknown_period", f"board {spec.name!r} has no period {period!r} (it has {', '.join(spec.kinds)})")
    return period_name(period)


def view(arena: Arena, board: str, period: str, period_id: str | None, partition: str | None) -> tuple[RankedTable, Body]:
    """The table a query names and its fields (`table_fields`) with ``seq``, the board's last
    journal seq the table reflects: the one way a query views a table. The seq is read in the
    same step as the table (no await between), and the caller reads the table before it awaits."""
    now = arena.clock.now()
    handle = arena.board(board)
    table = handle.view(period_kind(handle.spec, period), period_id, now, partition)
    engine = handle.engine
    assert engine is not None  # the table was viewed
    body = wire.table_fields(board, table, engine.window_closed(table.window, now))
    body["seq"] = engine.last_seq
    return table, body


def table_fields(arena: Arena, board: str, table: RankedTable, now: int) -> Body:
    """A viewed table's fields, closed by the rule of the periods route: from the close moment
    on, before the actor journals the marker too."""
    engine = arena.board(board).engine
    assert engine is not None  # the table was viewed
    return wire.table_fields(board, table, engine.window_closed(table.window, now))


def _member_missing(member: str, table: RankedTable) -> Exception:
    return not_found("member_not_found", f"{member!r} has no entry in {table.window.kind} {table.window.period_id}")


def check_range(name: str, value: int, low: int, high: int | None = None) -> int:
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise invalid_request(f"{name} must be {bound}")
    return value


def top(arena: Arena, board: str, period: str, period_id: str | None, partition: str | None, limit: int, offset: int) -> Body:
    check_range("limit", limit, 1, MAX_LIMIT)
    check_range("offset", offset, 0)
    table, body = view(arena, board, period, period_id, partition)
    body["entries"] = [wire.entry(e) for e in table.top(limit, offset)]
    return body


def member(arena: Arena, board: str, period: str, period_id: str | None, partition: str | None, name: str) -> Body:
    """A member's entry; on a league board's global table, with its ``division`` (null: none yet)."""
    table, body = view(arena, board, period, period_id, partition)
    found = table.entry(name)
    if found is None:
        raise _member_missing(name, table)
    body["entry"] = wire.entry(found)
    divisions = _divisions(arena, board, table, partition, [name])
    if divisions is not None:
        body["division"] = divisions[name]
    return body


def _divisions(arena: Arena, board: str, table: RankedTable, partition: str | None, names: Iterable[str]) -> dict[str, str | None] | None:
    """Each of ``names``' division in ``table``'s window (None: none yet) when ``table`` is a
    league board's global table; else None (the answer has no divisions)."""
    engine = arena.board(board).engine
    if partition is not None or engine is None or engine.league is None:
        return None
    return {name: engine.division(table.window, name) for name in names}


def around(
    arena: Arena, board: str, period: str, period_id: str | None, partition: str | None, name: str | None, rank: int | None, radius: int
) -> Body:
    check_range("radius", radius, 0, MAX_RADIUS)
    if (name is None) == (rank is None):
        raise invalid_request("around needs exactly one of member or rank")
    table, body = view(arena, board, period, period_id, partition)
    if name is not None:
        entries = table.around_member(name, radius)
        if entries is None:
            raise _member_missing(name, table)
    else:
        assert rank is not None
        entries = table.around_rank(check_range("rank", rank, 1), radius)
    body["entries"] = [wire.entry(e) for e in entries]
    return body


def members(arena: Arena, board: str, period: str, period_id: str | None, partition: str | None, names: object) -> Body:
    """The entries of a set of members (friends) in rank order, with their global ranks, and
    ``missing``: the others. ``names`` is the request's `members` field as sent; anything but a
    list of 1..MAX_MEMBERS strings raises invalid_request. O(k log n) for k members."""
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise invalid_request("members must be a list of strings")
    if not 1 <= len(names) <= MAX_MEMBERS:
        raise invalid_request(f"members must hold between 1 and {MAX_MEMBERS} strings")
    table, body = view(arena, board, period, period_id, partition)
    found, missing = table.entries_of(names)
    body["entries"] = [wire.entry(e) for e in found]
    body["missing"] = missing
    _add_divisions(body, _divisions(arena, board, table, partition, (e.member for e in found)))
    return body


def _add_divisions(body: Body, divisions: dict[str, str | None] | None) -> None:
    """On a league board's global table, an answer listing entries carries ``divisions``: each
    listed member's division (null: none yet)."""
    if divisions is not None:
        body["divisions"] = divisions


def search(arena: Arena, board: str, period: str, period_id: str | None, partition: str | None, prefix: str | None, limit: int) -> Body:
    """The members whose name starts with ``prefix``, in code point order, each with its rank.
    O(log n) plus O(log n) an entry returned."""
    if not prefix or len(prefix) > MAX_MEMBER_CODE_POINTS:
        raise invalid_request(f"prefix must be 1 to {MAX_MEMBER_CODE_POINTS} code points")
    check_range("limit", limit, 1, MAX_SEARCH_LIMIT)
    table, body = view(arena, board, period, period_id, partition)
    found = table.search(prefix, limit)
    body["entries"] = [wire.entry(e) for e in found]
    _add_divisions(body, _divisions(arena, board, table, partition, (e.member for e in found)))
    return body


def percentile(arena: Arena, board: str, period: str, period_id: str | None, partition: str | None, name: str) -> Body:
    body = member(arena, board, period, period_id, partition, name)
    body["top_percent"] = 100 * body["entry"]["rank"] / body["size"]
    return body


def score_at_percentile(arena: Arena, board: str, period: str, period_id: str | None, partition: str | None, p: Fraction) -> Body:
    """The entry at rank ceil(p / 100 * size); ``entry`` is null on an empty table."""
    if not 0 < p <= 100:
        raise invalid_request("p must be > 0 and <= 100")
    table, body = view(arena, board, period, period_id, partition)
    found = table.at_rank(math.ceil(p * len(table) / 100))
    body["p"] = float(p)
    body["entry"] = wire.entry(found) if found is not None else None
    return body


DIGEST_STEP = 1024
"""Entries hashed between two turns of the event loop: about 1 ms. Hashing a 10**6-entry table
in one go held the loop (ingest, every other query) for over a second."""


async def digest(arena: Arena, board: str, period: str, period_id: str | None, partition: str | None) -> Body:
    """The table's digest at ``seq``, hashed in steps from a snapshot while the table moves on;
    one digest at a time per server, so that concurrent ones cannot crowd out everything else."""
    async with arena.digest_turn:
        table, body = view(arena, board, period, period_id, partition)
        h = hashlib.sha256()
        for piece in table.canonical_text(table.snapshot(), DIGEST_STEP):
            h.update(piece)
            await asyncio.sleep(0)
    body["sha256"] = h.hexdigest()
    return body


def _not_settled(window: Window, closed: bool) -> QueryError:
    if closed:
        return not_found("not_settled", f"{window.kind} {window.period_id} is closed and being settled: ask again shortly")
    return not_found("not_settled", f"{window.kind} {window.period_id} is open: it settles at its close "
                                     "(?preview=true: what it would award now)")


def _settled(
    arena: Arena, board: str, period: str, period_id: str | None, partition: str | None
) -> tuple[Body, list[SettlementRecord] | None, Window]:
    """The table a settlement route names: its fields with ``seq`` (`view`), its journaled
    revisions (None: none yet) and its window. A table past the retention still answers when
    it was settled: its fields then are those of its settlement (closed, its size then)."""
    handle = arena.board(board)
    kind = period_kind(handle.spec, period)
    try:
        table, body = view(arena, board, period, period_id, partition)
    except QueryError as exc:
        engine = handle.engine
        if exc.code != "period_not_retained" or engine is None or period_id is None:
            raise
        revisions = engine.settlements.get((kind, period_id) if partition is None else (kind, period_id, partition))
        if not revisions:
            raise
        window = revisions[0].window
        fields = wire.window_fields(board, window, revisions[-1].size, True)
        if partition is not None:
            fields["partition"] = partition
        return {**fields, "seq": engine.last_seq}, revisions, window
    engine = handle.engine
    assert engine is not None  # the table was viewed
    window = table.window
    revisions = engine.settlements.get(table_key(window, partition))
    if revisions is None and not handle.spec.prize_tiers(kind):
        raise not_found("no_prizes", f"board {board!r} has no prizes for {kind}")
    if revisions is None and handle.spec.league is not None and partition is None:
        raise not_found("no_prizes", f"board {board!r} awards prizes per division only (pass partition)")
    if revisions is None and partition is not None and handle.spec.regions and not handle.spec.regional_prizes:
        raise not_found("no_prizes", f"board {board!r} awards no prizes per region (regional_prizes is false)")
    return body, revisions, window


def _revision(revisions: list[SettlementRecord], revision: int | None) -> SettlementRecord:
    if revision is None:
        return revisions[-1]
    check_range("revision", revision, 0, len(revisions) - 1)
    return revisions[revision]


async def settlement(arena: Arena, board: str, period: str, period_id: str | None, partition: str | None, preview: bool,
                     revision: int | None, limit: int, offset: int) -> Body:
    """A closed table's journaled settlement (its latest revision, or ``revision``), ``awards``
    paged, ``sha256`` over all of them; with ``preview`` on an open table, the settlement it
    would journal if it closed now, at ``seq``, made in steps from a copy of the entries that can
    win, one O(n) answer at a time per server as for `digest`. 404 ``not_settled`` otherwise."""
    check_range("limit", limit, 1, MAX_LIMIT)
    check_range("offset", offset, 0)
    spec = arena.board(board).spec
    body, revisions, window = _settled(arena, board, period, period_id, partition)
    if revisions:
        return settlements.body(body, _revision(revisions, revision).settlement, limit, offset)
    if not preview or body["closed"]:
        raise _not_settled(window, body["closed"])
    async with arena.digest_turn:
        table, body = view(arena, board, period, period_id, partition)  # again: the copy is of this moment
        if body["closed"]:
            raise _not_settled(window, True)
        made, _size = await settling.first(spec.prize_tiers(table.window.kind), table, table.rule.order)
    return settlements.body(body, made, limit, offset, preview=True)


def settlement_member(arena: Arena, board: str, period: str, period_id: str | None, partition: str | None, name: str) -> Body:
    """"What did I win": ``member``'s award in the table's latest settlement revision (``award``
    null: none), with the revision and its ``sha256``. O(awards)."""
    body, revisions, window = _settled(arena, board, period, period_id, partition)
    if not revisions:
        raise _not_settled(window, body["closed"])
    latest = revisions[-1].settlement
    won = next((award for award in latest.awards if award.member == name), None)
    body.update({"revision": latest.revision, "sha256": latest.sha256, "member": name,
                 "award": None if won is None else won._asdict()})
    return body


def periods(arena: Arena, board: str, period: str) -> Body:
    """O(listed windows): retained windows are memoised between two closes (`retained_windows`)."""
    handle = arena.board(board)
    kind = period_kind(handle.spec, period)
    now = arena.clock.now()
    handle.view(kind, None, now)  # raises not_ready / unavailable / unknown_period
    engine = handle.engine
    assert engine is not None
    listed: list[Body] = []
    for table in engine.listed_tables(kind, now):
        window = table.window
        closed = engine.window_closed(window, now)  # by the clock, before the actor's marker too
        settled = engine.settlements.get((kind, window.period_id))
        listed.append({
            "period_id": window.period_id,
            "start": format_optional_ms(window.start_ms),
            "end": format_optional_ms(window.end_ms),
            "closed": closed,
            "closed_at": format_optional_ms(engine.close_moment(window) if closed else None),
            "size": len(table),
            "disputes": engine.disputes.get((kind, window.period_id), 0),
            "revision": None if settled is None else settled[-1].settlement.revision,
        })
    return {"board": board, "period": str(kind), "periods": listed, "seq": engine.last_seq}


MAX_PARTITIONS_LIMIT = 1000


def partitions(arena: Arena, board: str, period: str, period_id: str | None, limit: int, after: str | None) -> Body:
    """The partitions of a window's table in the order they list, each with its size: those
    after ``after``, at most ``limit``; ``next`` names the last one listed when more follow.
    O(partitions)."""
    check_range("limit", limit, 1, MAX_PARTITIONS_LIMIT)
    table, body = view(arena, board, period, period_id, None)
    engine = arena.board(board).engine
    assert engine is not None  # the table was viewed
    names = list(engine.partition_names(table.window))
    if after is not None:
        if after not in names:
            raise not_found("unknown_partition", f"after: {table.window.kind} period {table.window.period_id} has no partition {after!r}")
        names = names[names.index(after) + 1 :]
    listed = [{"partition": name, "size": len(engine.partition_of(table, name))} for name in names[:limit]]
    body["partitions"] = listed
    body["next"] = listed[-1]["partition"] if len(names) > limit else None
    return body


MAX_BOARDS_LIMIT = 1000


def boards(arena: Arena, limit: int = MAX_BOARDS_LIMIT, after: str | None = None, category: str | None = None) -> Body:
    """`GET /v1/boards`: the config's boards in its order, then the API boards by name; those
    after ``after`` in that order, at most ``limit``, those whose ``metadata.category`` is
    ``category`` when given; `next` names the last one listed when more follow. O(boards log boards).
    Each with its current tables; an inactive board's as it recorded them when it was unloaded
    (none before its first activation). Activates no board."""
    if not 1 <= limit <= MAX_BOARDS_LIMIT:
        raise invalid_request(f"limit must be between 1 and {MAX_BOARDS_LIMIT}")
    now = arena.clock.now()
    activations = arena.supervisor.activations
    listed: list[Body] = []
    configured = arena.config.boards
    names = [*configured, *sorted(name for name in arena.boards if name not in configured)]
    if after is not None:
        if after not in arena.boards:
            raise invalid_request(f"after: no board named {after!r}")
        names = names[names.index(after) + 1:]
    more = False
    for name in names:
        handle = arena.boards[name]
        spec = handle.spec
        metadata = None if spec.metadata is None else orjson.loads(spec.metadata)
        if category is not None and (not isinstance(metadata, dict) or metadata.get("category") != category):
            continue
        if len(listed) == limit:
            more = True
            break
        tables = []
        active = arena.states.active(name)
        unloaded = None if activations is None or active else activations.unloaded.get(name)
        if unloaded is not None:
            for window, size in unloaded.sizes:
                moment = spec.close_moment(window)
                fields = wire.window_fields(name, window, size, moment is not None and now >= moment)
                del fields["board"]
                fields["partitions"] = len(spec.partitions())
                tables.append(fields)
        for kind in spec.kinds if unloaded is None else ():
            try:
                table = handle.view(kind, None, now)
            except QueryError:  # loading, inactive or failed: list the board, not its tables
                continue
            fields = table_fields(arena, name, table, now)
            del fields["board"]
            engine = handle.engine
            fields["partitions"] = 0 if engine is None else len(engine.partition_names(table.window))
            tables.append(fields)
        listed.append({
            "active": active,
            "board": name,
            "aggregation": spec.aggregation.value,
            "order": spec.order.value,
            "tie": spec.tie.value,
            "state": arena.states.shown(name),
            "retired": handle.retired,
            "metadata": metadata,
            "prizes": {period: [tier.as_json() for tier in tiers] for period, tiers in spec.prizes},
            "periods": tables,
        })
    return {"boards": listed, "next": listed[-1]["board"] if more else None}

"""What only the PostgreSQL journal has: its tables and schema version, synchronous_commit, the
key index, refused writes, a server that stops and starts again (a write of unknown outcome is
settled against it), passwords that never show. And the same hostile records fed to both
backends read back the same, byte for byte. (The contract tests run on both: test_journal.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arena.board.load import load
from arena.cluster.grants import Grants
from arena.cluster.lease import NodeLease
from arena.config import JournalSettings
from arena.engine.board import BoardEngine
from arena.engine.events import Event, parse_event
from arena.engine.periods import Calendar, PeriodKind
from arena.engine.records import BoardRecord, CloseRecord, Record, ScoreRecord, VoidRecord
from arena.engine.scoring import Aggregation
from arena.engine.spec import BoardSpec
from arena.errors import JournalCorrupt, JournalError, JournalUnavailable, JournalWriteFailed
from arena.journal import Journal
from arena.journal.postgresql import SCHEMA_VERSION, PostgresBackend
from loadtest.process import free_port
from support.journals import SPEC, journal_store, write_journal
from support.postgres import EmbeddedPostgres, fetchval
from support.server import until

T = 1_780_315_200_000  # 2026-06-01T12:00:00Z
DAY = Calendar("UTC").window_at(PeriodKind.DAILY, T)
PASSWORD = "s3cret-pw"


def score(seq: int, key: str | None = None) -> ScoreRecord:
    return ScoreRecord(seq, Event("b", "a", seq, T, key if key is not None else f"k{seq}"), T + 5, "gs")


@pytest.fixture
async def backend(pg_journal: JournalSettings) -> AsyncIterator[PostgresBackend]:
    b = PostgresBackend(pg_journal)
    yield b
    await b.close()


async def sql(backend: PostgresBackend, statement: str, *args: object) -> Any:
    async with backend.store.connection() as conn:
        return await conn.fetchval(statement.format(s=backend.store.schema), *args)


# -- tables ----------------------------------------------------------------------------------------


async def test_the_tables_are_created_in_the_schema_with_its_version(backend: PostgresBackend, pg_journal: JournalSettings) -> None:
    journal = await backend.open(SPEC)
    assert await sql(backend, "SELECT array_agg(version) FROM {s}.schema_version") == [SCHEMA_VERSION]
    tables = await sql(backend, "SELECT array_agg(tablename::text ORDER BY tablename) FROM pg_tables WHERE schemaname = $1",
                       pg_journal.schema)
    assert tables == ["board", "board_catalog", "board_owner", "board_period", "board_record", "board_snapshot", "node_config",
                      "node_lease", "schema_version", "score_event", "score_void", "settlement_log", "settlement_log_head",
                      "webhook_cursor", "webhook_delivery"]
    assert orjson.loads(await sql(backend, "SELECT definition FROM {s}.board WHERE name = 'b'")) == SPEC.definition()
    await journal.close()
    other = PostgresBackend(pg_journal)  # a second start finds them
    try:
        await (await other.open(SPEC)).close()
        assert await sql(backend, "SELECT count(*) FROM {s}.schema_version") == 1
    finally:
        await other.close()


async def test_a_schema_of_a_newer_version_stops_with_one_line(backend: PostgresBackend, pg_journal: JournalSettings) -> None:
    await (await backend.open(SPEC)).close()
    await sql(backend, "UPDATE {s}.schema_version SET version = $1", SCHEMA_VERSION + 1)
    for readonly in (False, True):
        newer = PostgresBackend(pg_journal)
        try:
            with pytest.raises(JournalUnavailable) as raised:
                await newer.open(SPEC, readonly=readonly)
        finally:
            await newer.close()
        message = str(raised.value)
        assert f"schema version {SCHEMA_VERSION + 1}, newer than this Arena knows ({SCHEMA_VERSION})" in message
        assert pg_journal.schema in message and "\n" not in message


async def test_tables_of_version_1_are_upgraded_by_a_writable_start(backend: PostgresBackend,
                                                                  pg_journal: JournalSettings) -> None:
    journal = await backend.open(SPEC)
    await journal.append([score(1)])
    await sql(backend, "ALTER TABLE {s}.node_lease DROP COLUMN url")  # as version 1 made them
    await sql(backend, "DROP TABLE {s}.board_snapshot")
    await sql(backend, "ALTER TABLE {s}.node_lease DROP COLUMN state")
    await sql(backend, "DROP TABLE {s}.board_record")
    await sql(backend, "DROP TABLE {s}.board_catalog")
    await sql(backend, "DROP TABLE {s}.node_config")
    await sql(backend, "DROP TABLE {s}.settlement_log")
    await sql(backend, "DROP TABLE {s}.settlement_log_head")
    await sql(backend, "DROP TABLE {s}.webhook_delivery")
    await sql(backend, "DROP TABLE {s}.webhook_cursor")
    await sql(backend, "ALTER TABLE {s}.board_owner DROP COLUMN active")
    await sql(backend, "ALTER TABLE {s}.score_event DROP COLUMN region")
    await sql(backend, "DELETE FROM {s}.schema_version")
    await sql(backend, "INSERT INTO {s}.schema_version VALUES (1)")
    reader = PostgresBackend(pg_journal)  # a read-only start (rebuild, verify) reads version 1 as it is
    try:
        assert (await reader.open(SPEC, readonly=True)).last_seq == 1
    finally:
        await reader.close()
    assert await sql(backend, "SELECT array_agg(version) FROM {s}.schema_version") == [1]
    upgraded = PostgresBackend(pg_journal)
    try:
        assert (await upgraded.open(SPEC)).last_seq == 1
        assert await sql(upgraded, "SELECT array_agg(version ORDER BY version) FROM {s}.schema_version") == [1, 2, 3, 4, 5, 6, 7, 8, 9]
        assert await sql(upgraded, "SELECT count(url) FROM {s}.node_lease") == 0
        assert await sql(upgraded, "SELECT bool_and(active) FROM {s}.board_owner")  # as every owner had it loaded
        assert await sql(upgraded, "SELECT count(*) FROM {s}.board_record") == 0
        assert await sql(upgraded, "SELECT count(*) FROM {s}.board_snapshot") == 0
        assert await sql(upgraded, "SELECT cursor FROM {s}.settlement_log_head") == 0
        assert await sql(upgraded, "SELECT count(*) FROM {s}.webhook_delivery") == 0
        assert await sql(upgraded, "SELECT count(state) FROM {s}.node_lease") == 0
        assert await sql(upgraded, "SELECT count(region) FROM {s}.score_event") == 0  # an older event: no region
    finally:
        await upgraded.close()


async def test_a_read_only_open_creates_nothing(backend: PostgresBackend, pg_journal: JournalSettings) -> None:
    with pytest.raises(JournalCorrupt, match="board b: no journal at"):
        await backend.open(SPEC, readonly=True)
    assert await fetchval(pg_journal.url or "", "SELECT to_regclass($1)", f"{pg_journal.schema}.schema_version") is None
    await (await backend.open(BoardSpec("other"))).close()
    with pytest.raises(JournalCorrupt, match="board b: no journal at"):
        await backend.open(SPEC, readonly=True)  # the tables are there, the board is not
    assert await sql(backend, "SELECT count(*) FROM {s}.board") == 1


async def test_boards_share_the_tables_and_never_see_each_other(backend: PostgresBackend) -> None:
    one = await backend.open(SPEC)
    two = await backend.open(BoardSpec("two"))
    await one.append([score(1, "same-key"), CloseRecord(2, DAY, T)])
    await two.append([score(1, "same-key")])  # the key is unique per board, the seq too
    assert (await one.committed_seq(), await two.committed_seq()) == (2, 1)
    assert await two.close_markers() == [] and await two.lookup(["same-key"]) == {"same-key": ("a", 1, T, None)}


@pytest.mark.parametrize(("durability", "setting"), [("full", "on"), ("normal", "off")])
async def test_durability_is_synchronous_commit_of_arenas_sessions(pg_journal: JournalSettings, durability: str, setting: str) -> None:
    backend = PostgresBackend(pg_journal, durability)
    try:
        await (await backend.open(SPEC)).close()
        assert await sql(backend, "SHOW synchronous_commit") == setting
    finally:
        await backend.close()


async def test_a_key_lookup_is_served_by_the_unique_index(backend: PostgresBackend) -> None:
    journal = await backend.open(SPEC)
    await journal.append([score(i) for i in range(1, 5001)])
    await sql(backend, "ANALYZE {s}.score_event")
    async with backend.store.connection() as conn:
        plan = "\n".join(r[0] for r in await conn.fetch(
            f"EXPLAIN SELECT idempotency_key FROM {backend.store.schema}.score_event"
            " WHERE board = $1 AND idempotency_key = ANY($2::bytea[])", "b", ["k1", "k2"]))
    assert "score_event_board_idempotency_key_key" in plan, plan


async def test_a_refused_write_writes_nothing_and_the_next_one_lands(backend: PostgresBackend) -> None:
    journal = await backend.open(SPEC)
    await journal.append([score(1)])
    await sql(backend, "ALTER TABLE {s}.score_event ADD CONSTRAINT refuse CHECK (false) NOT VALID")
    batches: list[list[Record]] = [[score(2), score(3)], [score(2), CloseRecord(3, DAY, T)]]
    for batch in batches:
        with pytest.raises(JournalWriteFailed, match="board b: write failed: .*refuse"):
            await journal.append(batch)
        assert (journal.last_seq, await journal.committed_seq()) == (1, 1)
    await sql(backend, "ALTER TABLE {s}.score_event DROP CONSTRAINT refuse")
    await journal.append([score(2), CloseRecord(3, DAY, T)])
    assert await journal.committed_seq() == 3


# -- a server that stops and starts again ------------------------------------------------------------


async def appended(journal: Journal, records: Sequence[Record], timeout: float = 30.0) -> None:
    """Append, again and again while the journal refuses, until it lands (or the test fails)."""
    async def landed() -> bool:
        try:
            await journal.append(records)
        except JournalWriteFailed:
            assert await journal.committed_seq() == records[0].seq - 1
            return False
        return True

    await until(landed, "the append to land", timeout)


async def test_a_stopped_server_refuses_writes_and_reads_and_the_journal_recovers_by_itself(
    own_postgres: EmbeddedPostgres,
) -> None:
    backend = PostgresBackend(JournalSettings("postgresql", own_postgres.url, "arena"))
    try:
        journal = await backend.open(SPEC)
        await journal.append([score(1)])
        await asyncio.to_thread(own_postgres.stop)
        pool = backend.store._pool
        assert pool is not None
        await until(lambda: pool.get_size() == 0, "the pool to hear its connections close")
        with pytest.raises(JournalWriteFailed, match="board b: write failed: .*PostgreSQL"):
            await journal.append([score(2)])
        assert await journal.committed_seq() == 1  # nothing was sent: known without the server
        with pytest.raises(JournalError, match="board b: key lookup failed"):
            await journal.lookup(["k1"])
        await asyncio.to_thread(own_postgres.start)
        await appended(journal, [score(2)])
        assert await journal.lookup(["k1", "k2"]) == {"k1": ("a", 1, T, None), "k2": ("a", 2, T, None)}
    finally:
        await backend.close()


async def test_a_write_cut_off_by_a_stopping_server_is_settled_once_it_is_back(own_postgres: EmbeddedPostgres) -> None:
    backend = PostgresBackend(JournalSettings("postgresql", own_postgres.url, "arena"))
    try:
        journal = await backend.open(SPEC)
        await journal.append([score(1)])
        await sql(backend, "CREATE FUNCTION {s}.slow() RETURNS trigger LANGUAGE plpgsql AS"
                           " 'BEGIN PERFORM pg_sleep(30); RETURN NULL; END'")
        await sql(backend, "CREATE TRIGGER slow AFTER INSERT ON {s}.score_event EXECUTE FUNCTION {s}.slow()")
        write = asyncio.create_task(journal.append([score(2), score(3)]))
        await until(lambda: fetchval(own_postgres.url, "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'"),
                    "the server to run the statement")
        await asyncio.to_thread(own_postgres.stop)
        with pytest.raises(JournalWriteFailed):
            await write
        settle = asyncio.create_task(journal.committed_seq())
        await asyncio.sleep(1.0)  # the scenario: the server stays away a while, and the settle waits
        assert not settle.done()  # the outcome is unknown: it waits for the server
        await asyncio.to_thread(own_postgres.start)
        assert await asyncio.wait_for(settle, 30) == 1  # the transaction was rolled back
        await sql(backend, "DROP TRIGGER slow ON {s}.score_event")
        await appended(journal, [score(2), score(3)])
        assert await journal.committed_seq() == 3
    finally:
        await backend.close()


# -- passwords -------------------------------------------------------------------------------------


async def test_an_unreachable_server_is_one_line_naming_it_without_the_password() -> None:
    port = free_port()
    url = f"postgresql://arena:{PASSWORD}@127.0.0.1:{port}/arena?password={PASSWORD}"
    backend = PostgresBackend(JournalSettings("postgresql", url, "arena"))
    assert backend.where("b") == f"postgresql://arena@127.0.0.1:{port}/arena schema arena, board b"
    with pytest.raises(JournalUnavailable) as raised:
        await backend.open(SPEC)
    await backend.close()
    message = str(raised.value)
    assert message.startswith(f"cannot connect to PostgreSQL at postgresql://arena@127.0.0.1:{port}/arena schema arena: ")
    assert PASSWORD not in message and "\n" not in message


async def test_a_wrong_password_is_refused_without_showing_it(own_postgres: EmbeddedPostgres) -> None:
    url = await own_postgres.add_login("arena_login", PASSWORD)
    good = PostgresBackend(JournalSettings("postgresql", url, "arena"))
    try:
        await (await good.open(SPEC)).close()
    finally:
        await good.close()
    wrong = PostgresBackend(JournalSettings("postgresql", url.replace(PASSWORD, "wrong-" + PASSWORD), "arena"))
    with pytest.raises(JournalUnavailable, match="password authentication failed") as raised:
        await wrong.open(SPEC)
    await wrong.close()
    assert PASSWORD not in str(raised.value)


# -- both backends, the same hostile records ------------------------------------------------------

_UTF16_ORDER = "\uffff\U0001f600\ue000\U00010000"
"""Characters whose UTF-16 order differs from their code point order (U+FFFF < U+1F600 in code
points, but 0xFFFF > 0xD83D in UTF-16 units)."""
_KEYS = st.text(st.characters(codec="utf-8"), min_size=1, max_size=128)
_MEMBERS = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_categories=["Cc"]) | st.sampled_from(_UTF16_ORDER), min_size=1, max_size=128),
    st.builds(lambda c, n: c * n, st.sampled_from(["a", "é", "\U0001f600", "\uffff"]), st.integers(126, 128)),
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(st.characters(codec="utf-8")),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=6,
)
SUM_SPEC = BoardSpec("b", aggregation=Aggregation.SUM, periods=(PeriodKind.ALLTIME, PeriodKind.DAILY))
BIG = 2**53 - 1
SUM_TAIL = 1_100
"""Events of value 2**53 - 1 for one member: their sum is beyond 2**63."""


@st.composite
def hostile_records(draw: st.DrawFn) -> tuple[list[list[Record]], list[str], list[str]]:
    """Batches of records (score events as validation makes them, a close marker, voids), their
    keys and their members."""
    raws = draw(st.lists(st.fixed_dictionaries({
        "member": _MEMBERS,
        "value": st.integers(-BIG, BIG),
        "occurred_at": st.integers(T - 3 * 86_400_000, T + 86_400_000),
        "idempotency_key": _KEYS,
        "meta": st.none() | st.dictionaries(st.text(st.characters(codec="utf-8"), max_size=8), _JSON, max_size=4),
    }), min_size=1, max_size=25, unique_by=lambda r: str(r["idempotency_key"])))
    parsed = [parse_event({"board": "b", **raw}, {"b": BoardSpec("b")}, lambda _b: True) for raw in raws]
    events = [e for e in parsed if isinstance(e, Event)]  # a meta over 1 KiB is invalid
    events += [Event("b", "sum", BIG, T, f"sum-{i}") for i in range(SUM_TAIL)]
    records: list[Record] = [ScoreRecord(i + 1, e, T + i, f"gs-{i % 3}") for i, e in enumerate(events)]
    at = draw(st.integers(0, len(records)))
    records.insert(at, CloseRecord(0, DAY, T + 1))
    targets = draw(st.lists(st.sampled_from(events), unique=True, max_size=4))
    reasons = draw(st.lists(st.text(st.characters(codec="utf-8"), min_size=1), min_size=len(targets), max_size=len(targets)))
    records += [VoidRecord(0, 0, e.idempotency_key, reason, "ops", T + 9) for e, reason in zip(targets, reasons, strict=True)]
    records = _renumbered(records)
    cuts = sorted(draw(st.lists(st.integers(1, len(records) - 1), max_size=3)))
    batches = [records[a:b] for a, b in zip([0, *cuts], [*cuts, len(records)], strict=True) if b > a]
    return batches, [e.idempotency_key for e in events], sorted({e.member for e in events})


def _renumbered(records: list[Record]) -> list[Record]:
    """Seqs 1.. in order; voids aimed at the seq their key got."""
    seq_of: dict[str, int] = {}
    out: list[Record] = []
    for seq, r in enumerate(records, 1):
        if isinstance(r, ScoreRecord):
            seq_of[r.event.idempotency_key] = seq
            out.append(r._replace(seq=seq))
        elif isinstance(r, CloseRecord):
            out.append(CloseRecord(seq, r.window, r.closed_at))
        elif isinstance(r, BoardRecord):
            out.append(BoardRecord(seq, r.kind, r.body))
        else:
            out.append(VoidRecord(seq, seq_of[r.idempotency_key], r.idempotency_key, r.reason, r.admin, r.voided_at))
    return out


async def everything(journal: Journal, keys: list[str], members: list[str]) -> dict[str, object]:
    """All a journal answers about these keys and members."""

    async def scan(**kw: int | None) -> list[tuple[object, ...]]:
        return [tuple(row) async for chunk in journal.scan(**kw) for row in chunk]

    engine = BoardEngine(SUM_SPEC)
    await load(engine, journal, T + 2 * 86_400_000, everything=True)
    return {
        "last_seq": journal.last_seq,
        "committed_seq": await journal.committed_seq(),
        "lookup": await journal.lookup([*keys, "absent", "absent\x00"]),
        "scan": await scan(),
        "scan_upto": await scan(upto_seq=len(keys) // 2),
        "scan_since": await scan(min_occurred_at=T - 86_400_000),
        "scan_before": await scan(before_occurred_at=T),
        "by_key": [await journal.event_by_key(k) for k in keys[:len(keys) - SUM_TAIL + 2]],  # drawn, two sums
        "members": [await journal.member_events(m) for m in members],
        "members_paged": [await journal.member_events(m, limit=2, before_seq=len(keys)) for m in members],
        "markers": await journal.close_markers(),
        "voids": await journal.voids(),
        "digests": {key: (t.digest(), len(t)) for key, t in engine.tables.items()},
        "sum": (engine.tables[(PeriodKind.ALLTIME, "alltime")].standing("sum") or (None,))[0],
    }


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_records())
def test_both_backends_read_back_the_same_hostile_records(postgres: str, case: tuple[list[list[Record]], list[str], list[str]]) -> None:
    batches, keys, members = case

    async def run(kind: str) -> dict[str, object]:
        async with journal_store(kind, postgres) as store:
            await write_journal(store, SUM_SPEC, batches)
            reader = await store.open(SUM_SPEC, readonly=True)
            try:
                return await everything(reader, keys, members)
            finally:
                await reader.close()

    sqlite, postgresql = asyncio.run(run("sqlite")), asyncio.run(run("postgresql"))
    for part in sqlite:
        assert postgresql[part] == sqlite[part], part
    records = [r for batch in batches for r in batch]
    scores = [r for r in records if isinstance(r, ScoreRecord)]
    assert sqlite["scan"] == [(r.seq, r.event.member, r.event.value, r.event.occurred_at, r.event.idempotency_key, r.event.region)
                              for r in scores]
    assert [e.meta for e in sqlite["by_key"]] == [r.event.meta for r in scores][:len(keys) - SUM_TAIL + 2]  # type: ignore[attr-defined]
    assert sqlite["committed_seq"] == len(records)
    voided = {r.target_seq for r in records if isinstance(r, VoidRecord)}
    total = sum(r.event.value for r in scores if r.event.member == "sum" and r.seq not in voided)
    assert total > 2**63 and sqlite["sum"] == total  # exact beyond 64 bits


# -- ownership epochs: the fence of every append -----------------------------------------------------


async def test_an_append_commits_only_under_the_epoch_its_journal_was_granted(pg_journal: JournalSettings) -> None:
    first, second = PostgresBackend(pg_journal, node_id="node-a"), PostgresBackend(pg_journal, node_id="node-b")
    try:
        old = await first.open(SPEC)
        await old.append([score(1)])
        assert await sql(first, "SELECT (node_id, epoch)::text FROM {s}.board_owner WHERE board = 'b'") == "(node-a,1)"
        new = await second.open(SPEC)  # granted again: epoch 2
        assert await sql(first, "SELECT (node_id, epoch)::text FROM {s}.board_owner WHERE board = 'b'") == "(node-b,2)"
        refused: list[list[Record]] = [[score(2)], [score(2), CloseRecord(3, DAY, T)], [VoidRecord(2, 1, "k1", "r", "ops", T)]]
        for batch in refused:
            with pytest.raises(JournalWriteFailed, match="board b: write failed: the board was granted again since its epoch 1"):
                await old.append(batch)
            assert await old.committed_seq() == 1  # nothing of it was written
        await new.append([score(2), CloseRecord(3, DAY, T)])
        assert await new.committed_seq() == 3 and await old.committed_seq() == 3
    finally:
        await first.close()
        await second.close()


async def test_a_writable_open_is_refused_while_another_node_holds_a_live_lease(pg_journal: JournalSettings) -> None:
    """A server's journals are granted by the cluster's rules (`arena.cluster.grants`)."""
    holder = Grants(PostgresBackend(pg_journal, node_id="node-a"))
    other = Grants(PostgresBackend(pg_journal, node_id="node-b"))
    try:
        await (await holder.open(SPEC)).close()
        await NodeLease(holder.backend, lease_seconds=30).acquire()
        with pytest.raises(JournalUnavailable, match="board b: node node-a holds the schema"):
            await other.open(SPEC)
        await (await other.open(SPEC, readonly=True)).close()  # reading needs no ownership
        journal = await holder.open(SPEC)  # the holder itself is granted again
        await journal.append([score(1)])
    finally:
        await holder.close()
        await other.close()

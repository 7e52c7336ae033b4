"""The journal's tables in PostgreSQL: created when missing, upgraded version by version."""

from __future__ import annotations

import logging

import asyncpg

from arena.errors import JournalCorrupt

log = logging.getLogger("arena.journal")

SCHEMA_VERSION = 9
"""The version of the tables below; a schema of a greater version belongs to a newer Arena."""
_UPGRADES = {
    1: "ALTER TABLE {s}.node_lease ADD COLUMN url text COLLATE \"C\" NOT NULL DEFAULT ''",
    2: "CREATE TABLE {s}.board_snapshot (board text COLLATE \"C\" PRIMARY KEY, seq bigint NOT NULL, data bytea NOT NULL)",
    3: "ALTER TABLE {s}.node_lease ADD COLUMN state text COLLATE \"C\" NOT NULL DEFAULT 'serving'",
    4: "{board_records}",
    5: "{settlement_log}",
    6: "{webhook_outbox}",
    7: "ALTER TABLE {s}.board_owner ADD COLUMN active boolean NOT NULL DEFAULT true",
    8: "ALTER TABLE {s}.score_event ADD COLUMN region text COLLATE \"C\"",
}
"""The statement that takes tables of version N to N + 1, run by a writable start."""

_TABLES = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE {s}.schema_version (version integer NOT NULL);
CREATE TABLE {s}.board (name text COLLATE "C" PRIMARY KEY, definition text NOT NULL);
CREATE TABLE {s}.score_event (
    board text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    member text COLLATE "C" NOT NULL,
    value bigint NOT NULL,
    occurred_at bigint NOT NULL,
    received_at bigint NOT NULL,
    source text COLLATE "C" NOT NULL,
    idempotency_key bytea NOT NULL,
    meta text COLLATE "C",
    region text COLLATE "C",
    PRIMARY KEY (board, seq),
    UNIQUE (board, idempotency_key)
);
CREATE INDEX score_event_occurred_at ON {s}.score_event (board, occurred_at);
CREATE TABLE {s}.board_period (
    board text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    period text COLLATE "C" NOT NULL,
    period_id text COLLATE "C" NOT NULL,
    period_start bigint,
    period_end bigint,
    aggregation text COLLATE "C" NOT NULL,
    tie_rule text COLLATE "C" NOT NULL,
    closed_at bigint NOT NULL,
    closed_seq bigint NOT NULL,
    PRIMARY KEY (board, id),
    UNIQUE (board, closed_seq)
);
CREATE TABLE {s}.node_lease (
    node_id text COLLATE "C" PRIMARY KEY,
    instance text COLLATE "C" NOT NULL,
    expires_at timestamptz NOT NULL,
    url text COLLATE "C" NOT NULL DEFAULT '',
    state text COLLATE "C" NOT NULL DEFAULT 'serving'
);
CREATE TABLE {s}.board_owner (
    board text COLLATE "C" PRIMARY KEY,
    node_id text COLLATE "C" NOT NULL,
    instance text COLLATE "C" NOT NULL,
    epoch bigint NOT NULL,
    active boolean NOT NULL DEFAULT true
);
CREATE TABLE {s}.score_void (
    board text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    target_seq bigint NOT NULL,
    idempotency_key bytea NOT NULL,
    reason bytea NOT NULL,
    admin text COLLATE "C" NOT NULL,
    voided_at bigint NOT NULL,
    PRIMARY KEY (board, seq),
    UNIQUE (board, target_seq),
    FOREIGN KEY (board, target_seq) REFERENCES {s}.score_event (board, seq)
);
CREATE TABLE {s}.board_snapshot (board text COLLATE "C" PRIMARY KEY, seq bigint NOT NULL, data bytea NOT NULL);
{board_records}
{settlement_log}
{webhook_outbox}
"""
_BOARD_RECORDS = """
CREATE TABLE {s}.board_record (
    board text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    kind text COLLATE "C" NOT NULL,
    body text COLLATE "C" NOT NULL,
    PRIMARY KEY (board, seq)
);
CREATE TABLE {s}.node_config (node_id text COLLATE "C" PRIMARY KEY, boards text NOT NULL);
CREATE TABLE {s}.board_catalog (
    name text COLLATE "C" PRIMARY KEY,
    definition text COLLATE "C" NOT NULL,
    version bigint NOT NULL,
    retired boolean NOT NULL DEFAULT false
);
"""
"""Version 5: the board records of every board's journal (definitions, retirement; later kinds
share the table), the catalog of the boards created through the admin API, and each node's
config board definitions (as digests, to show a node whose config differs)."""
_SETTLEMENT_LOG = """
CREATE TABLE {s}.settlement_log (
    cursor bigint PRIMARY KEY,
    board text COLLATE "C" NOT NULL,
    period text COLLATE "C" NOT NULL,
    period_id text COLLATE "C" NOT NULL,
    partition text COLLATE "C" NOT NULL,
    revision integer NOT NULL,
    seq bigint NOT NULL,
    sha256 text COLLATE "C" NOT NULL,
    awards integer NOT NULL,
    UNIQUE (board, period, period_id, partition, revision)
);
CREATE TABLE {s}.settlement_log_head (one boolean PRIMARY KEY CHECK (one), cursor bigint NOT NULL);
INSERT INTO {s}.settlement_log_head VALUES (true, 0);
"""
"""Version 6: the settlement log of every board (`arena.journal.settlement_log`) and its head,
the last cursor given, the row every append locks until its COMMIT (so log order is commit order)."""
_WEBHOOK_OUTBOX = """
CREATE TABLE {s}.webhook_delivery (
    place bigserial PRIMARY KEY,
    webhook text COLLATE "C" NOT NULL,
    delivery text COLLATE "C" NOT NULL,
    board text COLLATE "C" NOT NULL,
    period text COLLATE "C" NOT NULL,
    period_id text COLLATE "C" NOT NULL,
    partition text COLLATE "C" NOT NULL,
    revision integer NOT NULL,
    page integer,
    created_at bigint NOT NULL,
    state text COLLATE "C" NOT NULL,
    attempts integer NOT NULL,
    next_at bigint NOT NULL,
    last_error text,
    delivered_at bigint,
    since_at bigint NOT NULL,
    UNIQUE (webhook, delivery)
);
CREATE INDEX webhook_delivery_due ON {s}.webhook_delivery (state, next_at);
CREATE INDEX webhook_delivery_table ON {s}.webhook_delivery (webhook, board, period, period_id, partition, revision);
CREATE TABLE {s}.webhook_cursor (webhook text COLLATE "C" PRIMARY KEY, cursor bigint NOT NULL);
"""
"""Version 7: the webhooks' outbox (`arena.delivery.outbox`): every delivery and its state, and
how far each webhook has read the settlement log. Outside every board's seq order. Version 8: whether
each board's owner has it in memory (`board_owner.active`): standbys follow active boards only."""



async def tables(conn: asyncpg.Connection, schema: str, where: str, readonly: bool) -> int:
    """Inside the caller's transaction: the tables' schema version in ``schema`` (described as
    ``where``), after creating them when missing (0: missing, read-only) and, unless
    ``readonly``, upgrading them to `SCHEMA_VERSION`. Raises JournalCorrupt, and what asyncpg
    raises."""
    def sql(template: str) -> str:
        return template.format(s=schema, board_records=_BOARD_RECORDS.format(s=schema),
                               settlement_log=_SETTLEMENT_LOG.format(s=schema),
                               webhook_outbox=_WEBHOOK_OUTBOX.format(s=schema))

    if not readonly:  # two servers starting at once: one creates, the other finds
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"arena:{schema}")
    if await conn.fetchval("SELECT to_regclass($1)", f"{schema}.schema_version") is None:
        if readonly:
            return 0
        await conn.execute(sql(_TABLES))
        await conn.execute(sql("INSERT INTO {s}.schema_version VALUES ($1)"), SCHEMA_VERSION)
        log.info("created the journal tables at %s (schema version %d)", where, SCHEMA_VERSION)
        return SCHEMA_VERSION
    version = await conn.fetchval(sql("SELECT max(version) FROM {s}.schema_version"))
    if version is None:
        raise JournalCorrupt(f"{where}: not a readable Arena journal: no schema version")
    while not readonly and version in _UPGRADES:
        await conn.execute(sql(_UPGRADES[version]))
        version += 1
        await conn.execute(sql("INSERT INTO {s}.schema_version VALUES ($1)"), version)
        log.info("upgraded the journal tables at %s to schema version %d", where, version)
    return int(version)

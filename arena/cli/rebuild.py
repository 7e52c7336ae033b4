"""Rebuilding a board read-only, as a starting actor loads it: `arena rebuild`, `arena verify`
and `arena migrate` print and compare what this returns."""

from __future__ import annotations

import orjson

from arena.board.load import LoadReport, load
from arena.config import Config, parse_board
from arena.engine.board import BoardEngine
from arena.engine.routing import PartitionKey, TableKey, table_key
from arena.engine.spec import BoardSpec
from arena.engine.table import RankedTable
from arena.journal import CatalogEntry, board_catalog, journal_backend


async def catalog_entries(config: Config) -> list[CatalogEntry]:
    """The API boards of the store ``config`` names, read-only (none when it has no catalog)."""
    backend = journal_backend(config)
    catalog = board_catalog(config, backend, readonly=True)
    try:
        return await catalog.entries()
    finally:
        await catalog.close()
        await backend.close()


async def every_board(config: Config) -> list[BoardSpec]:
    """The boards of the config and, after them, those created through the admin API."""
    api = [parse_board(e.name, orjson.loads(e.definition)) for e in await catalog_entries(config)]
    return [*config.boards.values(), *(spec for spec in api if spec.name not in config.boards)]


async def rebuild_board(
    config: Config,
    spec: BoardSpec,
    *,
    now: int,
    upto_seq: int | None = None,
    everything: bool = False,
) -> tuple[BoardEngine, LoadReport]:
    """Load one board from its journal read-only, by the load path of a starting actor (a full
    replay: no snapshot)."""
    backend = journal_backend(config)
    try:
        journal = await backend.open(spec, readonly=True)
        try:
            engine = BoardEngine(spec)
            report = await load(engine, journal, now, upto_seq=upto_seq, everything=everything)
        finally:
            await journal.close()
    finally:
        await backend.close()
    return engine, report


def table_rows(
    spec: BoardSpec, engine: BoardEngine, report: LoadReport, now: int
) -> dict[TableKey | PartitionKey, tuple[RankedTable, int, float]]:
    """What `arena rebuild` prints of a rebuilt board: (table, events replayed, seconds) by
    `table_key`, for every table the server lists and each of its partitions, those no event
    reached (size 0) included."""
    rows = {table_key(t.table.window, t.table.partition): (t.table, t.events, t.seconds) for t in report.tables}
    for kind in spec.kinds:
        for table in engine.listed_tables(kind, now):
            for listed in (table, *engine.partition_tables(table)):
                rows.setdefault(table_key(listed.window, listed.partition), (listed, 0, 0.0))
    return rows


def table_name(key: TableKey | PartitionKey) -> tuple[str, str]:
    """A table's period and period_id as `arena rebuild` and `arena migrate` print them: a
    partition's as ``<period_id>/<partition>``."""
    return str(key[0]), "/".join(key[1:])

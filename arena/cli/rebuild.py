"""Rebuilding a board read-only, as a starting actor loads it: `arena rebuild`, `arena verify`
and `arena migrate` print and compare what this returns."""

from __future__ import annotations

from arena.board.load import LoadReport, load
from arena.config import Config
from arena.engine.board import BoardEngine
from arena.engine.routing import TableKey
from arena.engine.spec import BoardSpec
from arena.engine.table import RankedTable
from arena.journal import journal_backend


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
) -> dict[TableKey, tuple[RankedTable, int, float]]:
    """What `arena rebuild` prints of a rebuilt board: (table, events replayed, seconds) by
    (kind, period_id), for every table the server lists, those no event reached (size 0) included."""
    rows = {(t.table.window.kind, t.table.window.period_id): (t.table, t.events, t.seconds) for t in report.tables}
    for kind in spec.kinds:
        for table in engine.listed_tables(kind, now):
            rows.setdefault((kind, table.window.period_id), (table, 0, 0.0))
    return rows

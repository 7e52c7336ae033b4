"""The event journal, the source of truth of a board: the interface (`arena.journal.interface`)
and its backends (`arena.journal.sqlite`, `arena.journal.postgresql`)."""

from arena.config import Config
from arena.engine.scoring import FoldRow
from arena.journal.catalog import BoardCatalog, CatalogEntry
from arena.journal.interface import FoldingJournal, Journal, JournalBackend, ScoreRow, check_definition
from arena.journal.settlement_log import SettlementLog

__all__ = ["BoardCatalog", "CatalogEntry", "FoldRow", "FoldingJournal", "Journal", "JournalBackend", "ScoreRow",
           "SettlementLog", "board_catalog", "check_definition", "journal_backend", "settlement_log"]


def journal_backend(config: Config) -> JournalBackend:
    """The backend the config names, for `arena serve`, `rebuild` and `verify`. It connects to
    nothing before its first `open`."""
    # imported here: a backend's driver is loaded only when the config names that backend
    if config.journal.backend == "postgresql":
        from arena.journal.postgresql import PostgresBackend

        return PostgresBackend(config.journal, config.server.durability, config.node_id)
    from arena.journal.sqlite import SqliteBackend

    return SqliteBackend(config.server.data_dir, config.server.durability)


def board_catalog(config: Config, backend: JournalBackend, *, readonly: bool = False) -> BoardCatalog:
    """The catalog of API boards kept with ``backend``'s journals (the one `journal_backend`
    gave: PostgreSQL's shares its connections)."""
    if config.journal.backend == "postgresql":
        from arena.journal.postgresql import PostgresBackend
        from arena.journal.postgresql.catalog import PostgresCatalog

        assert isinstance(backend, PostgresBackend)
        return PostgresCatalog(backend.store, readonly)
    from arena.journal.sqlite_catalog import SqliteCatalog

    return SqliteCatalog(config.server.data_dir, readonly)


def settlement_log(config: Config, backend: JournalBackend, *, readonly: bool = False) -> SettlementLog:
    """The settlement log kept with ``backend``'s journals (the one `journal_backend` gave:
    PostgreSQL's shares its connections)."""
    if config.journal.backend == "postgresql":
        from arena.journal.postgresql import PostgresBackend
        from arena.journal.postgresql.settlement_log import PostgresSettlementLog

        assert isinstance(backend, PostgresBackend)
        return PostgresSettlementLog(backend.store, readonly)
    from arena.journal.sqlite_settlement_log import SqliteSettlementLog

    return SqliteSettlementLog(config.server.data_dir, config.server.durability, readonly)

"""The event journal, the source of truth of a board: the interface (`arena.journal.interface`)
and its backends (`arena.journal.sqlite`, `arena.journal.postgresql`)."""

from arena.config import Config
from arena.engine.scoring import FoldRow
from arena.journal.interface import FoldingJournal, Journal, JournalBackend, ScoreRow, check_definition

__all__ = ["FoldRow", "FoldingJournal", "Journal", "JournalBackend", "ScoreRow", "check_definition", "journal_backend"]


def journal_backend(config: Config) -> JournalBackend:
    """The backend the config names, for `arena serve`, `rebuild` and `verify`. It connects to
    nothing before its first `open`."""
    # imported here: a backend's driver is loaded only when the config names that backend
    if config.journal.backend == "postgresql":
        from arena.journal.postgresql import PostgresBackend

        return PostgresBackend(config.journal, config.server.durability, config.node_id)
    from arena.journal.sqlite import SqliteBackend

    return SqliteBackend(config.server.data_dir, config.server.durability)

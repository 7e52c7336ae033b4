"""Settlements to webhooks: the outbox (`outbox`, its stores), signed POSTs (`sender`) and the
loop a node runs to fill the outbox from the settlement log and send its boards' deliveries
(`deliverer`)."""

from arena.config import Config
from arena.delivery.outbox import Outbox
from arena.journal import JournalBackend


def outbox_store(config: Config, backend: JournalBackend) -> Outbox:
    """The outbox kept with ``backend``'s journals (the one `journal_backend` gave: PostgreSQL's
    shares its connections)."""
    if config.journal.backend == "postgresql":
        from arena.delivery.postgresql_outbox import PostgresOutbox
        from arena.journal.postgresql import PostgresBackend

        assert isinstance(backend, PostgresBackend)
        return PostgresOutbox(backend.store)
    from arena.delivery.sqlite_outbox import SqliteOutbox

    return SqliteOutbox(config.server.data_dir, config.server.durability)

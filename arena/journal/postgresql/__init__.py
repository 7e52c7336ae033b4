"""The PostgreSQL journal backend: the store (`store`: the pool and its sessions), the tables
(`schema`: creation and upgrades) and the journals of all boards in them (`journal`)."""

from arena.journal.postgresql.journal import Fence, PostgresBackend, PostgresJournal
from arena.journal.postgresql.schema import SCHEMA_VERSION
from arena.journal.postgresql.store import STORE_ERRORS, PostgresStore

__all__ = ["SCHEMA_VERSION", "STORE_ERRORS", "Fence", "PostgresBackend", "PostgresJournal", "PostgresStore"]

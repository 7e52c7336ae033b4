"""Arena's error tree.

ArenaError
 ├── ConfigError          config.toml is missing, malformed or inconsistent (one line, names the key)
 ├── JournalError         a journal cannot be opened, read or written
 │    ├── JournalCorrupt      the file is not a readable Arena journal (names the file)
 │    ├── BoardDefinitionChanged  the board's aggregation/order/tie/timezone/periods differ from its journal
 │    ├── JournalWriteFailed  a write was refused (disk full, read-only); the batch was not journaled
 │    │    └── OwnershipLost  refused by its fence: the board was granted to another epoch; nothing written
 │    ├── OwnedElsewhere  a cluster node may not open a board to write: another live node owns it
 │    └── JournalUnavailable  the journal's store cannot be used at all (PostgreSQL unreachable, a
 │                            refused login, a schema of a newer Arena): stops `arena serve` at start
 ├── DataDirLocked        another `arena serve` holds the data directory
 ├── SchemaHeld           another node holds a live lease on the PostgreSQL schema
 ├── IllegalTransition    a move its state table does not allow (a bug): the state is unchanged
 └── QueryError           a query that cannot be answered; ``code`` is the wire code, ``status`` the HTTP hint
"""

from __future__ import annotations


class ArenaError(Exception):
    """Root of every error Arena raises on purpose."""


class ConfigError(ArenaError):
    pass


class JournalError(ArenaError):
    pass


class JournalCorrupt(JournalError):
    pass


class BoardDefinitionChanged(JournalError):
    pass


class JournalWriteFailed(JournalError):
    pass


class OwnershipLost(JournalWriteFailed):
    pass


class JournalUnavailable(JournalError):
    pass


class OwnedElsewhere(JournalError):
    pass


class DataDirLocked(ArenaError):
    pass


class SchemaHeld(ArenaError):
    pass


class IllegalTransition(ArenaError):
    """Raised by a state machine's move that its table does not allow (`arena.board.state`,
    `arena.cluster.node`)."""


class QueryError(ArenaError):
    """A query the service answers with an error body; the edge maps ``status`` to HTTP."""

    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


def invalid_request(message: str) -> QueryError:
    return QueryError("invalid_request", message, 400)


def not_found(code: str, message: str) -> QueryError:
    return QueryError(code, message, 404)


def not_ready(board: str) -> QueryError:
    return QueryError("not_ready", f"board {board!r} is still loading its tables", 503)


def unavailable(board: str) -> QueryError:
    return QueryError("unavailable", f"board {board!r} is unavailable", 503)

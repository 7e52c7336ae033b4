"""The catalog of the boards created through the admin API: each one's current definition (the
text of `BoardSpec.document_text`), its version and whether it is retired. It lives with the
journals (`data_dir/boards.sqlite` on sqlite; a table of the schema on PostgreSQL), so the boards
are there after a restart and every node of a cluster reads the same ones. The history of each
definition is in the board's own journal (`arena.engine.records.BoardRecord`); the catalog only
says which boards exist now."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from arena.errors import QueryError


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    name: str
    definition: str
    version: int
    retired: bool = False


def too_many_boards(limit: int) -> QueryError:
    return QueryError("too_many_boards", f"this server holds max_boards = {limit} boards already; retire one first", 409)


def board_exists(name: str) -> QueryError:
    return QueryError("precondition_failed", f"board {name!r} exists already (its version changed meanwhile)", 412)


class BoardCatalog(Protocol):
    """The API boards, read and changed in single transactions. Every method raises JournalError."""

    async def entries(self) -> list[CatalogEntry]:
        """Every API board, retired ones included, by name."""

    async def generation(self) -> int:
        """A number that grows with every change of the catalog (the sum of the versions): what
        a node compares to know whether to read the entries again. One read."""

    async def create(self, name: str, definition: str, room: int, limit: int) -> CatalogEntry:
        """Add ``name`` at version 1 if no entry holds it and fewer than ``room`` API boards are
        live (not retired). Raises QueryError too_many_boards (naming ``limit``), or
        precondition_failed (412) when the name was taken meanwhile."""

    async def update(self, name: str, definition: str, version: int, retired: bool = False) -> CatalogEntry | None:
        """Set ``name``'s definition (and retirement) if it is still at ``version``: the new
        entry, at ``version`` + 1; None when another change came first."""

    async def restore(self, entry: CatalogEntry) -> bool:
        """Add ``entry`` as it is (version, retirement) unless its name is held: whether it was
        added (`arena migrate` copies a catalog)."""

    async def close(self) -> None:
        """Release what it holds."""

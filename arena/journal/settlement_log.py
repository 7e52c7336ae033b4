"""The settlement log: every board's settlement revisions in one order, outside any board's seq
order (DESIGN.md "The settlement feed"). It lives with the journals (`data_dir/settlements.sqlite`
on sqlite; a table of the schema on PostgreSQL, shared by every node of a cluster). A revision
is journaled first (the truth) and appended here after its commit; a board's load appends again
whatever its journal holds (an append is idempotent), so a crash between the two loses nothing.

An item's ``cursor`` is its position: log order is commit order (on PostgreSQL a counter taken
under a row lock held to COMMIT), so a reader that asks for the items after the last cursor it
saw never misses one committed later with a smaller cursor."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from arena.engine.settlement import LogItem


class SettlementLog(Protocol):
    """Every method raises JournalError."""

    async def append(self, items: Sequence[LogItem]) -> None:
        """Append ``items`` (their cursors are ignored: the log gives them theirs) in their order,
        in one transaction, leaving out those whose `LogItem.key` the log holds already."""

    async def after(self, cursor: int, limit: int, boards: Callable[[str], bool]) -> list[LogItem]:
        """At most ``limit`` items after ``cursor`` in log order, only of the boards ``boards``
        accepts."""

    async def close(self) -> None:
        """Release what it holds."""

"""A board's settlement revisions on their way to the settlement log (`arena.journal.settlement_log`),
after their journal's commit and in its order. The journal is the truth: a failed append is
tried again after a pause (the board's batches go on meanwhile), and what a crash leaves out is
appended by the next load, which hands the writer every revision its journal holds (the log
keeps those it has)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from arena.engine.records import BoardKind, BoardRecord
from arena.engine.settlement import LogItem, SettlementRecord, log_item
from arena.errors import JournalError
from arena.journal import SettlementLog

log = logging.getLogger("arena.board")

RETRY_SECONDS = 1.0


class FeedWriter:
    """Appends one board's items in the order they are added, one append at a time."""

    def __init__(self, board: str, settlement_log: SettlementLog) -> None:
        self.board = board
        self.log = settlement_log
        self._pending: list[LogItem] = []
        self._task: asyncio.Task[None] | None = None

    def add(self, items: Iterable[LogItem]) -> None:
        """Append ``items`` after those added before, in the background."""
        self._pending.extend(items)
        if self._pending and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._run(), name=f"feed {self.board}")

    async def _run(self) -> None:
        while self._pending:
            items = list(self._pending)
            try:
                await self.log.append(items)
            except JournalError as exc:
                log.warning("board %s: %d settlement revisions not in the settlement log yet: %s; trying again in %.0fs",
                            self.board, len(items), exc, RETRY_SECONDS)
                await asyncio.sleep(RETRY_SECONDS)
                continue
            del self._pending[:len(items)]

    async def finish(self) -> None:
        """The actor stops: let the appends under way end, for `RETRY_SECONDS` at most (then
        the next load of the board appends what is left)."""
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=RETRY_SECONDS)
        self.abandon()

    def abandon(self) -> None:
        """The actor stops or crashed: append nothing more (the next load appends what is left)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None


def journaled_items(board: str, records: Iterable[BoardRecord]) -> list[LogItem]:
    """The settlement revisions among a journal's board ``records`` (in seq order), as log items."""
    return [log_item(board, SettlementRecord.parse(r.seq, r.body)) for r in records if r.kind == BoardKind.SETTLEMENT]

"""A board's settlements as its actor makes them (DESIGN.md "Seasons: settlement and prizes").

Revision 0 of each table closed with prizes (`BoardEngine.unsettled`) is made in the background,
a run of entries at a time from a copy of the entries that can win, so the actor keeps taking
events while a big table settles; the actor journals what is made between two batches. A closed
table changes only through a void, and the actor journals every pending settlement before it
runs a command (`Settler.finish`), so revision 0 is always of the table as its close left it.
A void that changes any award of a settled, retained table makes the next revision (`revision`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from arena.engine.board import BoardEngine
from arena.engine.periods import Window
from arena.engine.prizes import PrizeTier, rank_bound
from arena.engine.routing import PartitionKey, TableKey
from arena.engine.scoring import Order
from arena.engine.settlement import Settlement, SettlementRecord, Settling, revise
from arena.engine.table import RankedTable

SETTLE_STEP = 256
"""Entries judged between two turns of the event loop: about 1 ms (an entry decoded, judged and
hashed costs a few µs)."""


async def first(tiers: Sequence[PrizeTier], table: RankedTable | None, order: Order) -> tuple[Settlement, int]:
    """Revision 0 of ``table`` (None: a window no event reached) under ``tiers``, and the table's
    size: made in runs of `SETTLE_STEP` entries from a copy of those that can win (every entry
    with a `score` tier), so ``table`` may change meanwhile. O(entries that can win × tiers)."""
    size = 0 if table is None else len(table)
    if table is None or size == 0:
        return Settling(tiers, (), 0, order).settlement(), 0
    can_win = None if any(tier.score is not None for tier in tiers) else rank_bound(tiers, size)
    settling = Settling(tiers, table.decoded(table.snapshot(can_win)), size, order)
    while not settling.run(SETTLE_STEP):
        await asyncio.sleep(0)
    return settling.settlement(), size


TEXT_STEP = 1024
"""Awards encoded between two turns of the event loop, when a revision's journal text is made."""


async def record_text(window: Window, size: int, settlement: Settlement, partition: str | None) -> str:
    """The journal text of ``settlement`` (`SettlementRecord.text`), encoded `TEXT_STEP` awards
    at a time beside the actor's batches: the actor journals it without encoding 100,000 awards
    while the board's acks wait. O(awards)."""
    pieces = []
    for piece in SettlementRecord(0, window, size, settlement, partition).text_pieces(TEXT_STEP):
        pieces.append(piece)
        await asyncio.sleep(0)
    return "".join(pieces)


Made = tuple[Window, int, Settlement, str | None, str]
"""A revision made and not journaled yet: the table's window, its size, the settlement, the
table's partition (None: the window's global table) and its journal text (`record_text`)."""


class Settler:
    """The settlements of one actor's life: a task per unsettled table, taken once done."""

    def __init__(self, engine: BoardEngine, wake: Callable[[], None]) -> None:
        self.engine = engine
        self._wake = wake
        self._tasks: dict[TableKey | PartitionKey, asyncio.Task[Made]] = {}
        self._refused: list[Made] = []  # revisions after a void that the journal refused: made again never
        self._paused = False  # after a refusal: nothing is due until the pause ends

    def start(self) -> None:
        """Start settling every unsettled table not under way. O(unsettled tables)."""
        if not self._paused:
            self._start()

    def _start(self) -> None:
        engine = self.engine
        for key, tiers in engine.unsettled.items():
            if key not in self._tasks:
                partition = key[2] if len(key) == 3 else None
                task = asyncio.create_task(self._first(engine.markers[key[:2]].window, partition, tiers))
                task.add_done_callback(lambda _task: self._wake())
                self._tasks[key] = task

    async def _first(self, window: Window, partition: str | None, tiers: tuple[PrizeTier, ...]) -> Made:
        table = self.engine.table(window, partition)
        settlement, size = await first(tiers, table, self.engine.rule.order)
        return window, size, settlement, partition, await record_text(window, size, settlement, partition)

    @property
    def due(self) -> bool:
        """Whether a settlement is made and waits to be journaled."""
        if self._paused:
            return False
        return bool(self._refused) or any(task.done() for task in self._tasks.values())

    def take(self) -> list[Made]:
        """The settlements made: revisions the journal refused first, then the revisions 0 made,
        in the order of their tables' close markers; raises what a task raised (a bug: the actor
        crashes and its restart settles again)."""
        done = sorted((key for key, task in self._tasks.items() if task.done()), key=lambda k: self.engine.markers[k[:2]].seq)
        refused, self._refused = self._refused, []
        return [*refused, *(self._tasks.pop(key).result() for key in done)]

    def refused(self, made: list[Made], pause: float) -> None:
        """The journal refused ``made``: nothing is due for ``pause`` seconds (the board's
        batches go on meanwhile), then `take` gives its revisions after a void again (a revision
        0 is made again from its table, which stays unsettled)."""
        self._refused.extend(m for m in made if m[2].revision > 0)
        self._paused = True
        asyncio.get_running_loop().call_later(pause, self._resume)

    def _resume(self) -> None:
        self._paused = False
        self._wake()

    async def finish(self) -> list[Made]:
        """Every unsettled table's settlement, once made (`take`), a pause after a refusal or not."""
        self._start()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        return self.take()

    def abandon(self) -> None:
        """The actor stops or crashed: settle nothing more (the next load finds what is left)."""
        for task in self._tasks.values():
            task.cancel()
        self._tasks.clear()

    async def revision(self, key: TableKey | PartitionKey) -> Made | None:
        """The revision after the latest of a settled table (a window's global table, or one of
        its partitions) that a void changed, under revision 0's tiers; None when the table is not
        settled or no longer retained, or no award changed in rank, member, score or reward."""
        revisions = self.engine.settlements.get(key)
        if not revisions:
            return None
        latest = revisions[-1]
        table = self.engine.table(latest.window, latest.partition)
        if table is None or self.engine.table(latest.window) is None:
            return None
        made, size = await first(latest.settlement.tiers, table, self.engine.rule.order)
        after = revise(latest.settlement, made.awards)
        if after is None:
            return None
        return latest.window, size, after, latest.partition, await record_text(latest.window, size, after, latest.partition)


def settlement_records(made: Sequence[Made], last_seq: int) -> list[SettlementRecord]:
    """The journal records of settlements ``made``, their seqs following ``last_seq``."""
    return [SettlementRecord(last_seq + i + 1, window, size, settlement, partition)
            for i, (window, size, settlement, partition, _text) in enumerate(made)]

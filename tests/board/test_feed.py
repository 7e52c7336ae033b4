"""`FeedWriter`: a board's revisions reach the settlement log in the order they were added, one
append at a time; an append that fails is tried again (counted in
`arena_settlement_log_failures_total`) with what was added meanwhile behind it; `abandon` stops."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

import arena.board.feed
from arena.board.feed import FeedWriter
from arena.engine.settlement import LogItem
from arena.errors import JournalUnavailable
from arena.metrics import Metrics
from support.server import until


def item(revision: int) -> LogItem:
    return LogItem(0, "b", "daily", "2027-01-04", None, revision, revision + 1, "0" * 64, 1)


class FlakyLog:
    """A settlement log whose first ``failures`` appends fail."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.appends: list[list[LogItem]] = []

    async def append(self, items: Sequence[LogItem]) -> None:
        if self.failures:
            self.failures -= 1
            raise JournalUnavailable("PostgreSQL is unreachable")
        self.appends.append(list(items))

    async def after(self, cursor: int, limit: int, boards: Callable[[str], bool]) -> list[LogItem]:
        return []

    async def restore(self, items: Sequence[LogItem]) -> bool:
        return False

    async def close(self) -> None:
        pass


async def test_a_failed_append_is_tried_again_with_what_came_after_it_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arena.board.feed, "RETRY_SECONDS", 0.0)
    log, metrics = FlakyLog(failures=2), Metrics()
    writer = FeedWriter("b", log, metrics)
    writer.add([item(0)])
    writer.add([item(1), item(2)])
    await until(lambda: log.appends, "the append to succeed")
    assert [i.revision for batch in log.appends for i in batch] == [0, 1, 2]
    assert metrics.settlement_log_failures._value.get() == 2
    writer.add([item(3)])
    await until(lambda: len(log.appends) == 2, "the next append")
    assert log.appends[1] == [item(3)]


async def test_abandon_appends_nothing_more() -> None:
    log = FlakyLog(failures=1)  # the first attempt fails, the retry waits: abandoned meanwhile
    writer = FeedWriter("b", log, Metrics())
    writer.add([item(0)])
    await until(lambda: log.failures == 0, "the first attempt")
    writer.abandon()
    await writer.finish()
    assert log.appends == []

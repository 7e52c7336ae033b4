"""A crashed board whose journal store is unreachable (PostgreSQL down): the supervisor opens its
journal again until the store is back, answering what queues meanwhile `unavailable`, and the
board then serves again by itself. A store unreachable at start-up stops the start instead."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pytest
from prometheus_client import CollectorRegistry

from arena.board import supervisor
from arena.board.clock import Clock
from arena.board.state import BoardState
from arena.board.supervisor import Supervisor
from arena.config import Config, ServerSettings
from arena.engine.events import Event, Fingerprint
from arena.engine.periods import PeriodKind
from arena.engine.spec import BoardSpec
from arena.errors import JournalUnavailable
from arena.metrics import Metrics
from support.injection.journal import InjectedCrash
from support.memory_journal import MemoryJournal
from support.server import until

SPEC = BoardSpec("b", periods=(PeriodKind.ALLTIME,))


class CrashingJournal(MemoryJournal):
    """Its next ``crashes`` key lookups raise: the actor looks up a batch's keys first, so each
    takes a batch down, as `support.injection.journal.FaultyBackend.crash` does (which wraps
    journals as a backend's, that fold their replay: this one does not)."""

    crashes = 0

    async def lookup(self, keys: Sequence[str]) -> dict[str, Fingerprint]:
        if self.crashes:
            self.crashes -= 1
            raise InjectedCrash(f"fault injection: crash of board {SPEC.name}")
        return await super().lookup(keys)


class UnreachableBackend:
    """Opens one shared CrashingJournal, except that ``down`` opens in a row raise JournalUnavailable."""

    def __init__(self) -> None:
        self.journal = CrashingJournal()
        self.down = 0
        self.refused = 0

    def where(self, board: str) -> str:
        return "memory"

    async def open(self, spec: BoardSpec, *, readonly: bool = False) -> MemoryJournal:
        if self.down:
            self.down -= 1
            self.refused += 1
            raise JournalUnavailable("memory: cannot connect to PostgreSQL: refused")
        return self.journal

    def watch(self, registry: CollectorRegistry, boards: Iterable[str]) -> None:
        pass

    async def close(self) -> None:
        pass


def config() -> Config:
    return Config(server=ServerSettings(idle_unload_seconds=0), servers=(), admins=(), boards={"b": SPEC})  # loads at start


async def test_a_crashed_board_reopens_its_journal_once_the_store_is_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervisor, "REOPEN_RETRY_SECONDS", 0.05)
    backend = UnreachableBackend()
    sup = Supervisor(config(), Clock(), Metrics(), backend)
    await sup.start()
    handle = sup.handles["b"]
    await until(lambda: handle.state is BoardState.SERVING, "the board to load")
    assert (await handle.submit([Event("b", "a", 1, Clock().now(), "k1")], Clock().now(), "gs"))[0].status.value == "accepted"

    backend.down = 10**6  # until the store is back, below
    backend.journal.crashes = 1
    crashed = await handle.submit([Event("b", "a", 2, Clock().now(), "k2")], Clock().now(), "gs")
    assert [(r.status.value, r.reason and r.reason.value) for r in crashed] == [("rejected", "unavailable")]
    await until(lambda: backend.refused >= 3, "opens refused")
    queued = await handle.submit([Event("b", "a", 3, Clock().now(), "k3")], Clock().now(), "gs")
    assert [(r.status.value, r.reason and r.reason.value) for r in queued] == [("rejected", "unavailable")]

    backend.down = 0
    await until(lambda: sup.runs["b"] == 2 and handle.state is BoardState.SERVING, "the board to serve again")
    again = await handle.submit([Event("b", "a", 3, Clock().now(), "k3")], Clock().now(), "gs")
    assert again[0].status.value == "accepted" and sup.runs["b"] == 2
    await sup.stop()


async def test_a_store_unreachable_at_start_stops_the_start() -> None:
    backend = UnreachableBackend()
    backend.down = 1
    with pytest.raises(JournalUnavailable, match="cannot connect to PostgreSQL"):
        await Supervisor(config(), Clock(), Metrics(), backend).start()


async def test_an_activation_that_cannot_reach_the_store_leaves_the_board_inactive_for_the_next_request() -> None:
    """Activation on demand: the store away at an activation is not a broken journal: what woke
    the board is answered `unavailable` and the board stays inactive (not failed, which would
    hold it for good on a cluster node); the next request activates it once the store is back."""
    backend = UnreachableBackend()
    on_demand = Config(server=ServerSettings(idle_unload_seconds=600), servers=(), admins=(), boards={"b": SPEC})
    sup = Supervisor(on_demand, Clock(), Metrics(), backend)
    await sup.start()
    handle = sup.handles["b"]
    assert handle.state is BoardState.INACTIVE
    backend.down = 1
    refused = await handle.submit([Event("b", "a", 1, Clock().now(), "k1")], Clock().now(), "gs")
    assert [(r.status.value, r.reason and r.reason.value) for r in refused] == [("rejected", "unavailable")]
    await until(lambda: handle.state is BoardState.INACTIVE, "the board inactive again")
    accepted = await handle.submit([Event("b", "a", 1, Clock().now(), "k1")], Clock().now(), "gs")
    assert accepted[0].status.value == "accepted" and sup.states.state("b") is BoardState.SERVING
    await sup.stop()

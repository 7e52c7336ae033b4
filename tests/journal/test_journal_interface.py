"""The journal boundary: the interface loads no backend, every backend applies the same
board-definition rule, and the tests' journal faults (`support.injection.journal`) wrap any backend."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry

from arena.engine.events import Event
from arena.engine.periods import PeriodKind
from arena.engine.records import ScoreRecord
from arena.engine.spec import BoardSpec
from arena.errors import BoardDefinitionChanged, JournalWriteFailed
from arena.journal import check_definition
from support.injection.journal import FAULTS, FaultyBackend, InjectedCrash
from support.memory_journal import MemoryJournal

SPEC = BoardSpec("b", periods=(PeriodKind.ALLTIME, PeriodKind.DAILY))
STORED = check_definition(SPEC, None, False, "j")


def test_the_interface_imports_no_storage_library() -> None:
    code = "import sys, arena.journal; print(sorted(m for m in sys.modules if 'sqlite' in m or 'asyncpg' in m))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


# -- the board definition ------------------------------------------------------------------------


def test_a_new_journal_stores_the_definition_and_an_unchanged_one_stores_nothing() -> None:
    assert STORED is not None
    assert check_definition(SPEC, STORED, True, "j") is None


def test_a_journal_without_records_takes_a_changed_definition() -> None:
    changed = replace(SPEC, timezone="Asia/Kolkata")
    assert check_definition(changed, STORED, False, "j") == check_definition(changed, None, False, "j") != STORED


def test_a_changed_definition_with_records_names_the_board_the_journal_and_the_change() -> None:
    with pytest.raises(BoardDefinitionChanged) as raised:
        check_definition(replace(SPEC, timezone="Asia/Kolkata"), STORED, True, "/data/b.journal.sqlite")
    assert str(raised.value) == (
        "board 'b': definition changed while its journal /data/b.journal.sqlite holds records"
        " (timezone: 'UTC' -> 'Asia/Kolkata'); use a new board name"
    )


# -- journal faults (tests only) -----------------------------------------------------------------


class MemoryBackend:
    def where(self, board: str) -> str:
        return "memory"

    async def open(self, spec: BoardSpec, *, readonly: bool = False) -> MemoryJournal:
        return MemoryJournal()

    def watch(self, registry: CollectorRegistry, boards: Iterable[str]) -> None:
        pass

    async def close(self) -> None:
        pass


def score(seq: int) -> ScoreRecord:
    return ScoreRecord(seq, Event("b", "a", seq, 1_000, f"k{seq}"), 1_005, "gs")


@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_an_injected_write_fault_refuses_appends_and_keeps_reads_until_healed(fault: str) -> None:
    faults = FaultyBackend(MemoryBackend())
    assert not faults.inject("b", fault)  # no journal open yet
    journal = await faults.open(SPEC)
    await journal.append([score(1)])
    assert faults.inject("b", fault)
    with pytest.raises(JournalWriteFailed, match=FAULTS[fault]):
        await journal.append([score(2)])
    await journal.append([])  # nothing to write, nothing refused
    assert (journal.last_seq, await journal.committed_seq()) == (1, 1)
    assert await journal.lookup(["k1", "k2"]) == {"k1": ("a", 1, 1_000, None)}
    assert faults.inject("b", None)
    await journal.append([score(2)])
    assert await journal.committed_seq() == 2


async def test_an_injected_crash_raises_from_the_next_lookups_across_a_reopen() -> None:
    faults = FaultyBackend(MemoryBackend())
    faults.crash("b", 2)  # before any journal is open, as for a board still loading
    journal = await faults.open(SPEC)
    with pytest.raises(InjectedCrash, match="crash of board b"):
        await journal.lookup(["k1"])
    journal = await faults.open(SPEC)  # the actor's restart
    with pytest.raises(InjectedCrash):
        await journal.lookup([])
    assert await journal.lookup(["k1"]) == {}

"""The actor's settler (`arena.board.settling`) on an engine without I/O: a table closed with
prizes is unsettled until its revision 0 is installed, made from the table as its close left it
even if the table changes meanwhile; a revision after a void only when an award changed; what
the journal refused is given again after the pause, and nothing before it."""

from __future__ import annotations

import asyncio

from arena.board.settling import Settler, settlement_records
from arena.engine.board import BoardEngine
from arena.engine.periods import PeriodKind
from arena.engine.prizes import PrizeTier
from arena.engine.records import CloseRecord
from arena.engine.spec import BoardSpec

DAY = 86_400_000
D0 = 1_799_020_800_000  # 2027-01-04T00:00:00Z
TIERS = (PrizeTier("gold", ranks=(1, 1)), PrizeTier("pin", ranks=(2, 3)))
SPEC = BoardSpec("b", periods=(PeriodKind.DAILY,), prizes=((PeriodKind.DAILY, TIERS),))


def closed_engine(scores: dict[str, int]) -> BoardEngine:
    engine = BoardEngine(SPEC)
    window = engine.schedule.current(PeriodKind.DAILY, D0)
    table = engine._table(window)
    for i, (member, score) in enumerate(scores.items()):
        table.apply(member, score, D0 + i, f"k{i}")
    engine.close(CloseRecord(1, window, D0 + DAY + 60_000))
    engine.last_seq = 1
    return engine


async def made_now(settler: Settler) -> None:
    while not settler.due:  # each task runs a turn of the loop at a time
        await asyncio.sleep(0)


async def test_revision_0_is_of_the_table_as_its_close_left_it_and_installs_once() -> None:
    engine = closed_engine({"ann": 9, "bob": 7, "cyd": 5, "dan": 1})
    key = (PeriodKind.DAILY, "2027-01-04")
    assert engine.unsettled == {key: TIERS}
    settler = Settler(engine, lambda: None)
    settler.start()
    await asyncio.sleep(0)  # the task's first step copies the entries that can win
    engine.tables[key].apply("zed", 99, D0, "late")
    await made_now(settler)
    [record] = settlement_records(settler.take(), engine.last_seq)
    assert [(a.member, a.reward) for a in record.settlement.awards] == [("ann", "gold"), ("bob", "pin"), ("cyd", "pin")]
    assert (record.seq, record.size, record.settlement.revision) == (2, 4, 0)
    engine.settled(record)
    engine.settled(record)  # read again (a standby's next load): kept once
    assert engine.unsettled == {} and engine.settlements[key] == [record]
    # the table as it is now (zed first) changes every award: revision 1, under revision 0's tiers
    revised = await settler.revision(key)
    assert revised is not None and revised[2].revision == 1
    assert [(c["member"], c["before"], c["after"]) for c in revised[2].changes] == [
        ("ann", "gold", "pin"), ("cyd", "pin", None), ("zed", None, "gold")]
    engine.tables[key].set_state("zed", None)
    assert await settler.revision(key) is None  # the same awards as revision 0: no revision


async def test_what_the_journal_refused_is_due_again_after_the_pause() -> None:
    engine = closed_engine({"ann": 9, "bob": 7})
    woken = asyncio.Event()
    settler = Settler(engine, woken.set)
    settler.start()
    await made_now(settler)
    [first] = settler.take()
    engine.settled(settlement_records([first], engine.last_seq)[0])
    engine.tables[(PeriodKind.DAILY, "2027-01-04")].set_state("ann", None)
    revised = await settler.revision((PeriodKind.DAILY, "2027-01-04"))
    assert revised is not None
    settler.refused([revised], 0.05)
    assert not settler.due  # paused: the board's batches go on
    async with asyncio.timeout(5):
        while not settler.due:  # the pause's end wakes the actor (so may the first task's end)
            woken.clear()
            await woken.wait()
    assert settler.take() == [revised]
    assert not settler.due

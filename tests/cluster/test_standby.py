"""A standby's copy of a board (`arena.cluster.standby`): followed tail by tail while the owner
journals (events, voids of events on both sides of a tail, close markers), it equals a full
replay of the journal, digest for digest, on sqlite and PostgreSQL."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from arena.board.load import load
from arena.cluster.standby import Follower
from arena.engine.board import BoardEngine
from arena.journal import Journal
from support.engines import Live, full_replay, state
from support.journals import BackendKind, Store, journal_store, stored_property
from support.oracle import Frame, OBoard, boards_and_frames, spec_of

STORED_PROPERTY = stored_property(30)
DAY = 86_400_000


@STORED_PROPERTY
@given(boards_and_frames(), st.data())
def test_a_board_followed_tail_by_tail_equals_a_full_replay(
    backend_kind: BackendKind, case: tuple[OBoard, list[Frame]], data: st.DataObject
) -> None:
    board, frames = case
    spec = spec_of(board)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(frames)), min_size=1, max_size=3), label="follow after frames"))
    async def run() -> None:
        async with journal_store(*backend_kind) as store:
            journal = await store.open(spec)
            follower = Follower(spec)
            try:
                await body(store, journal, follower)
            finally:  # also when a draw ends the example early (Hypothesis stops it by raising)
                await follower.close()
                await journal.close()

    async def body(store: Store, journal: Journal, follower: Follower) -> None:
        live = Live(spec, journal, data)
        done = 0
        for cut in cuts:
            await live.play(frames[done:cut])
            done = cut
            await follower.catch_up(store.backend(), frames[max(cut - 1, 0)].now)
        await live.play(frames[done:])
        now = frames[-1].now + data.draw(st.sampled_from([0, DAY, 40 * DAY]), label="taken over later by")
        engine = await follower.take()
        assert isinstance(engine, BoardEngine)
        await load(engine, journal, now, copy=True)  # what the new owner's actor does
        assert state(engine) == state(await full_replay(journal, spec, now))

    asyncio.run(run())

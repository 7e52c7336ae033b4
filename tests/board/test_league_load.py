"""A league board's divisions and tiers after a load: a full replay of the journal, a start
from a snapshot taken mid-season and a standby's copy that follows the tail give the live engine's divisions (members, standings, who
waits), tiers and close records, voids included, on both backends."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from arena.board.load import load
from arena.engine.board import BoardEngine
from arena.engine.league import LeagueSpec
from arena.journal.snapshots import SnapshotStore
from support.engines import Live, full_replay, on_a_journal, state
from support.journals import BackendKind, stored_property
from support.league_oracle import league_changes, league_spec, leagues, season_frames, window_starts
from support.oracle import Frame


def league_state(engine: BoardEngine) -> dict[str, Any]:
    """What the queries see of a league: each window's divisions (their standings, each
    member's division, who waits) and each member's carried tier."""
    league = engine.league
    assert league is not None
    windows = {}
    for key, at in league.windows.items():
        parts = engine.partitions.get(key, {})
        windows[key] = {
            "names": at.names(),
            "tables": {name: (t.digest(), len(t), t.closed_seq) for name, t in parts.items() if len(t)},
            "divisions": at.divisions,
            "firsts": at.firsts,
        }
    return {"windows": windows, "tiers": league.tiers}


@stored_property(25)
@given(leagues(), season_frames(), st.data())
def test_a_replay_and_a_snapshot_start_give_the_live_divisions_and_tiers(
    backend_kind: BackendKind, league: LeagueSpec, frames: list[Frame], data: st.DataObject
) -> None:
    spec = league_spec(league)
    cut = data.draw(st.integers(0, len(frames)), label="snapshot after frame")

    async def body(live: Live, snapshots: SnapshotStore) -> None:
        journal = live.journal
        taken_at = await live.snapshot_after(frames, cut, snapshots)
        follower = await full_replay(journal, spec, taken_at)  # a standby, which then follows the tail
        await live.play(frames[cut:])
        now = frames[-1].now
        await load(follower, journal, now, copy=True)
        replayed = await full_replay(journal, spec, now)
        started = BoardEngine(spec)
        await load(started, journal, now, snapshots=snapshots)
        expected = league_state(live.engine)
        assert league_state(replayed) == expected
        assert league_state(started) == expected
        assert league_state(follower) == expected
        assert state(started) == state(replayed)
        assert not replayed.unrecorded and not started.unrecorded  # the live closes' records were read

    on_a_journal(backend_kind, spec, data, body)


@stored_property(15)
@given(leagues(), season_frames(), st.data())
def test_parameters_changed_mid_season_give_the_live_divisions_after_a_replay_and_a_snapshot_start(
    backend_kind: BackendKind, league: LeagueSpec, frames: list[Frame], data: st.DataObject
) -> None:
    """Changes of size, promote and relegate journaled as definition records between the
    frames: a full replay and a start from a snapshot taken mid-season pin each window's
    parameters as the live engine did."""
    changes = data.draw(league_changes(league), label="changes")
    steps: list[tuple[int, int, Frame | LeagueSpec]] = [(f.now, 0, f) for f in sorted(window_starts() + frames, key=lambda f: f.now)]
    steps = sorted(steps + [(at, 1, change) for at, change in changes], key=lambda s: (s[0], s[1]))
    cut = data.draw(st.integers(0, len(steps)), label="snapshot after step")
    last = league_spec(changes[-1][1] if changes else league)

    async def body(live: Live, snapshots: SnapshotStore) -> None:
        await live.redefine(league_spec(league), steps[0][0])  # as the actor does at the board's first start

        async def run(part: list[tuple[int, int, Frame | LeagueSpec]]) -> None:
            for now, _, step in part:
                if isinstance(step, LeagueSpec):
                    await live.redefine(league_spec(step), now)
                else:
                    await live.play([step])

        await run(steps[:cut])
        taken_at = steps[cut - 1][0] if cut else steps[0][0]
        await live.snapshot(snapshots, taken_at)
        await run(steps[cut:])
        now = steps[-1][0]
        replayed = await full_replay(live.journal, last, now)
        started = BoardEngine(last)
        await load(started, live.journal, now, snapshots=snapshots)
        expected = league_state(live.engine)
        assert league_state(replayed) == expected
        assert league_state(started) == expected
        assert state(started) == state(replayed)

    on_a_journal(backend_kind, league_spec(league), data, body)

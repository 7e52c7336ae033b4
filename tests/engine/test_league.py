"""Leagues in the engine: the rule of a move, and a season of promotions and relegations over
several windows played live exactly as the oracle (`support.league_oracle`) says."""

from __future__ import annotations

import copy
from collections.abc import Generator

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.config import parse_board
from arena.engine.board import BoardEngine
from arena.engine.league import LeagueSpec, LeagueWindow
from arena.engine.periods import Calendar, PeriodKind
from arena.errors import ConfigError
from support.engine_harness import EngineHarness
from support.league_oracle import (
    BASE,
    GRACE,
    HOUR,
    WINDOWS,
    LeagueOracle,
    league_changes,
    league_spec,
    leagues,
    season_frames,
    window_index,
    window_starts,
)
from support.oracle import Frame, OEvent, Row, engine_rows

LEAGUE = LeagueSpec(size=3, tiers=("bronze", "silver", "gold"), promote=1, relegate=1)


def test_a_move_is_one_tier_in_a_division_of_more_than_promote_plus_relegate_clamped() -> None:
    assert [LEAGUE.moved(1, rank, 3) for rank in range(3)] == [2, 1, 0]
    assert [LEAGUE.moved(1, rank, 2) for rank in range(2)] == [1, 1]  # 2 is not more than 1 + 1
    assert [LEAGUE.moved(2, rank, 3) for rank in range(3)] == [2, 2, 1]
    assert [LEAGUE.moved(0, rank, 3) for rank in range(3)] == [1, 0, 0]


def test_a_window_knows_its_divisions_without_listing_them() -> None:
    at = LeagueWindow(Calendar("UTC").window_at(PeriodKind.DAILY, 0), None, 3)
    assert at.names() == () and not at.has("bronze-1")  # no division begun yet
    at.spec = LEAGUE
    at.joined = [7, 0, 3]  # size 3: bronze-1..3, gold-1
    names = at.names()
    assert names == ("bronze-1", "bronze-2", "bronze-3", "gold-1")
    for name in [*names, "bronze-4", "silver-1", "gold-2", "gold-01", "gold-0", "gold", "-1", "platinum-1", "gold-x"]:
        assert at.has(name) == (name in names), name


def test_the_config_names_a_league_on_a_board_of_one_season() -> None:
    spec = parse_board("b", {"periods": [], "custom_periods": {"season": {"every_hours": 24, "anchor": "2026-06-01T00:00:00Z"}},
                             "league": {"size": 30, "tiers": ["bronze", "silver"], "promote": 5, "relegate": 5}})
    assert spec.league == LeagueSpec(30, ("bronze", "silver"), 5, 5) and spec.season == "season"
    assert spec.document()["league"] == {"size": 30, "tiers": ["bronze", "silver"], "promote": 5, "relegate": 5}
    resized = parse_board("b", {**spec.document(), "league": {"size": 20, "tiers": ["bronze", "silver"]}})
    assert spec.fixed_changes(resized) == []  # size, promote and relegate apply from the next window
    retiered = parse_board("b", {**spec.document(), "league": {"size": 30, "tiers": ["bronze", "gold"], "promote": 5, "relegate": 5}})
    assert spec.fixed_changes(retiered) == ["league"]  # its tiers are fixed
    bad = [
        ({"periods": ["alltime", "daily", "weekly"], "league": {"size": 3, "tiers": ["a"]}}, "exactly one period"),
        ({"periods": ["daily"], "regions": ["eu"], "league": {"size": 3, "tiers": ["a"]}}, "regions or a league"),
        ({"periods": ["daily"], "league": {"size": 3, "tiers": ["A"]}}, "a tier name"),
        ({"periods": ["daily"], "league": {"size": 3, "tiers": ["a", "a"]}}, "twice"),
        ({"periods": ["daily"], "league": {"size": 1, "tiers": ["a"]}}, "size"),
        ({"periods": ["daily"], "league": {"size": 3, "tiers": ["a"], "extra": 1}}, "extra"),
    ]
    prized = parse_board("b", {"periods": ["daily"], "league": {"size": 3, "tiers": ["a", "b"]},
                               "prizes": {"daily": [{"reward": "x", "ranks": [1, 1], "tier": "b"}, {"reward": "y", "score": 5}]}})
    assert [t.as_json() for t in prized.prize_tiers("daily")] == [{"reward": "x", "ranks": [1, 1], "tier": "b"},
                                                                 {"reward": "y", "score": 5}]
    bad.append(({"periods": ["daily"], "league": {"size": 3, "tiers": ["a"]},
                 "prizes": {"daily": [{"reward": "x", "ranks": [1, 1], "tier": "z"}]}}, "not one of the league's tiers"))
    bad.append(({"periods": ["daily"], "prizes": {"daily": [{"reward": "x", "ranks": [1, 1], "tier": "z"}]}}, "has no league"))
    for table, message in bad:
        with pytest.raises(ConfigError, match=message):
            parse_board("b", table)


def played(league: LeagueSpec, frames: list[Frame]) -> tuple[EngineHarness, LeagueOracle]:
    harness = EngineHarness({"b": league_spec(league)})
    oracle = LeagueOracle(league)
    for frame in frames:
        if frame.tick:
            harness.tick("b", frame.now)
            oracle.submit([], frame.now)
            continue
        results = harness.submit("gs", [e.raw("b") for e in frame.events], frame.now)
        assert [r.status == "accepted" for r in results] == oracle.submit(list(frame.events), frame.now)
    return harness, oracle


def played_with_changes(league: LeagueSpec, frames: list[Frame],
                        changes: list[tuple[int, LeagueSpec]]) -> tuple[EngineHarness, LeagueOracle]:
    """``frames``, a deadline at each window's start, and ``changes`` of the league's
    parameters, in the order of their instants (a change after the frames of its instant)."""
    harness = EngineHarness({"b": league_spec(league)})
    oracle = LeagueOracle(league)
    steps: list[tuple[int, int, Frame | LeagueSpec]] = [(f.now, 0, f) for f in sorted(window_starts() + frames, key=lambda f: f.now)]
    steps += [(at, 1, change) for at, change in changes]
    for now, _, step in sorted(steps, key=lambda s: (s[0], s[1])):
        if isinstance(step, LeagueSpec):
            harness.redefine("b", league_spec(step), now)
            oracle.define(step, now)
        elif step.tick:
            harness.tick("b", now)
            oracle.submit([], now)
        else:
            results = harness.submit("gs", [e.raw("b") for e in step.events], now)
            assert [r.status == "accepted" for r in results] == oracle.submit(list(step.events), now)
    return harness, oracle


def divisions_of(engine: BoardEngine) -> tuple[dict[int, dict[str, list[Row]]], dict[int, dict[str, str]]]:
    """Each window's divisions as the engine ranks them, and each member's division."""
    standings: dict[int, dict[str, list[Row]]] = {}
    members: dict[int, dict[str, str]] = {}
    assert engine.league is not None
    for key, at in engine.league.windows.items():
        index = window_index(at.window.start_ms or 0)
        members[index] = dict(at.divisions)
        tables = engine.partitions.get(key, {})
        standings[index] = {name: engine_rows(tables[name]) for name in at.names()
                            if name in tables and len(tables[name])}
    return standings, members


@settings(max_examples=300, deadline=None)
@given(leagues(), season_frames())
def test_a_season_promotes_and_relegates_as_the_oracle_says(league: LeagueSpec, frames: list[Frame]) -> None:
    """Divisions fill in journal order (members of the grace at the close before, in the order
    of their first events), rank apart, and move tiers at each close, carried to the next
    window each member plays, over several windows."""
    harness, oracle = played(league, frames)
    engine = harness.engines["b"]
    standings, divisions, tiers = oracle.season()
    got_standings, got_divisions = divisions_of(engine)
    want_divisions = {i: d for i, d in divisions.items() if d}
    assert {i: d for i, d in got_divisions.items() if d} == want_divisions
    assert {i: s for i, s in got_standings.items() if s} == {i: s for i, s in standings.items() if s}
    assert engine.league is not None and engine.league.tiers == tiers
    assert not engine.unrecorded  # every close's moves journaled
    for index in range(WINDOWS):
        window = engine.schedule.window_at("season", BASE + index * HOUR)
        for member, division in divisions.get(index, {}).items():
            assert engine.division(window, member) == division


@settings(max_examples=300, deadline=None)
@given(st.data(), leagues(), season_frames())
def test_a_change_of_size_promote_or_relegate_applies_from_the_next_window(
    data: st.DataObject, league: LeagueSpec, frames: list[Frame]
) -> None:
    """A window fills its divisions and moves its members with the parameters in force when its
    divisions began (the close marker before it; the season's first window: its first event),
    whatever changes during it."""
    changes = data.draw(league_changes(league), label="changes")
    harness, oracle = played_with_changes(league, frames, changes)
    engine = harness.engines["b"]
    standings, divisions, tiers = oracle.season()
    got_standings, got_divisions = divisions_of(engine)
    assert {i: d for i, d in got_divisions.items() if d} == {i: d for i, d in divisions.items() if d}
    assert {i: s for i, s in got_standings.items() if s} == {i: s for i, s in standings.items() if s}
    assert engine.league is not None and engine.league.tiers == tiers
    assert not engine.unrecorded


@settings(max_examples=300, deadline=None)
@given(st.data(), leagues(), season_frames())
def test_an_image_made_in_pieces_is_the_league_as_of_its_start(
    data: st.DataObject, league: LeagueSpec, frames: list[Frame]
) -> None:
    """Frames played between the pieces of a league's image (members joining, waiting, closes
    moving tiers) leave it what it was when it began: the image of a copy taken then."""
    cut = data.draw(st.integers(0, len(frames)), label="image after frame")
    harness, _ = played(league, frames[:cut])
    playing = harness.engines["b"].league
    assert playing is not None
    want = made(copy.deepcopy(playing).image(piece=2))
    steps = playing.image(piece=2)
    got: list[bytes] | None = None
    for frame in frames[cut:]:
        if got is None and data.draw(st.booleans(), label="a piece before the frame"):
            try:
                next(steps)
            except StopIteration as done:
                got = done.value
        if frame.tick:
            harness.tick("b", frame.now)
        else:
            harness.submit("gs", [e.raw("b") for e in frame.events], frame.now)
    assert same(made(steps) if got is None else got, want)


def test_an_image_leaves_out_the_tiers_moved_and_the_members_joined_at_a_close_while_it_is_made() -> None:
    """Window 0 closed (tiers moved), window 1 played, two members playing window 2 in window
    1's grace wait: an image begins, and window 1's close (their join, new tiers) comes between
    its pieces."""
    harness = EngineHarness({"b": league_spec(LEAGUE)})
    first = [OEvent(m, v, BASE + 1000, f"w0-{m}") for v, m in enumerate("abcdef")]
    second = [OEvent(m, 6 - v, BASE + HOUR + GRACE + 2, f"w1-{m}") for v, m in enumerate("abcdef")]
    harness.submit("gs", [e.raw("b") for e in first], BASE + 1000)
    harness.tick("b", BASE + HOUR + GRACE + 1)
    harness.submit("gs", [e.raw("b") for e in second], BASE + HOUR + GRACE + 2)
    harness.submit("gs", [OEvent(m, 1, BASE + 2 * HOUR + 1, f"w2-{m}").raw("b") for m in "ab"], BASE + 2 * HOUR + 1)
    playing = harness.engines["b"].league
    assert playing is not None and playing.tiers and not playing.windows[("season", "2026-06-01T02Z")].divisions
    want = made(copy.deepcopy(playing).image(piece=2))
    steps = playing.image(piece=2)
    next(steps)  # a third of the tiers read
    harness.tick("b", BASE + 2 * HOUR + GRACE + 1)
    assert playing.windows[("season", "2026-06-01T02Z")].divisions  # a and b joined
    assert same(made(steps), want)


def same(image: list[bytes], other: list[bytes]) -> bool:
    """Whether two images' texts say the same (and are JSON)."""
    return bool(orjson.loads(b"".join(image)) == orjson.loads(b"".join(other)))


def made(steps: Generator[None, None, list[bytes]]) -> list[bytes]:
    """What a league image's ``steps`` make, run to their end."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            image: list[bytes] = done.value
            return image


def test_a_change_just_after_a_close_leaves_the_next_window_its_parameters() -> None:
    """Size 4 shrunk to 2 just after window 0's close marker, before anyone plays window 1:
    window 1's divisions began at that marker, so they fill by 4; window 2's by 2."""
    league = LeagueSpec(4, ("bronze", "silver", "gold"), 1, 1)
    close = BASE + HOUR + GRACE
    frames = [Frame(BASE + 10, tuple(OEvent(m, 1, BASE + 10, f"a{m}") for m in "ab")),
              Frame(close + 100, tuple(OEvent(m, 1, close + 100, f"b{m}") for m in "abcdefg")),
              Frame(close + HOUR + 100, tuple(OEvent(m, 1, close + HOUR + 100, f"c{m}") for m in "hijk"))]
    harness, oracle = played_with_changes(league, frames, [(close + 1, LeagueSpec(2, league.tiers, 0, 0))])
    _standings, divisions, _tiers = oracle.season()
    assert divisions[1] == {**dict.fromkeys("abcd", "bronze-1"), **dict.fromkeys("efg", "bronze-2")}
    assert divisions[2] == {"h": "bronze-1", "i": "bronze-1", "j": "bronze-2", "k": "bronze-2"}
    assert divisions_of(harness.engines["b"])[1] == divisions

"""A board's life on a node (`arena.board.state`): every move of its one table, a typed error that
leaves the state unchanged on any other, random event sequences against the table, and the map's
answers to the edges (who answers for a board, readiness) without an event loop."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.board.state import MOVES, BoardEvent, BoardState, BoardStates, IllegalBoardMove, Owner
from arena.errors import ArenaError

S, E = BoardState, BoardEvent

LEGAL = [(state, event, to) for state, moves in MOVES.items() for event, to in moves.items()]
ILLEGAL = [(state, event) for state in BoardState for event in BoardEvent if event not in MOVES[state]]


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def at(state: BoardState, clustered: bool = True) -> BoardStates:
    """A map of one board "b" forced into ``state`` along the table's own moves."""
    paths = {
        S.ELSEWHERE: [], S.FOLLOWING: [E.FOLLOW], S.TAKING: [E.TAKE], S.LOADING: [E.TAKE, E.GRANTED],
        S.SERVING: [E.TAKE, E.GRANTED, E.LOADED], S.HANDING_OFF: [E.TAKE, E.GRANTED, E.HAND_OFF],
        S.DISOWNING: [E.TAKE, E.GRANTED, E.DISOWN], S.RELEASING: [E.RELEASE], S.FAILED: [E.TAKE, E.GRANTED, E.FAIL],
    }
    on_demand = {S.INACTIVE: [], S.ACTIVATING: [E.ACTIVATE], S.UNLOADING: [E.ACTIVATE, E.LOADED, E.UNLOAD]}
    if state in on_demand:  # the states of a single node that activates its boards on demand
        states = BoardStates(["b"], on_demand=True)
        for event in on_demand[state]:
            states.move("b", event)
        return states
    states = BoardStates(["b"], node_id="n1" if clustered else None)
    for event in paths[state]:
        states.move("b", event)
    assert states.state("b") is state
    return states


def test_every_state_is_reached_and_has_a_row() -> None:
    assert set(MOVES) == set(BoardState)
    assert {to for _, _, to in LEGAL} | {S.ELSEWHERE} == set(BoardState)


@pytest.mark.parametrize(("state", "event", "to"), LEGAL, ids=lambda v: getattr(v, "name", v))
def test_each_legal_move(state: BoardState, event: BoardEvent, to: BoardState) -> None:
    states = at(state)
    assert states.can("b", event)
    states.check("b", event)
    assert states.move("b", event) is to and states.state("b") is to


@pytest.mark.parametrize(("state", "event"), ILLEGAL, ids=lambda v: getattr(v, "name", v))
def test_an_illegal_move_raises_and_leaves_the_state(state: BoardState, event: BoardEvent) -> None:
    states = at(state)
    assert not states.can("b", event)
    for attempt in (states.check, states.move):
        with pytest.raises(IllegalBoardMove) as raised:
            attempt("b", event)
        assert (raised.value.board, raised.value.state, raised.value.event) == ("b", state, event)
        assert isinstance(raised.value, ArenaError)
        assert states.state("b") is state


@given(st.lists(st.sampled_from(list(BoardEvent)), max_size=30), st.booleans())
def test_random_events_move_exactly_as_the_table_says(events: list[BoardEvent], clustered: bool) -> None:
    states = BoardStates(["b", "other"], node_id="n1" if clustered else None)
    state = S.ELSEWHERE if clustered else S.LOADING
    assert states.state("b") is state
    for event in events:
        to = MOVES[state].get(event)
        if to is None:
            with pytest.raises(IllegalBoardMove):
                states.move("b", event)
        else:
            assert states.move("b", event) is to
            state = to
        assert states.state("b") is state
        assert states.state("other") is (S.ELSEWHERE if clustered else S.LOADING)  # one board's moves only
        assert states.boards(state) >= {"b"}
        assert states.ready is (state not in (S.LOADING, S.FAILED) and clustered)


def test_a_single_node_starts_loading_and_answers_for_every_board_itself() -> None:
    states = BoardStates(["a", "b"])
    assert list(states) == ["a", "b"] and states.boards(S.LOADING) == {"a", "b"}
    assert not states.ready and states.local("a") and states.lease_fresh and states.answering("a")
    states.move("a", E.LOADED)
    states.move("b", E.LOADED)
    assert states.ready and [states.shown(b) for b in states] == ["ready", "ready"]
    states.move("b", E.FAIL)
    assert not states.ready and not states.answering("b") and states.shown("b") == "failed"
    assert (states.readiness("a"), states.readiness("b")) == (1, -1)


def test_a_cluster_node_answers_only_for_what_it_serves_and_owns_while_its_lease_is_fresh() -> None:
    ticks = Ticks()
    states = BoardStates(["x", "y"], node_id="a", lease_seconds=3, monotonic=ticks)
    assert states.ready and [states.shown(b) for b in states] == ["elsewhere", "elsewhere"]
    mine, theirs = Owner("a", "http://a", 1), Owner("b", "http://b", 2)
    assert states.seen("x", mine) and states.seen("y", theirs) and not states.seen("y", theirs)
    for event in (E.TAKE, E.GRANTED):
        states.move("x", event)
    assert not states.local("x") and states.owner_of("x") is None  # never renewed yet
    states.renewed(ticks.now)
    assert states.local("x") and states.answering("x") and states.owner_of("x") == mine
    assert not states.local("y") and not states.answering("y") and states.owner_of("y") == theirs
    ticks.now += 3
    assert not states.answering("x") and states.owner_of("x") is None
    assert states.owner_of("y") == theirs  # another node's lease is judged by the database's clock
    states.renewed(ticks.now)
    states.move("x", E.HAND_OFF)
    assert states.local("x") and not states.answering("x")  # its actor takes nothing new


def test_a_board_handed_off_is_handed_over_until_its_next_owner_serves_it() -> None:
    """What queries wait for (`arena.api.routing.settled`): a hand-off, from the release until
    the next owner has loaded the board; never a board whose owner's lease expired."""
    states = BoardStates(["x"], node_id="a", lease_seconds=3)
    mine, theirs = Owner("a", "http://a", 2), Owner("b", "http://b", 2)
    assert not states.handed_over("x")
    states.seen("x", None, released=True)  # released by its owner, not taken yet
    assert states.handed_over("x") and states.owner_of("x") is None
    states.seen("x", theirs)  # taken by another node: it serves it
    assert not states.handed_over("x")
    states.seen("x", None, released=True)
    for event in (E.TAKE, E.GRANTED):
        states.move("x", event)
    states.seen("x", mine)  # taken here, its tables still loading
    assert states.handed_over("x")
    states.move("x", E.LOADED)
    assert not states.handed_over("x")
    states.seen("x", None, released=True)
    states.seen("x", None)  # ownerless: its owner's lease expired
    assert not states.handed_over("x")


def test_the_epochs_granted_to_this_process() -> None:
    states = BoardStates(["x"], node_id="a")
    states.granted("x", 3)
    assert states.epoch("x") == 3 and states.epochs == {"x": 3}
    assert states.ungranted("x") == 3 and states.ungranted("x") is None and states.epochs == {}


def test_the_boards_moved_since_an_instant() -> None:
    """What a beat leaves to the next: a read of the owner rows begun before a move may be stale
    about that board."""
    ticks = Ticks()
    states = BoardStates(["x", "y"], node_id="a", monotonic=ticks)
    states.move("x", E.TAKE)
    ticks.now += 1
    read_began = ticks.now
    assert states.moved_since(read_began) == set()
    states.move("x", E.NOT_GRANTED)
    assert states.moved_since(read_began) == {"x"}
    ticks.now += 1
    assert states.moved_since(ticks.now) == set()


def test_a_node_activating_on_demand_starts_inactive_and_ready() -> None:
    """With idle_unload_seconds > 0 a start loads nothing: every board is INACTIVE, /readyz does
    not wait for them, and a board goes inactive -> activating -> serving -> unloading -> inactive."""
    states = BoardStates(["a", "b"], on_demand=True)
    assert states.boards(S.INACTIVE) == {"a", "b"} and states.ready
    assert states.answering("a") and not states.active("a") and states.shown("a") == "inactive"
    states.move("a", E.ACTIVATE)
    assert states.active("a") and states.shown("a") == "activating" and states.ready
    states.move("a", E.START)
    states.move("a", E.LOADED)
    assert states.state("a") is S.SERVING and states.readiness("a") == 1
    states.move("a", E.UNLOAD)
    assert not states.active("a") and states.shown("a") == "unloading"
    assert states.move("a", E.STOPPED) is S.INACTIVE and states.readiness("a") == 1  # answers on demand
    assert BoardStates(["a"], node_id="n1", on_demand=True).state("a") is S.ELSEWHERE  # a cluster node does not


def test_a_cluster_node_activating_on_demand_owns_boards_without_loading_them() -> None:
    """A take without a standby copy ends INACTIVE (a hand-off to it is over then); an inactive
    owned board is activated, handed off or disowned without loading it; `active` of a board
    served elsewhere is what its owner wrote."""
    states = BoardStates(["a", "b", "c"], node_id="n1", lease_seconds=3.0, on_demand=True)
    states.renewed(states.monotonic())
    states.seen("a", None, released=True)
    states.move("a", E.TAKE)
    assert states.handed_over("a")
    assert states.move("a", E.GRANTED_INACTIVE) is S.INACTIVE and not states.handed_over("a")
    states.seen("a", Owner("n1", "http://n1", 2, active=False))
    assert states.answering("a") and not states.active("a") and states.ready
    assert states.move("a", E.HAND_OFF) is S.HANDING_OFF and states.move("a", E.STOPPED) is S.ELSEWHERE
    for event in (E.TAKE, E.GRANTED_INACTIVE, E.ACTIVATE, E.DISOWN, E.STOPPED):
        states.move("b", event)
    assert states.state("b") is S.ELSEWHERE  # disowned while being activated
    states.seen("c", Owner("n2", "http://n2", 1, active=True))
    assert states.active("c") and states.shown("c") == "elsewhere"
    states.seen("c", Owner("n2", "http://n2", 1, active=False))
    assert not states.active("c")

"""A node's own life (`arena.cluster.node`): the moves of its one table, and a typed error that
leaves the state unchanged on any other."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.cluster.node import MOVES, IllegalMove, NodeLife, NodeState


def test_a_node_starts_joins_serves_and_leaves() -> None:
    life = NodeLife()
    assert life.state is NodeState.STARTING
    for state in (NodeState.JOINING, NodeState.SERVING, NodeState.JOINING, NodeState.SERVING, NodeState.LEAVING):
        life.move(state)
        assert life.state is state


def test_leaving_is_for_good() -> None:
    life = NodeLife()
    life.move(NodeState.LEAVING)
    for state in NodeState:
        with pytest.raises(IllegalMove):
            life.move(state)
    assert life.state is NodeState.LEAVING


@given(st.lists(st.sampled_from(list(NodeState)), max_size=12))
def test_only_the_moves_of_the_table_are_made_and_an_illegal_one_changes_nothing(moves: list[NodeState]) -> None:
    life = NodeLife()
    for to in moves:
        before = life.state
        if to in MOVES[before]:
            life.move(to)
            assert life.state is to
        else:
            with pytest.raises(IllegalMove) as raised:
                life.move(to)
            assert (life.state, raised.value.state, raised.value.to) == (before, before, to)


def test_what_a_lease_row_stores_is_a_state_of_the_enum() -> None:
    assert {s.value for s in NodeState} - {"starting"} == {"joining", "serving", "leaving"}
    assert NodeState.STARTING not in {to for moves in MOVES.values() for to in moves}  # never stored, never again

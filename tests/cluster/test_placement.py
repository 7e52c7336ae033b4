"""Rendezvous placement against its definition, and the properties the cluster relies on."""

from hypothesis import given
from hypothesis import strategies as st

from arena.cluster.placement import placement, preference, weight

boards = st.text(min_size=1, max_size=12)
node_sets = st.sets(st.text(min_size=1, max_size=8), min_size=1, max_size=8)


@given(boards, node_sets)
def test_the_owner_is_the_node_of_highest_weight(board: str, nodes: set[str]) -> None:
    owner, _ = placement(board, nodes, 0)
    assert owner == max(sorted(nodes), key=lambda n: weight(board, n))  # first of the heaviest: lowest id


@given(boards, node_sets, st.integers(0, 10))
def test_standbys_follow_the_owner_in_preference_order(board: str, nodes: set[str], standbys: int) -> None:
    owner, following = placement(board, nodes, standbys)
    order = preference(board, nodes)
    assert sorted(order) == sorted(nodes)
    assert [owner, *following] == order[: 1 + standbys]
    assert owner not in following


@given(boards, node_sets, st.data())
def test_a_node_leaving_moves_only_what_it_held(board: str, nodes: set[str], data: st.DataObject) -> None:
    gone = data.draw(st.sampled_from(sorted(nodes)))
    before = preference(board, nodes)
    after = preference(board, nodes - {gone})
    assert after == [n for n in before if n != gone]


@given(boards, node_sets, st.text(min_size=1, max_size=8))
def test_a_node_joining_takes_a_board_only_from_its_owner(board: str, nodes: set[str], new: str) -> None:
    before, _ = placement(board, nodes, 0)
    after, _ = placement(board, nodes | {new}, 0)
    assert after in (before, new)


def test_every_process_agrees() -> None:
    # fixed values: a change of hash would move every board of a running cluster on upgrade
    assert weight("global", "node-a") == 9863477878460803238
    assert preference("global", ["node-a", "node-b", "node-c"]) == ["node-c", "node-a", "node-b"]
    assert preference("weekly", ["node-b", "node-a", "node-c"]) == ["node-c", "node-b", "node-a"]
    assert placement("global", [], 1) == (None, [])

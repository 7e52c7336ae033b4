"""Rendezvous placement against its definition, and the properties the cluster relies on; and
`GET /v1/cluster`'s view of it (`arena.cluster.membership.view`), without a database."""

from hypothesis import given
from hypothesis import strategies as st

from arena.cluster.membership import ClusterRead, NodeRow, OwnerRow, view
from arena.cluster.node import NodeState
from arena.cluster.placement import Placement, agreeing, placements, preference, weight

boards = st.text(min_size=1, max_size=12)
node_sets = st.sets(st.text(min_size=1, max_size=8), min_size=1, max_size=8)


@given(boards, node_sets)
def test_the_owner_is_the_node_of_highest_weight(board: str, nodes: set[str]) -> None:
    owner = placements([board], nodes, 0)[board].owner
    assert owner == max(sorted(nodes), key=lambda n: weight(board, n))  # first of the heaviest: lowest id


@given(boards, node_sets, st.integers(0, 10))
def test_standbys_follow_the_owner_in_preference_order(board: str, nodes: set[str], standbys: int) -> None:
    place = placements([board], nodes, standbys)[board]
    order = preference(board, nodes)
    assert sorted(order) == sorted(nodes)
    assert [place.owner, *place.standbys] == order[: 1 + standbys]
    assert place.owner not in place.standbys


@given(boards, node_sets, st.data())
def test_a_node_leaving_moves_only_what_it_held(board: str, nodes: set[str], data: st.DataObject) -> None:
    gone = data.draw(st.sampled_from(sorted(nodes)))
    before = preference(board, nodes)
    after = preference(board, nodes - {gone})
    assert after == [n for n in before if n != gone]


@given(boards, node_sets, st.text(min_size=1, max_size=8))
def test_a_node_joining_takes_a_board_only_from_its_owner(board: str, nodes: set[str], new: str) -> None:
    before = placements([board], nodes, 0)[board].owner
    after = placements([board], nodes | {new}, 0)[board].owner
    assert after in (before, new)


def test_every_process_agrees() -> None:
    # fixed values: a change of hash would move every board of a running cluster on upgrade
    assert weight("global", "node-a") == 9863477878460803238
    assert preference("global", ["node-a", "node-b", "node-c"]) == ["node-c", "node-a", "node-b"]
    assert preference("weekly", ["node-b", "node-a", "node-c"]) == ["node-c", "node-b", "node-a"]
    assert placements(["global"], [], 1) == {"global": Placement(None, ())}


def test_the_cluster_view_names_the_placements_standbys_while_a_board_is_ownerless() -> None:
    """The next owner of a board whose owner died is not listed among its standbys: those are
    the ones the ownership loop has follow it (`placements`)."""
    nodes = {n: NodeRow(n, f"i{n}", f"http://{n}", n != "node-c", -2.0 if n != "node-c" else 1.0, NodeState.SERVING)
             for n in ("node-a", "node-b", "node-c", "node-d")}
    dead_owner = "node-c"
    board = next(f"b{i}" for i in range(100) if preference(f"b{i}", nodes)[0] == dead_owner)
    read = ClusterRead(nodes, {board: OwnerRow(dead_owner, "inode-c", 3)})
    order = preference(board, ["node-a", "node-b", "node-d"])
    shown = view("node-a", read, [board], 1)["boards"][board]
    assert shown == {"owner": None, "epoch": 3, "standbys": order[1:2], "active": False}
    taken = ClusterRead(nodes, {board: OwnerRow(order[0], f"i{order[0]}", 4)})
    assert view("node-a", taken, [board], 2)["boards"][board] == {
        "owner": order[0], "epoch": 4, "standbys": order[1:3], "active": True}
    idle = ClusterRead(nodes, {board: OwnerRow(order[0], f"i{order[0]}", 4, active=False)})
    assert view("node-a", idle, [board], 2)["boards"][board]["active"] is False


def test_a_board_the_live_nodes_define_differently_is_placed_over_those_defining_it_as_most_do() -> None:
    nodes = ["a", "b", "c"]
    alike = {"a": {"fixed": "x"}, "b": {"fixed": "x"}, "c": {"fixed": "x"}}
    assert agreeing("fixed", nodes, alike) == {"a", "b", "c"}
    assert agreeing("api-board", nodes, alike) == {"a", "b", "c"}  # declared by no config
    assert agreeing("fixed", nodes, {**alike, "c": {"fixed": "y"}}) == {"a", "b"}
    assert agreeing("fixed", nodes, {**alike, "a": {"fixed": "y"}, "b": {}}) == {"a"}  # a tie: the lowest node id's
    assert agreeing("fixed", nodes, {"a": {"fixed": "x"}, "b": {"fixed": "y"}}) == {"a", "c"}  # c has not recorded its config yet
    place = placements(["fixed"], nodes, 2, {**alike, "b": {"fixed": "y"}})["fixed"]
    assert "b" not in (place.owner, *place.standbys) and len(place.standbys) == 1
    assert agreeing("only-b", nodes, {**alike, "b": {"only-b": "z"}}) == {"b"}  # the others do not know it

"""What a node does after one read of the leases and owner rows (`arena.cluster.ownership.plan`),
without a database: it takes the boards placed on it that no live process owns, disowns the ones
granted to another epoch, hands off the ones placed on another live node, and releases the rows
still naming it for boards it no longer serves."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from arena.cluster.directory import Owner
from arena.cluster.membership import ClusterRead, NodeRow, OwnerRow
from arena.cluster.ownership import plan
from arena.cluster.placement import preference

NODES = {n: NodeRow(n, f"i{n}", f"http://{n}", True, -2.0, "serving") for n in "abc"}
BOARDS = [f"board-{i}" for i in range(40)]


def dead(node: str, for_seconds: float) -> NodeRow:
    return NodeRow(node, f"i{node}", f"http://{node}", False, for_seconds, "serving")


def placed_on(node: str, nodes: list[str]) -> list[str]:
    return [b for b in BOARDS if preference(b, nodes)[0] == node]


def test_a_node_takes_exactly_the_ownerless_boards_placed_on_it() -> None:
    read = ClusterRead(dict(NODES), {})
    todo = plan("a", "ia", read, BOARDS, {}, set(), set())
    assert todo.take == placed_on("a", list(NODES))
    assert (todo.disown, todo.hand_off, todo.release) == ([], [], [])


def test_a_board_whose_owner_is_live_is_not_taken_even_when_placed_here() -> None:
    mine = placed_on("a", list(NODES))
    read = ClusterRead(dict(NODES), {b: OwnerRow("b", "ib", 4) for b in mine})
    assert plan("a", "ia", read, BOARDS, {}, set(), set()).take == []


def test_a_board_of_a_dead_owner_or_of_a_dead_instance_is_taken() -> None:
    nodes = {"a": NODES["a"], "b": NODES["b"], "c": dead("c", 1.5)}
    mine = placed_on("a", ["a", "b"])
    owners = {b: OwnerRow("c", "ic", 2) if i % 2 else OwnerRow("b", "ib-before-restart", 2) for i, b in enumerate(mine)}
    read = ClusterRead(nodes, owners)
    assert plan("a", "ia", read, BOARDS, {}, set(), set()).take == mine
    assert {read.ownerless_for(b) for b in mine} == {1.5, 0.0}


def test_a_served_board_granted_to_another_epoch_is_disowned() -> None:
    board = placed_on("a", list(NODES))[0]
    read = ClusterRead(dict(NODES), {board: OwnerRow("b", "ib", 8)})
    todo = plan("a", "ia", read, BOARDS, {board: 7}, {board}, set())
    assert todo.disown == [board] and board not in todo.take
    fenced = plan("a", "ia", ClusterRead(dict(NODES), {board: OwnerRow("a", "ia", 7)}), BOARDS, {}, {board}, set())
    assert fenced.disown == [board]  # an append found it granted again: no longer in `owned`


def test_a_served_board_placed_on_a_joining_node_is_handed_off() -> None:
    before = placed_on("a", ["a", "b"])
    owners = {b: OwnerRow("a", "ia", 1) for b in before}
    read = ClusterRead(dict(NODES), owners)
    todo = plan("a", "ia", read, BOARDS, dict.fromkeys(before, 1), set(before), set())
    assert todo.hand_off == [b for b in before if preference(b, list(NODES))[0] == "c"]
    assert todo.disown == []


def test_a_joining_node_is_handed_no_board_until_it_serves_but_takes_the_ownerless_ones() -> None:
    """A node started (`NodeRow.state` joining) follows the boards placed on it while their
    owners keep them; the ownerless ones (a cluster's first start) it takes at once."""
    joining = {**NODES, "c": NodeRow("c", "ic", "http://c", True, -2.0, "joining")}
    before = placed_on("a", ["a", "b"])
    owners = {b: OwnerRow("a", "ia", 1) for b in before}
    todo = plan("a", "ia", ClusterRead(joining, owners), BOARDS, dict.fromkeys(before, 1), set(before), set())
    assert todo.hand_off == [] and todo.disown == []
    assert plan("c", "ic", ClusterRead(joining, {}), BOARDS, {}, set(), set()).take == placed_on("c", list(NODES))


def test_a_row_left_naming_this_node_for_a_board_placed_elsewhere_is_released() -> None:
    board = placed_on("b", list(NODES))[0]
    read = ClusterRead(dict(NODES), {board: OwnerRow("a", "ia", 3)})
    assert plan("a", "ia", read, BOARDS, {}, set(), set()).release == [(board, 3)]


def test_a_leaving_node_is_placed_nowhere_and_its_released_boards_go_to_the_next_node_for_good() -> None:
    """A node handing its boards off (SIGTERM) still holds its lease: placed over the nodes that
    stay, its released boards are taken by their next node, which keeps them (no second hop
    back to the leaving node, no board left waiting for its lease to end)."""
    nodes = {**NODES, "a": NodeRow("a", "ia", "http://a", True, -2.0, "leaving")}
    mine = placed_on("a", list(NODES))
    released = ClusterRead(nodes, {b: OwnerRow("a", "", 5) for b in mine})
    taken = {n: plan(n, f"i{n}", released, mine, {}, set(), set()).take for n in "bc"}
    assert sorted(taken["b"] + taken["c"]) == sorted(mine)
    assert all(preference(b, ["b", "c"])[0] == n for n, boards in taken.items() for b in boards)
    granted = ClusterRead(nodes, {b: OwnerRow(n, f"i{n}", 6) for n, boards in taken.items() for b in boards})
    for n, boards in taken.items():
        assert plan(n, f"i{n}", granted, mine, dict.fromkeys(boards, 6), set(boards), set()).hand_off == []


def test_busy_boards_are_left_alone() -> None:
    read = ClusterRead(dict(NODES), {})
    assert plan("a", "ia", read, BOARDS, {}, set(), set(BOARDS)).take == []


@given(st.sets(st.sampled_from(sorted(NODES)), min_size=1), st.dictionaries(
    st.sampled_from(BOARDS), st.tuples(st.sampled_from(sorted(NODES)), st.booleans(), st.integers(1, 9))))
def test_no_two_nodes_take_one_board_and_none_takes_a_board_with_a_live_owner(
        alive: set[str], rows: dict[str, tuple[str, bool, int]]) -> None:
    nodes = {n: NODES[n] if n in alive else dead(n, 1.0) for n in NODES}
    owners = {b: OwnerRow(n, f"i{n}" if same else "gone", e) for b, (n, same, e) in rows.items()}
    read = ClusterRead(nodes, owners)
    taken: dict[str, list[str]] = {}
    for node in alive:
        for board in plan(node, f"i{node}", read, BOARDS, {}, set(), set()).take:
            taken.setdefault(board, []).append(node)
    for board, takers in taken.items():
        assert len(takers) == 1
        owner = read.owner(board)
        assert owner is None or owner == Owner(takers[0], f"http://{takers[0]}", owners[board].epoch)

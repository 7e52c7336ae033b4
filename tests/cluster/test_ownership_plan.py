"""What a node does after one read of the leases and owner rows (`arena.cluster.ownership.plan`),
without a database: it takes the boards placed on it that no live process owns, disowns the ones
granted to another epoch, hands off the ones placed on another live node, and releases the rows
still naming it for boards it no longer serves."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from arena.cluster.directory import Owner
from arena.cluster.ownership import ClusterRead, OwnerRow, plan
from arena.cluster.placement import preference

NODES = {"a": ("ia", "http://a"), "b": ("ib", "http://b"), "c": ("ic", "http://c")}
BOARDS = [f"board-{i}" for i in range(40)]


def placed_on(node: str, nodes: list[str]) -> list[str]:
    return [b for b in BOARDS if preference(b, nodes)[0] == node]


def test_a_node_takes_exactly_the_ownerless_boards_placed_on_it() -> None:
    read = ClusterRead(live=dict(NODES), owners={})
    todo = plan("a", "ia", read, BOARDS, {}, set(), set())
    assert todo.take == placed_on("a", list(NODES))
    assert (todo.disown, todo.hand_off, todo.release) == ([], [], [])


def test_a_board_whose_owner_is_live_is_not_taken_even_when_placed_here() -> None:
    mine = placed_on("a", list(NODES))
    read = ClusterRead(live=dict(NODES), owners={b: OwnerRow("b", "ib", 4) for b in mine})
    assert plan("a", "ia", read, BOARDS, {}, set(), set()).take == []


def test_a_board_of_a_dead_owner_or_of_a_dead_instance_is_taken() -> None:
    live = {"a": NODES["a"], "b": NODES["b"]}
    mine = placed_on("a", list(live))
    owners = {b: OwnerRow("c", "ic", 2) if i % 2 else OwnerRow("b", "ib-before-restart", 2) for i, b in enumerate(mine)}
    read = ClusterRead(live=live, owners=owners, expired_for={"c": 1.5})
    assert plan("a", "ia", read, BOARDS, {}, set(), set()).take == mine
    assert {read.ownerless_for(b) for b in mine} == {1.5, 0.0}


def test_a_served_board_granted_to_another_epoch_is_disowned() -> None:
    board = placed_on("a", list(NODES))[0]
    read = ClusterRead(live=dict(NODES), owners={board: OwnerRow("b", "ib", 8)})
    todo = plan("a", "ia", read, BOARDS, {board: 7}, {board}, set())
    assert todo.disown == [board] and board not in todo.take
    fenced = plan("a", "ia", ClusterRead(live=dict(NODES), owners={board: OwnerRow("a", "ia", 7)}), BOARDS, {}, {board}, set())
    assert fenced.disown == [board]  # an append found it granted again: no longer in `owned`


def test_a_served_board_placed_on_a_joining_node_is_handed_off() -> None:
    before = placed_on("a", ["a", "b"])
    owners = {b: OwnerRow("a", "ia", 1) for b in before}
    read = ClusterRead(live=dict(NODES), owners=owners)
    todo = plan("a", "ia", read, BOARDS, dict.fromkeys(before, 1), set(before), set())
    assert todo.hand_off == [b for b in before if preference(b, list(NODES))[0] == "c"]
    assert todo.disown == []


def test_a_row_left_naming_this_node_for_a_board_placed_elsewhere_is_released() -> None:
    board = placed_on("b", list(NODES))[0]
    read = ClusterRead(live=dict(NODES), owners={board: OwnerRow("a", "ia", 3)})
    assert plan("a", "ia", read, BOARDS, {}, set(), set()).release == [(board, 3)]


def test_busy_boards_are_left_alone() -> None:
    read = ClusterRead(live=dict(NODES), owners={})
    assert plan("a", "ia", read, BOARDS, {}, set(), set(BOARDS)).take == []


@given(st.sets(st.sampled_from(sorted(NODES)), min_size=1), st.dictionaries(
    st.sampled_from(BOARDS), st.tuples(st.sampled_from(sorted(NODES)), st.booleans(), st.integers(1, 9))))
def test_no_two_nodes_take_one_board_and_none_takes_a_board_with_a_live_owner(
        alive: set[str], rows: dict[str, tuple[str, bool, int]]) -> None:
    live = {n: NODES[n] for n in alive}
    owners = {b: OwnerRow(n, NODES[n][0] if same else "gone", e) for b, (n, same, e) in rows.items()}
    read = ClusterRead(live=live, owners=owners)
    taken: dict[str, list[str]] = {}
    for node in alive:
        for board in plan(node, NODES[node][0], read, BOARDS, {}, set(), set()).take:
            taken.setdefault(board, []).append(node)
    for board, nodes in taken.items():
        assert len(nodes) == 1
        owner = read.owner(board)
        assert owner is None or owner == Owner(nodes[0], NODES[nodes[0]][1], owners[board].epoch)

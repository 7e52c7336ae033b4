"""What a node does after one read of the leases and owner rows (`arena.cluster.plan.plan`),
without a database: it takes the boards placed on it that no live process owns, disowns the ones
granted to another epoch, hands off the ones placed on another live node, releases the rows
still naming it for boards it no longer serves, follows the boards it stands by for (and those
coming to it), and, joining, serves once it has caught up with them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from arena.cluster.directory import Owner
from arena.cluster.membership import ClusterRead, NodeRow, OwnerRow, activity_changes
from arena.cluster.node import NodeState
from arena.cluster.placement import placements, preference
from arena.cluster.plan import JOIN_LIMIT_SECONDS, Held, Plan, plan

NODES = {n: NodeRow(n, f"i{n}", f"http://{n}", True, -2.0, NodeState.SERVING) for n in "abc"}
BOARDS = [f"board-{i}" for i in range(40)]


def dead(node: str, for_seconds: float) -> NodeRow:
    return NodeRow(node, f"i{node}", f"http://{node}", False, for_seconds, NodeState.SERVING)


def plan_for(node: str, read: ClusterRead, boards: list[str] = BOARDS, owned: dict[str, int] | None = None,
             served: set[str] | None = None, busy: set[str] | None = None, followed: dict[str, bool] | None = None,
             started: float = 0.0, standbys: int = 1) -> Plan:
    """Node ``node``'s plan (its process is ``i<node>``), with the placements over ``read``'s nodes."""
    held = Held(owned or {}, served or set(), busy or set(), followed, started)
    return plan(node, f"i{node}", read, placements(boards, read.placing, standbys), held)


def placed_on(node: str, nodes: list[str]) -> list[str]:
    return [b for b in BOARDS if preference(b, nodes)[0] == node]


def test_a_node_takes_exactly_the_ownerless_boards_placed_on_it() -> None:
    read = ClusterRead(dict(NODES), {})
    todo = plan_for("a", read)
    assert todo.take == placed_on("a", list(NODES))
    assert (todo.disown, todo.hand_off, todo.release) == ([], [], [])


def test_a_board_whose_owner_is_live_is_not_taken_even_when_placed_here() -> None:
    mine = placed_on("a", list(NODES))
    read = ClusterRead(dict(NODES), {b: OwnerRow("b", "ib", 4) for b in mine})
    assert plan_for("a", read).take == []


def test_a_board_of_a_dead_owner_or_of_a_dead_instance_is_taken() -> None:
    nodes = {"a": NODES["a"], "b": NODES["b"], "c": dead("c", 1.5)}
    mine = placed_on("a", ["a", "b"])
    owners = {b: OwnerRow("c", "ic", 2) if i % 2 else OwnerRow("b", "ib-before-restart", 2) for i, b in enumerate(mine)}
    read = ClusterRead(nodes, owners)
    assert plan_for("a", read).take == mine
    assert {read.ownerless_for(b) for b in mine} == {1.5, 0.0}


def test_a_released_row_is_a_hand_off_under_way_and_names_no_owner() -> None:
    nodes = {"a": NODES["a"], "b": NODES["b"], "c": dead("c", 1.5)}
    read = ClusterRead(nodes, {"x": OwnerRow("b", "", 3), "y": OwnerRow("b", "ib", 3), "z": OwnerRow("c", "ic", 2)})
    assert [read.released(b) for b in ("x", "y", "z", "w")] == [True, False, False, False]
    assert read.owner("x") is None and read.owner("z") is None  # released; expired (not a hand-off)


def test_a_served_board_granted_to_another_epoch_is_disowned() -> None:
    board = placed_on("a", list(NODES))[0]
    read = ClusterRead(dict(NODES), {board: OwnerRow("b", "ib", 8)})
    todo = plan_for("a", read, owned={board: 7}, served={board})
    assert todo.disown == [board] and board not in todo.take
    fenced = plan_for("a", ClusterRead(dict(NODES), {board: OwnerRow("a", "ia", 7)}), served={board})
    assert fenced.disown == [board]  # an append found it granted again: no longer in `owned`


def test_a_served_board_placed_on_a_joining_node_is_handed_off() -> None:
    before = placed_on("a", ["a", "b"])
    owners = {b: OwnerRow("a", "ia", 1) for b in before}
    read = ClusterRead(dict(NODES), owners)
    todo = plan_for("a", read, owned=dict.fromkeys(before, 1), served=set(before))
    assert todo.hand_off == [b for b in before if preference(b, list(NODES))[0] == "c"]
    assert todo.disown == []


def test_a_joining_node_is_handed_no_board_until_it_serves_but_takes_the_ownerless_ones() -> None:
    """A node started (`NodeRow.state` joining) follows the boards placed on it while their
    owners keep them; the ownerless ones (a cluster's first start) it takes at once."""
    joining = {**NODES, "c": NodeRow("c", "ic", "http://c", True, -2.0, NodeState.JOINING)}
    before = placed_on("a", ["a", "b"])
    owners = {b: OwnerRow("a", "ia", 1) for b in before}
    todo = plan_for("a", ClusterRead(joining, owners), owned=dict.fromkeys(before, 1), served=set(before))
    assert todo.hand_off == [] and todo.disown == []
    assert plan_for("c", ClusterRead(joining, {})).take == placed_on("c", list(NODES))


def test_a_row_left_naming_this_node_for_a_board_placed_elsewhere_is_released() -> None:
    board = placed_on("b", list(NODES))[0]
    read = ClusterRead(dict(NODES), {board: OwnerRow("a", "ia", 3)})
    assert plan_for("a", read).release == [(board, 3)]


def test_a_leaving_node_is_placed_nowhere_and_its_released_boards_go_to_the_next_node_for_good() -> None:
    """A node handing its boards off (SIGTERM) still holds its lease: placed over the nodes that
    stay, its released boards are taken by their next node, which keeps them (no second hop
    back to the leaving node, no board left waiting for its lease to end)."""
    nodes = {**NODES, "a": NodeRow("a", "ia", "http://a", True, -2.0, NodeState.LEAVING)}
    mine = placed_on("a", list(NODES))
    released = ClusterRead(nodes, {b: OwnerRow("a", "", 5) for b in mine})
    taken = {n: plan_for(n, released, mine).take for n in "bc"}
    assert sorted(taken["b"] + taken["c"]) == sorted(mine)
    assert all(preference(b, ["b", "c"])[0] == n for n, boards in taken.items() for b in boards)
    granted = ClusterRead(nodes, {b: OwnerRow(n, f"i{n}", 6) for n, boards in taken.items() for b in boards})
    for n, boards in taken.items():
        assert plan_for(n, granted, mine, dict.fromkeys(boards, 6), set(boards)).hand_off == []


def test_busy_boards_are_left_alone() -> None:
    read = ClusterRead(dict(NODES), {})
    assert plan_for("a", read, busy=set(BOARDS)).take == []


@given(st.sets(st.sampled_from(sorted(NODES)), min_size=1), st.dictionaries(
    st.sampled_from(BOARDS), st.tuples(st.sampled_from(sorted(NODES)), st.booleans(), st.integers(1, 9))))
def test_no_two_nodes_take_one_board_and_none_takes_a_board_with_a_live_owner(
        alive: set[str], rows: dict[str, tuple[str, bool, int]]) -> None:
    nodes = {n: NODES[n] if n in alive else dead(n, 1.0) for n in NODES}
    owners = {b: OwnerRow(n, f"i{n}" if same else "gone", e) for b, (n, same, e) in rows.items()}
    read = ClusterRead(nodes, owners)
    taken: dict[str, list[str]] = {}
    for node in alive:
        for board in plan_for(node, read).take:
            taken.setdefault(board, []).append(node)
    for board, takers in taken.items():
        assert len(takers) == 1
        owner = read.owner(board)
        assert owner is None or owner == Owner(takers[0], f"http://{takers[0]}", owners[board].epoch)


def test_a_node_follows_the_boards_it_stands_by_for_and_stops_following_the_others() -> None:
    nodes = list(NODES)
    mine = placed_on("a", nodes)
    read = ClusterRead(dict(NODES), {b: OwnerRow(preference(b, nodes)[0], f"i{preference(b, nodes)[0]}", 1) for b in BOARDS})
    standing_by = {b for b in BOARDS if preference(b, nodes)[1] == "a"}
    stale = sorted(set(BOARDS) - standing_by)[:3]
    todo = plan_for("a", read, owned=dict.fromkeys(mine, 1), served=set(mine), followed=dict.fromkeys(stale, True))
    assert todo.follow == standing_by
    assert todo.unfollow == set(stale) - standing_by
    assert plan_for("a", read, owned=dict.fromkeys(mine, 1), served=set(mine), standbys=0).follow == set()
    kept = plan_for("a", read, owned=dict.fromkeys(mine, 1), served=set(mine), busy={stale[0]}, followed={stale[0]: True},
                    standbys=0)
    assert kept.unfollow == set()  # a busy board's copy is left alone (it may be taken now)


def test_a_joining_node_follows_its_future_boards_and_serves_once_caught_up_with_them() -> None:
    joining = {**NODES, "c": NodeRow("c", "ic", "http://c", True, -2.0, NodeState.JOINING)}
    coming = placed_on("c", list(NODES))
    owners = {b: OwnerRow(preference(b, ["a", "b"])[0], f"i{preference(b, ['a', 'b'])[0]}", 1) for b in BOARDS}
    read = ClusterRead(joining, owners)
    todo = plan_for("c", read)
    assert coming and todo.take == [] and set(coming) <= todo.follow
    assert (todo.serve, todo.behind) == (False, sorted(coming))
    partly = plan_for("c", read, followed={**dict.fromkeys(coming, True), coming[0]: False})
    assert (partly.serve, partly.behind) == (False, [coming[0]])
    assert plan_for("c", read, followed=dict.fromkeys(coming, True)).serve
    late = plan_for("c", read, started=JOIN_LIMIT_SECONDS)
    assert (late.serve, late.behind) == (True, sorted(coming))  # past the limit: serves, and they replay in full
    released = ClusterRead(joining | {"c": NodeRow("c", "ic", "http://c", True, -2.0, NodeState.SERVING)},
                           {**owners, **{b: OwnerRow("a", "", 1) for b in coming}})
    taking = plan_for("c", released, followed=dict.fromkeys(coming, True))
    assert taking.take == coming and taking.unfollow == set()  # handed off: taken from the copies, not dropped
    assert not plan_for("a", read).serve  # a serving node has nothing to join


def test_standbys_and_a_joining_node_follow_only_the_boards_their_owners_have_in_memory() -> None:
    """Activation on demand: an inactive board needs no copy (its takeover just owns it,
    inactive), and a board never owned yet has none to follow."""
    nodes = list(NODES)
    standing_by = sorted(b for b in BOARDS if preference(b, nodes)[1] == "a")
    idle = set(standing_by[: len(standing_by) // 2])
    read = ClusterRead(dict(NODES), {b: OwnerRow(preference(b, nodes)[0], f"i{preference(b, nodes)[0]}", 1, b not in idle)
                                     for b in BOARDS})
    todo = plan_for("a", read, followed=dict.fromkeys(idle, True))
    assert todo.follow == set(standing_by) - idle
    assert todo.unfollow == idle  # unloaded on its owner: the copy goes
    assert plan_for("a", ClusterRead(dict(NODES), {})).follow == set()
    joining = {**NODES, "c": NodeRow("c", "ic", "http://c", True, -2.0, NodeState.JOINING)}
    coming = placed_on("c", nodes)
    owners = {b: OwnerRow(preference(b, ["a", "b"])[0], f"i{preference(b, ['a', 'b'])[0]}", 1, b != coming[0]) for b in BOARDS}
    join = plan_for("c", ClusterRead(joining, owners), followed=dict.fromkeys(coming[1:], True))
    assert coming[0] not in join.follow and join.serve  # nothing to catch up with for an inactive board
    owner = owners[coming[0]].node_id
    served = plan_for(owner, ClusterRead({**joining, "c": NodeRow("c", "ic", "http://c", True, -2.0, NodeState.SERVING)},
                                         owners), owned={coming[0]: 1}, served={coming[0]})
    assert served.hand_off == [coming[0]]  # handed off inactive, as any other


def test_an_owner_writes_only_the_activity_its_rows_do_not_say_yet() -> None:
    read = ClusterRead(dict(NODES), {"x": OwnerRow("a", "ia", 1, active=False), "y": OwnerRow("a", "ia", 1),
                                     "z": OwnerRow("b", "ib", 1, active=False), "r": OwnerRow("a", "", 1, active=False)})
    active = {"x": True, "y": True, "z": True, "r": True, "new": True}
    assert activity_changes(read, "ia", active) == {"x": True}  # not another process's row, nor a released one
    assert activity_changes(read, "ia", {"y": False}) == {"y": False}


STATES = st.sampled_from([NodeState.JOINING, NodeState.SERVING, NodeState.LEAVING])


@given(st.dictionaries(st.sampled_from(sorted(NODES)), st.tuples(st.booleans(), STATES), min_size=1))
def test_every_ownerless_board_is_planned_to_exactly_one_live_node_that_placement_spreads_it_over(
        states: dict[str, tuple[bool, NodeState]]) -> None:
    nodes = {n: NodeRow(n, f"i{n}", f"http://{n}", alive, -2.0 if alive else 1.0, state) for n, (alive, state) in states.items()}
    read = ClusterRead(nodes, {})
    takers: dict[str, list[str]] = {b: [] for b in BOARDS}
    for node in (n for n, row in nodes.items() if row.alive):
        for board in plan_for(node, read).take:
            takers[board].append(node)
    for board, planned in takers.items():
        if read.placing:
            assert planned == [preference(board, read.placing)[0]]
            assert nodes[planned[0]].placed
        else:
            assert planned == []


@given(st.dictionaries(st.sampled_from(BOARDS), st.booleans()), st.floats(0, 2 * JOIN_LIMIT_SECONDS))
def test_a_joining_node_is_never_handed_a_board_before_it_serves_and_serves_only_caught_up_or_past_the_limit(
        followed: dict[str, bool], started: float) -> None:
    joining = {**NODES, "c": NodeRow("c", "ic", "http://c", True, -2.0, NodeState.JOINING)}
    owners = {b: OwnerRow(preference(b, ["a", "b"])[0], f"i{preference(b, ['a', 'b'])[0]}", 1) for b in BOARDS}
    read = ClusterRead(joining, owners)
    for node in "ab":
        held = [b for b, row in owners.items() if row.node_id == node]
        assert plan_for(node, read, owned=dict.fromkeys(held, 1), served=set(held)).hand_off == []
    todo = plan_for("c", read, followed=followed, started=started)
    coming = placed_on("c", list(NODES))
    assert todo.take == []
    caught_up = all(followed.get(b, False) for b in coming)
    assert todo.serve == (caught_up or started >= JOIN_LIMIT_SECONDS)

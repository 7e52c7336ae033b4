"""The edges' one routing decision alone: where a request about a board is answered, on a single
node and in a cluster (the directory set by hand, the lease fresh or stale)."""

from __future__ import annotations

import time
from pathlib import Path

from arena.api.routing import Local, Ownerless, Remote, moved, where
from arena.api.service import Arena
from arena.board.state import BoardStates, Owner
from arena.cluster.directory import Directory
from arena.engine.events import Reason, Result, Status
from support.server import make_config

ME = Owner("n1", "http://n1", 1)
OTHER = Owner("n2", "http://n2", 4)


def arena_of(tmp_path: Path) -> Arena:
    return Arena(make_config(tmp_path, {"a": {}, "b": {}, "c": {}}))


def clustered(arena: Arena) -> Directory:
    """Make ``arena`` node n1 of a cluster (lease 3 s): its map and directory, set by hand."""
    arena.states = BoardStates(arena.boards, node_id="n1", lease_seconds=3)
    arena.directory = Directory(arena.states)
    return arena.directory


def test_on_a_single_node_every_board_is_local(tmp_path: Path) -> None:
    arena = arena_of(tmp_path)
    assert where(arena, "a") == Local(arena.boards["a"])
    assert where(arena, "nope") == Local(None)  # answered here: unknown_board
    assert where(arena, 5) == Local(None)  # answered here: the request's own error


def test_in_a_cluster_a_board_is_here_at_its_owner_or_ownerless(tmp_path: Path) -> None:
    arena = arena_of(tmp_path)
    clustered(arena).renewed(time.monotonic())
    arena.directory.set("a", ME)
    arena.directory.set("b", OTHER)
    assert where(arena, "a") == Local(arena.boards["a"])
    assert where(arena, "b") == Remote("b", OTHER)
    assert where(arena, "c") == Ownerless("c")
    assert where(arena, "nope") == Local(None)
    error = Ownerless("c").error
    assert (error.code, error.status) == ("unavailable", 503)


def test_a_node_whose_lease_is_stale_serves_nothing_of_its_own(tmp_path: Path) -> None:
    arena = arena_of(tmp_path)
    clustered(arena).renewed(time.monotonic() - 10)
    arena.directory.set("a", ME)
    arena.directory.set("b", OTHER)
    assert where(arena, "a") == Ownerless("a")
    assert where(arena, "b") == Remote("b", OTHER)


def test_a_part_answered_here_moves_on_only_if_the_board_left_and_some_events_were_unavailable(tmp_path: Path) -> None:
    arena = arena_of(tmp_path)
    clustered(arena).renewed(time.monotonic())
    arena.directory.set("a", ME)
    arena.directory.set("b", OTHER)
    unavailable = [Result("k1", Status.ACCEPTED), Result("k2", Status.REJECTED, Reason.UNAVAILABLE)]
    decided = [Result("k1", Status.ACCEPTED)]
    assert not moved(arena, "a", unavailable)  # still served here
    assert moved(arena, "b", unavailable)
    assert moved(arena, "c", unavailable)  # ownerless: the next owner gets them
    assert not moved(arena, "b", decided)

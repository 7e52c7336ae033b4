"""What a cluster node does after one read of the leases and owner rows: a pure function of that
read, of the boards' placements (`arena.cluster.placement.placements`, once per beat) and of what
the node holds now. The ownership loop (`arena.cluster.ownership`) only carries the `Plan` out.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass

from arena.cluster.membership import ClusterRead
from arena.cluster.node import NodeState
from arena.cluster.placement import Placement

JOIN_LIMIT_SECONDS = 30.0
"""A node joining serves at the latest this long after its start, caught up or not (a board it
cannot follow then replays in full when it takes it), so that no journal keeps it out for good."""


@dataclass(frozen=True, slots=True)
class Held:
    """What a node holds as the beat plans: the boards ``owned`` by its process (with their
    epochs), ``served`` by it (its actors', and its inactive boards), ``busy`` (being taken, given up or failed: left alone),
    ``followed`` as a standby (whether each copy is caught up: loaded once), and the seconds
    since the process ``started``."""

    owned: Mapping[str, int]
    served: Set[str]
    busy: Set[str] = frozenset()
    followed: Mapping[str, bool] | None = None
    started: float = 0.0


@dataclass(frozen=True, slots=True)
class Plan:
    take: list[str]
    disown: list[str]
    hand_off: list[str]
    release: list[tuple[str, int]]
    """Boards not served here whose owner rows still name this process (a release that failed),
    with their epochs."""
    follow: set[str]
    """Boards to follow as a standby (start, or bring up to date)."""
    unfollow: set[str]
    """Boards followed that no longer are (not those taken now: their copies start their actors)."""
    serve: bool
    """A joining node marks itself serving now: its owners then hand it its boards."""
    behind: list[str]
    """The boards coming to this node whose standby copies have not caught up yet."""


def plan(node_id: str, instance: str, read: ClusterRead, placed: Mapping[str, Placement], held: Held) -> Plan:
    """What node ``node_id`` (process ``instance``) does after ``read``, for the boards ``placed``:
    - take the boards placed on it that no other live process owns;
    - disown the boards served here and no longer granted to this process under the epoch it
      serves (``held.owned``);
    - hand off the boards served here and placed on another live serving node (not on a node
      joining: it follows the board until caught up);
    - release the boards not served here whose owner rows still name this process;
    - follow the boards it stands by for, and the boards placed on it that a live owner keeps
      (it is joining, or they are about to be handed off), so that taking them replays a tail:
      only those their owners have in memory (an inactive board is taken inactive, no copy
      needed; one never owned yet is taken inactive too when boards are activated on demand);
    - serve, when it is joining, once each board coming to it is caught up, or past
      `JOIN_LIMIT_SECONDS`.
    Busy boards are neither taken nor given up. O(boards × standbys)."""
    take: list[str] = []
    disown: list[str] = []
    hand_off: list[str] = []
    release: list[tuple[str, int]] = []
    coming: set[str] = set()
    standing_by: set[str] = set()
    served, busy = held.served, held.busy
    for board, place in placed.items():
        owner = place.owner
        row = read.owners.get(board)
        active = row is not None and row.active  # an inactive board is taken over, or handed off, without a copy
        if node_id in place.standbys and active:
            standing_by.add(board)
        if owner == node_id and board not in served and read.owner(board) is not None and active:
            coming.add(board)
        if board in busy:
            continue
        if board in served:
            epoch = held.owned.get(board)
            if epoch is None or row is None or (row.instance, row.epoch) != (instance, epoch):
                disown.append(board)
            elif owner is not None and owner != node_id and read.nodes[owner].state is NodeState.SERVING:
                hand_off.append(board)
        elif owner == node_id:
            if read.owner(board) is None or (row is not None and row.instance == instance):
                take.append(board)
        elif row is not None and row.instance == instance:
            release.append((board, row.epoch))
    followed = held.followed or {}
    # the boards taken or given up now are busy from now on: a copy taken over is not closed
    acting = busy | {*take, *disown, *hand_off, *(board for board, _ in release)}
    follow = (standing_by | coming) - served - acting
    behind = sorted(b for b in coming if not followed.get(b, False))
    joining = read.nodes[node_id].state is NodeState.JOINING
    return Plan(
        take, disown, hand_off, release, follow,
        unfollow={b for b in followed if b not in follow and b not in acting},
        serve=joining and (not behind or held.started >= JOIN_LIMIT_SECONDS),
        behind=behind,
    )

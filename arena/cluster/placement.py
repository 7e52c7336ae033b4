"""Where a board lives: rendezvous (highest random weight) hashing over the live nodes.

Every node computes the same order from the same list of live nodes, with no coordination: the
owner is the node with the highest weight for the board, its standbys the next ones. When a node
leaves, only the boards it owned (or followed) move; when one joins, it takes only the boards for
which it now weighs most.

`placements` is the one place a board's owner and standbys are decided: the ownership loop plans
from it once per beat, and `GET /v1/cluster` shows it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Placement:
    """A board's place over the live nodes: its ``owner`` (None when there is no node) and the
    ``standbys`` next in its order, which follow its journal."""

    owner: str | None
    standbys: tuple[str, ...]


def weight(board: str, node_id: str) -> int:
    """The node's weight for the board: 64 bits of a hash of both (stable across processes,
    unlike ``hash``). The NUL keeps ("ab", "c") and ("a", "bc") apart."""
    digest = hashlib.blake2b(f"{board}\0{node_id}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def preference(board: str, nodes: Iterable[str]) -> list[str]:
    """The nodes in the board's order: its owner first, then its standbys. Ties (a 64-bit
    collision) go to the lower node id, so that every node agrees."""
    return sorted(set(nodes), key=lambda node: (-weight(board, node), node))


def placements(boards: Iterable[str], nodes: Iterable[str], standbys: int) -> dict[str, Placement]:
    """Every board's `Placement` over ``nodes`` with ``standbys`` standbys. O(boards × nodes log nodes)."""
    live = set(nodes)
    placed: dict[str, Placement] = {}
    for board in boards:
        order = preference(board, live)
        placed[board] = Placement(order[0] if order else None, tuple(order[1 : 1 + standbys]))
    return placed

"""Where a board lives: rendezvous (highest random weight) hashing over the live nodes.

Every node computes the same order from the same list of live nodes, with no coordination: the
owner is the node with the highest weight for the board, its standbys the next ones. When a node
leaves, only the boards it owned (or followed) move; when one joins, it takes only the boards for
which it now weighs most.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def weight(board: str, node_id: str) -> int:
    """The node's weight for the board: 64 bits of a hash of both (stable across processes,
    unlike ``hash``). The NUL keeps ("ab", "c") and ("a", "bc") apart."""
    digest = hashlib.blake2b(f"{board}\0{node_id}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def preference(board: str, nodes: Iterable[str]) -> list[str]:
    """The nodes in the board's order: its owner first, then its standbys. Ties (a 64-bit
    collision) go to the lower node id, so that every node agrees."""
    return sorted(set(nodes), key=lambda node: (-weight(board, node), node))


def placement(board: str, nodes: Iterable[str], standbys: int) -> tuple[str | None, list[str]]:
    """The board's owner among ``nodes`` (None when there is none) and its ``standbys`` next."""
    order = preference(board, nodes)
    if not order:
        return None, []
    return order[0], order[1 : 1 + standbys]

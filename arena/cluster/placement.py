"""Where a board lives: rendezvous (highest random weight) hashing over the live nodes.

Every node computes the same order from the same list of live nodes, with no coordination: the
owner is the node with the highest weight for the board, its standbys the next ones. When a node
leaves, only the boards it owned (or followed) move; when one joins, it takes only the boards for
which it now weighs most.

`placements` is the one place a board's owner and standbys are decided: the ownership loop plans
from it once per beat, and `GET /v1/cluster` shows it. A config board the live nodes define
differently (a config changed on some nodes only) is placed only over the nodes that define it
as most of them do (`agreeing`), so a node whose definition differs journals nothing under it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
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


def agreeing(board: str, nodes: Iterable[str], configs: Mapping[str, Mapping[str, str]]) -> set[str]:
    """The nodes of ``nodes`` that may own or follow ``board``, given each node's config board
    definitions (``configs``: node -> board -> digest): all of them while they define the board
    alike; else those that define it as most of them do, ties going to the definition of the
    lowest node id among them. A node not in ``configs`` (starting: it records its config before
    its first beat, so it takes nothing before that) counts as agreeing: placing nothing on it
    would move every board once it has recorded it. Pure. O(nodes)."""
    live = set(nodes)
    digests = {node: configs[node].get(board) for node in live if node in configs}
    declared = Counter(digest for digest in digests.values() if digest is not None)
    if len(set(digests.values())) <= 1 or not declared:
        return live
    most = max(declared.values())
    reference = min((d for d, n in declared.items() if n == most), key=lambda d: min(n for n in digests if digests[n] == d))
    return {node for node in live if digests.get(node, reference) == reference}


def placements(boards: Iterable[str], nodes: Iterable[str], standbys: int,
               configs: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Placement]:
    """Every board's `Placement` over ``nodes`` (those `agreeing` on it, given ``configs``) with
    ``standbys`` standbys. O(boards × nodes log nodes)."""
    live = set(nodes)
    placed: dict[str, Placement] = {}
    for board in boards:
        order = preference(board, live if not configs else agreeing(board, live, configs))
        placed[board] = Placement(order[0] if order else None, tuple(order[1 : 1 + standbys]))
    return placed

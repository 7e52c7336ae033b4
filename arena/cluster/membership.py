"""The cluster as the journal's tables say it is: the nodes' leases and the boards' owner rows,
read in one transaction and judged by the database's clock (`read_cluster`), as the ownership
loop sees it and as `GET /v1/cluster` shows it (`cluster_view`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import orjson

from arena.cluster.directory import Owner
from arena.cluster.node import NodeState
from arena.cluster.placement import Placement, placements
from arena.engine.spec import BoardSpec
from arena.errors import JournalUnavailable
from arena.journal.postgresql import STORE_ERRORS, PostgresBackend, PostgresStore

_NODES = (
    "SELECT node_id, instance, url, expires_at > now(), extract(epoch FROM now() - expires_at)::float8, state"
    " FROM {s}.node_lease ORDER BY node_id"
)
_OWNERS = "SELECT board, node_id, instance, epoch, active FROM {s}.board_owner"
_ACTIVE = (
    "UPDATE {s}.board_owner AS o SET active = a.active FROM unnest($1::text[], $2::bool[]) AS a(board, active)"
    " WHERE o.board = a.board AND o.instance = $3"
)
_CONFIGS = "SELECT node_id, boards FROM {s}.node_config"


@dataclass(frozen=True, slots=True)
class NodeRow:
    node_id: str
    instance: str
    """The process holding the lease (a node started again is another instance)."""
    url: str
    alive: bool
    expired_for: float
    """Seconds since its lease expired; negative while alive: minus the seconds it has left."""
    state: NodeState
    """What its process last said of its life (`arena.cluster.node`): never ``starting``."""

    @property
    def placed(self) -> bool:
        """Placement spreads the boards over it: alive and not leaving."""
        return self.alive and self.state is not NodeState.LEAVING


@dataclass(frozen=True, slots=True)
class OwnerRow:
    node_id: str
    instance: str
    """The process granted the board; empty once it released it (a hand-off)."""
    epoch: int
    active: bool = True
    """Whether its owner has it in memory, as the owner last wrote it (`write_activity`):
    standbys follow active boards only."""


@dataclass(frozen=True, slots=True)
class ClusterRead:
    """The leases and owner rows as one transaction read them."""

    nodes: dict[str, NodeRow]
    owners: dict[str, OwnerRow]
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    """Each node's config board definitions, a digest each (`publish_config`)."""

    @property
    def placing(self) -> list[str]:
        """The nodes that placement spreads the boards over (`NodeRow.placed`)."""
        return [n for n, row in self.nodes.items() if row.placed]

    def placements(self, boards: Iterable[str], standbys: int) -> dict[str, Placement]:
        """``boards``' placements over the `placing` nodes, given their configs (`placements`)."""
        return placements(boards, self.placing, standbys, self.configs)

    @property
    def mismatched(self) -> list[str]:
        """The config boards the live nodes define differently (`mismatched`)."""
        return mismatched({n: config for n, config in self.configs.items() if n in self.nodes and self.nodes[n].alive})

    def holds(self, row: OwnerRow | None) -> bool:
        """Whether the process an owner row names holds its node's lease (live or not)."""
        node = None if row is None else self.nodes.get(row.node_id)
        return node is not None and row is not None and node.instance == row.instance

    def owner(self, board: str) -> Owner | None:
        """The board's live owner: its owner row's process still holds a live lease."""
        row = self.owners.get(board)
        if row is None or not self.holds(row) or not self.nodes[row.node_id].alive:
            return None
        return Owner(row.node_id, self.nodes[row.node_id].url, row.epoch, row.active)

    def released(self, board: str) -> bool:
        """Whether the board's owner row was released (a hand-off) and no node took it since."""
        row = self.owners.get(board)
        return row is not None and row.instance == ""

    def next_expiry(self, node_id: str) -> float | None:
        """Seconds until the first lease of another live node expires (None: there is none)."""
        return min((-n.expired_for for n in self.nodes.values() if n.alive and n.node_id != node_id), default=None)

    def ownerless_for(self, board: str) -> float:
        """Seconds since the board's last owner stopped being live, as far as this read knows
        (0: it had none, or it released the board)."""
        row = self.owners.get(board)
        if row is None or not self.holds(row):
            return 0.0
        return max(self.nodes[row.node_id].expired_for, 0.0)


async def read_cluster(conn: asyncpg.Connection, store: PostgresStore) -> ClusterRead:
    """Inside the caller's transaction. Raises what asyncpg raises."""
    nodes = await conn.fetch(store.sql(_NODES))
    owners = await conn.fetch(store.sql(_OWNERS))
    configs = await conn.fetch(store.sql(_CONFIGS))
    return ClusterRead(
        nodes={n: NodeRow(n, instance, url, live, float(ago), NodeState(state)) for n, instance, url, live, ago, state in nodes},
        owners={board: OwnerRow(n, instance, int(epoch), active) for board, n, instance, epoch, active in owners},
        configs={n: orjson.loads(boards) for n, boards in configs},
    )


def activity_changes(read: ClusterRead, instance: str, active: Mapping[str, bool]) -> dict[str, bool]:
    """The boards of ``active`` (this process's boards: whether each is in memory here) whose
    owner row, granted to process ``instance``, says otherwise in ``read``. Pure. O(boards)."""
    changed = {}
    for board, now in active.items():
        row = read.owners.get(board)
        if row is not None and row.instance == instance and row.active != now:
            changed[board] = now
    return changed


async def write_activity(conn: asyncpg.Connection, store: PostgresStore, instance: str, changed: Mapping[str, bool]) -> None:
    """Inside the caller's transaction: write whether each board of ``changed`` is in memory on
    its owner, process ``instance`` (`OwnerRow.active`). Raises what asyncpg raises."""
    if changed:
        await conn.execute(store.sql(_ACTIVE), list(changed), list(changed.values()), instance)


async def publish_config(backend: PostgresBackend, boards: Mapping[str, BoardSpec]) -> None:
    """Record this node's config board definitions (a digest each) for `GET /v1/cluster` to
    compare with the other live nodes'. Raises JournalUnavailable."""
    digests = {name: hashlib.sha256(spec.document_text().encode()).hexdigest()[:16] for name, spec in boards.items()}
    store = backend.store
    try:
        async with store.connection() as conn:
            await conn.execute(store.sql("INSERT INTO {s}.node_config VALUES ($1, $2) ON CONFLICT (node_id)"
                                         " DO UPDATE SET boards = EXCLUDED.boards"), backend.node_id, orjson.dumps(digests).decode())
    except STORE_ERRORS as exc:
        raise JournalUnavailable(store.redact(f"cannot record this node's config at {store.where}: {exc}")) from exc


def mismatched(configs: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The config boards whose definitions differ between the nodes of ``configs`` (node ->
    board -> digest): declared by some and not others, or declared differently. O(boards * nodes)."""
    boards = {board for config in configs.values() for board in config}
    return sorted(b for b in boards if len({config.get(b) for config in configs.values()}) > 1)


async def cluster_view(backend: PostgresBackend, boards: Iterable[str], standbys: int) -> dict[str, Any]:
    """`view` of the cluster as the journal's tables say it is now, with ``config_mismatch``: the
    config boards the live nodes define differently (`mismatched`). Raises JournalUnavailable
    when the store cannot be read."""
    store = backend.store
    try:
        async with store.connection() as conn, conn.transaction(readonly=True):
            read = await read_cluster(conn, store)
    except STORE_ERRORS as exc:
        raise JournalUnavailable(store.redact(f"cannot read the cluster at {store.where}: {exc}")) from exc
    return {**view(backend.node_id, read, boards, standbys), "config_mismatch": read.mismatched}


def view(node_id: str, read: ClusterRead, boards: Iterable[str], standbys: int) -> dict[str, Any]:
    """``{"node", "nodes": [{"node_id", "url", "alive", "boards"}], "boards": {B: {"owner",
    "epoch", "standbys", "active"}}}`` for the configured ``boards``, as node ``node_id`` shows it. A board
    whose owner's lease expired is ownerless (owner null), and listed under its owner node while
    that node's process holds its lease; its standbys are its placement's (`placements`, as the
    ownership loop plans from), less its owner while a move makes it one of them."""
    shown: dict[str, Any] = {}
    owned: dict[str, list[str]] = {}
    for board, place in read.placements(sorted(boards), standbys).items():
        row = read.owners.get(board)
        if row is not None and read.holds(row):
            owned.setdefault(row.node_id, []).append(board)
        owner = read.owner(board)
        owner_id = None if owner is None else owner.node_id
        shown[board] = {"owner": owner_id, "epoch": 0 if row is None else row.epoch,
                       "standbys": [n for n in place.standbys if n != owner_id],
                       "active": owner is not None and owner.active}
    return {
        "node": node_id,
        "nodes": [{"node_id": n.node_id, "url": n.url, "alive": n.alive, "boards": owned.get(n.node_id, [])}
                  for n in read.nodes.values()],
        "boards": shown,
    }

"""The cluster as the journal's tables say it is: the nodes' leases and the boards' owner rows,
read in one transaction and judged by the database's clock (`GET /v1/cluster`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from arena.cluster.placement import preference
from arena.errors import JournalUnavailable
from arena.journal.postgresql import STORE_ERRORS, PostgresBackend

_NODES = "SELECT node_id, url, expires_at > now() FROM {s}.node_lease ORDER BY node_id"
_OWNERS = "SELECT board, node_id, epoch FROM {s}.board_owner"

async def cluster_view(backend: PostgresBackend, boards: Iterable[str], standbys: int) -> dict[str, Any]:
    """``{"node", "nodes": [{"node_id", "url", "alive", "boards"}], "boards": {B: {"owner",
    "epoch", "standbys"}}}`` for the configured ``boards``. A board whose owner's lease expired is
    ownerless (owner null); its standbys are the next ``standbys`` live nodes in its placement
    order. Raises JournalUnavailable when the store cannot be read."""
    store = backend.store
    try:
        async with store.connection() as conn, conn.transaction(readonly=True):
            nodes = await conn.fetch(store.sql(_NODES))
            owners = {row[0]: (row[1], row[2]) for row in await conn.fetch(store.sql(_OWNERS))}
    except STORE_ERRORS as exc:
        raise JournalUnavailable(store.redact(f"cannot read the cluster at {store.where}: {exc}")) from exc
    alive = [node_id for node_id, _, live in nodes if live]
    view: dict[str, Any] = {}
    owned: dict[str, list[str]] = {}
    for board in sorted(boards):
        node_id, epoch = owners.get(board, (None, 0))
        if node_id is not None:
            owned.setdefault(node_id, []).append(board)
        owner = node_id if node_id in alive else None
        following = [n for n in preference(board, alive) if n != owner][:standbys]
        view[board] = {"owner": owner, "epoch": epoch, "standbys": following}
    return {
        "node": backend.node_id,
        "nodes": [{"node_id": n, "url": url, "alive": live, "boards": owned.get(n, [])} for n, url, live in nodes],
        "boards": view,
    }

"""One Arena process: settings, clock, metrics and the supervised boards, as the edges see them."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from arena.api.delivering import ServedBoards, wall_ms
from arena.auth import identify
from arena.board.actor import BoardHandle
from arena.board.clock import Clock
from arena.board.state import BoardStates
from arena.board.supervisor import Supervisor
from arena.cluster.directory import Directory
from arena.config import (
    DEV_ADMIN_TOKEN_SHA256,
    DEV_TOKEN_SHA256,
    Admin,
    Config,
    GameServer,
    parse_board,
    require_cluster_secret,
    webhook_secrets,
)
from arena.delivery import outbox_store
from arena.delivery.deliverer import Deliverer
from arena.delivery.outbox import Outbox
from arena.engine.spec import BoardSpec
from arena.errors import ConfigError, JournalUnavailable, QueryError, not_found
from arena.journal import (
    BoardCatalog,
    CatalogEntry,
    JournalBackend,
    SettlementLog,
    board_catalog,
    journal_backend,
    settlement_log,
)
from arena.journal.snapshots import snapshot_store
from arena.live.views import LiveViews
from arena.metrics import Metrics

if TYPE_CHECKING:
    from arena.cluster.grants import Grants
    from arena.cluster.lease import NodeLease
    from arena.cluster.ownership import Ownership

log = logging.getLogger("arena")


class Arena:
    """Composition root of a server. ``wrap_backend``, when given, wraps the journal backend every
    board opens its journals through (above the cluster's grants): a seam for what watches or alters
    the boards' journal I/O (fault injection, for one)."""

    def __init__(self, config: Config, *, clock: Clock | None = None,
                 wrap_backend: Callable[[JournalBackend], JournalBackend] | None = None) -> None:
        require_cluster_secret(config)
        self.webhook_secrets = webhook_secrets(config, os.environ)
        """Each webhook's signing secrets (from the environment; checked before anything starts)."""
        self.config = config
        self.settings = config.server
        self.clock = clock or Clock()
        self.metrics = Metrics()
        backend = journal_backend(config)
        cluster = config.cluster
        self.states = BoardStates(config.boards, node_id=config.node_id if cluster else None,
                                  lease_seconds=cluster.lease_seconds if cluster else 0.0,
                                  on_demand=self.settings.idle_unload_seconds > 0)
        """Every board's state on this node: what the supervisor, the ownership loop, the
        directory, readiness and `/v1/boards` read."""
        self.lease: NodeLease | None = None
        """On postgresql, this node's lease on the schema (what the data_dir lock is on sqlite)."""
        grants: Grants | None = None  # on postgresql: who may write each board
        if config.journal.backend == "postgresql":
            from arena.cluster.grants import Grants
            from arena.cluster.lease import LEASE_SECONDS, NodeLease
            from arena.journal.postgresql import PostgresBackend

            assert isinstance(backend, PostgresBackend)
            lease_seconds = config.cluster.lease_seconds if config.cluster else LEASE_SECONDS
            self.lease = NodeLease(backend, lease_seconds, config.advertise_url, clustered=config.cluster is not None)
            grants = Grants(backend, self.states, clustered=config.cluster is not None)
        self._renewals: asyncio.Task[None] | None = None
        self._leased = False
        self.catalog: BoardCatalog = board_catalog(config, backend)
        """The boards created through the admin API (`arena.api.boards`)."""
        self.settlement_log: SettlementLog = settlement_log(config, backend)
        """Every board's settlement revisions in commit order: what `GET /v1/settlements` reads."""
        self.outbox: Outbox | None = outbox_store(config, backend) if config.webhooks else None
        """With ``[[webhooks]]``: their deliveries, kept with the journals."""
        self._generation = -1  # the catalog's generation last read (`sync_catalog`)
        self._catalog_turn = asyncio.Lock()
        journals: JournalBackend = grants or backend
        self.backend = wrap_backend(journals) if wrap_backend is not None else journals
        self.supervisor = Supervisor(config, self.clock, self.metrics, self.backend, snapshot_store(backend), self.states,
                                     self.settlement_log)
        self.boards: dict[str, BoardHandle] = self.supervisor.handles
        self.specs: Mapping[str, BoardSpec] = _Specs(self.boards)
        """Every board's definition as this node serves it now: what validation reads."""
        self.directory = Directory(self.states)
        """Where each board is served: here, on another node (forwarded), or nowhere for now."""
        self.ownership: Ownership | None = None
        """In a cluster: the loop that takes and gives up this node's boards."""
        if cluster is not None and self.lease is not None and grants is not None:
            from arena.cluster.ownership import Ownership

            self.ownership = Ownership(self.lease, grants, self.directory, self.supervisor, self.metrics, cluster.standbys)
            self.ownership.catalog = self.sync_catalog
        self.connections = 0
        self.live_connections = 0  # /v1/live (and, later, SSE streams): bounded by max_live_connections
        self.draining = False
        self.leaving = False
        """SIGTERM received: /readyz answers 503 `draining` for drain_seconds while everything
        else is still served (then `drain`)."""
        self._readers: set[asyncio.Task[None]] = set()
        self.digest_turn = asyncio.Lock()  # see queries.digest
        self.live: LiveViews | None = None  # the app's registry of live views (arena.api.app)
        self.deliverer: Deliverer | None = None
        """With ``[[webhooks]]``: the loop that delivers settlements to them."""
        if self.outbox is not None:
            served = ServedBoards(self.boards, self.states, self.activated)
            self.deliverer = Deliverer(config.webhooks, self.webhook_secrets, self.outbox, self.settlement_log, served,
                                       self.metrics, backoff_seconds=self.settings.webhook_backoff_seconds,
                                       timeout_seconds=self.settings.webhook_timeout_seconds, clock=wall_ms)
        self._delivering: asyncio.Task[None] | None = None

    async def start(self) -> None:
        for server in self.config.servers:
            if server.token_sha256 == DEV_TOKEN_SHA256:
                log.warning("game server %r uses the public development token; do not expose this server", server.id)
        for admin in self.config.admins:
            if admin.token_sha256 == DEV_ADMIN_TOKEN_SHA256:
                log.warning("admin %r uses the public development token; do not expose this server", admin.id)
        try:
            await self.sync_catalog()
            if self.lease is not None:
                await self.lease.acquire()
                self._leased = True
                if self.ownership is not None:
                    from arena.cluster.membership import publish_config

                    await publish_config(self.ownership.backend, self.config.boards)
                    await self.ownership.beat()
                    self._renewals = asyncio.create_task(self.ownership.run(), name="ownership")
                else:
                    self._renewals = asyncio.create_task(self.lease.keep(), name="lease")
            await self.supervisor.start()
            if self.deliverer is not None:
                await self.deliverer.begin()
                self._delivering = asyncio.create_task(self.deliverer.run(), name="webhooks")
        except BaseException:
            await self._release()
            raise

    async def cluster(self) -> dict[str, Any]:
        """`GET /v1/cluster`: the nodes and the boards' owners as the journal's tables say (on
        sqlite, a single node: no cluster). Raises QueryError unavailable (503) when PostgreSQL
        cannot be read."""
        if self.lease is None:
            return {"node": None, "nodes": [], "boards": {}}
        from arena.cluster.membership import cluster_view

        standbys = self.config.cluster.standbys if self.config.cluster else 0
        try:
            return await cluster_view(self.lease.backend, self.states, standbys)
        except JournalUnavailable as exc:
            log.warning("GET /v1/cluster: %s", exc)
            raise QueryError("unavailable", "the journal's database cannot be reached; try again", 503) from exc

    async def sync_catalog(self) -> bool:
        """Read the catalog of API boards again if it changed since the last read (one read
        when it did not), and serve what it says: a new board is added (placed, in a cluster),
        a changed one served under its new definition, a retired one listed as such. Whether it
        changed. Raises ConfigError (at start: a config board's name held by an API board),
        JournalError."""
        async with self._catalog_turn:
            generation = await self.catalog.generation()
            if generation == self._generation:
                return False
            clashes = []
            for entry in await self.catalog.entries():
                if entry.name in self.config.boards:
                    clashes.append(entry.name)
                else:
                    await self.serve_entry(entry)
            self._generation = generation
            if clashes:
                raise ConfigError(f"boards.{clashes[0]}: a board created through the admin API holds this name;"
                                  " remove it from the config (or use another name)")
            return True

    async def catalog_changed(self) -> None:
        """After this node changed the catalog: the other nodes read it at once (a hint; they
        read it at their next beat anyway)."""
        if self.ownership is not None:
            from arena.cluster.lease import hint

            await hint(self.ownership.backend.store)

    async def serve_entry(self, entry: CatalogEntry) -> None:
        """Serve one catalog entry's board as it says (`sync_catalog`); a new board's actor, on a
        single node, starts (it loads in the background)."""
        spec = parse_board(entry.name, orjson.loads(entry.definition))
        handle = self.boards.get(entry.name)
        if handle is None:
            handle = await self.supervisor.add(spec)
            handle.defined_by_api = True
        elif handle.engine is None:  # served elsewhere: its owner's actor changed its own spec
            handle.spec = spec
        handle.retired = entry.retired
        handle.version = entry.version

    def board(self, name: str) -> BoardHandle:
        handle = self.boards.get(name)
        if handle is None:
            raise not_found("unknown_board", f"no board named {name!r}")
        return handle

    async def activated(self, name: str) -> None:
        """Before a query, audit or subscription of board ``name`` served here: activate it if it
        is dormant and wait until it serves (`arena.board.activation`). Raises QueryError
        not_ready (503) after 5 s. Returns at once for a board in any other state, or no board."""
        activations = self.supervisor.activations
        if activations is not None and name in self.boards:
            await activations.ready(name)

    def used(self, name: str) -> None:
        """A query of board ``name`` answered at once here (it was loaded): it is the most
        recently used, not unloaded as idle meanwhile. O(1)."""
        activations = self.supervisor.activations
        if activations is not None and name in self.boards:
            activations.used(name)

    def game_server(self, authorization: str | None) -> GameServer | None:
        return identify(authorization, self.config.servers)

    def admin(self, authorization: str | None) -> Admin | None:
        return identify(authorization, self.config.admins)

    @property
    def ready(self) -> bool:
        """Every board served here is loaded, and (in a cluster) this node's lease is fresh."""
        return self.states.lease_fresh and self.states.ready

    def add_reader(self, task: asyncio.Task[None]) -> None:
        self._readers.add(task)
        task.add_done_callback(self._readers.discard)

    async def drain(self) -> None:
        """Stop reading frames on every connection; they ack what they took and close 1012.
        Boards still loading stop now: their queued frames are answered `unavailable`. In a
        cluster every board is handed off first, while the connections still read: their frames
        go on to the next owners, so a client sees no gap but its reconnection."""
        if self.ownership is not None:
            await self.ownership.leave()
        self.draining = True
        self.supervisor.abandon_loading()
        for task in list(self._readers):
            task.cancel()

    async def stop(self) -> None:
        if self._delivering is not None:
            self._delivering.cancel()
            await asyncio.gather(self._delivering, return_exceptions=True)
        if self.ownership is not None:
            await self.ownership.leave()
            await self._stop_renewals()  # no board is taken or disowned while the actors stop
        await self.supervisor.stop()
        await self._release()

    async def _stop_renewals(self) -> None:
        if self._renewals is not None:
            self._renewals.cancel()
            await asyncio.gather(self._renewals, return_exceptions=True)
            self._renewals = None

    async def _release(self) -> None:
        """Give up the lease, if taken (once no board writes), and close the backend."""
        await self._stop_renewals()
        if self._leased:
            assert self.lease is not None
            await self.lease.release()
            self._leased = False
        await self.catalog.close()
        if self.deliverer is not None:
            await self.deliverer.close()
        if self.outbox is not None:
            await self.outbox.close()
        await self.settlement_log.close()
        await self.backend.close()


class _Specs(Mapping[str, BoardSpec]):
    """The boards' specs as their handles hold them now (a change replaces a handle's spec)."""

    def __init__(self, handles: Mapping[str, BoardHandle]) -> None:
        self._handles = handles

    def __getitem__(self, name: str) -> BoardSpec:
        return self._handles[name].spec

    def __contains__(self, name: object) -> bool:
        return name in self._handles

    def __iter__(self) -> Iterator[str]:
        return iter(self._handles)

    def __len__(self) -> int:
        return len(self._handles)

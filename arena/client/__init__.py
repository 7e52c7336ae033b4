"""A client for game servers: stream score events to Arena over one WebSocket and read standings.

    async with ArenaClient("http://127.0.0.1:8080", token) as arena:
        result = await arena.submit("high_score", "alice", 1200)    # SubmitResult (accepted)
        table = await arena.top("high_score", "daily", limit=10)    # Table with .entries

For scripts without an event loop, `connect_sync` (or `ArenaClientSync`) gives the same methods,
blocking, over a private event loop in a thread.

What the client does for you:

- **Auto-batching.** `submit` calls made within ``linger`` seconds (default 2 ms) of each other
  travel in one submit frame (at most ``max_batch`` events and ``max_frame_bytes`` bytes).
- **Pipelining.** Up to ``max_in_flight`` frames are sent before their answers arrive; past that
  new calls wait in the client's queue (the server applies its own backpressure the same way).
- **Safe retries.** Every event gets an idempotency key when it is submitted (a time-ordered
  UUIDv7 unless you pass one) and keeps it for its whole life. When the connection drops (the
  server restarts, the network fails), the client reconnects with exponential backoff and jitter
  and resends every event that was not acked, with the same keys. An event the server journaled
  before the drop comes back ``duplicate``: `SubmitResult.recorded` is True for both ``accepted``
  and ``duplicate``, and `SubmitResult.status` says which one it was.
- **`unavailable` is retried.** An event the server answers ``rejected/unavailable`` (nothing was
  journaled: the board failed or its disk refused the write) is resent with the same key after a
  backoff, for up to ``retry_unavailable_for`` seconds; only then does it surface as rejected.
  Likewise a query answered ``not_ready`` (the board is still loading its tables, as it is for a
  moment after every server restart) is sent again until the board answers.

Errors: every error the client raises on purpose derives from `ArenaClientError`, whose docstring
draws the tree.

The package, one module per concept:

    errors.py      `ArenaClientError` and the tree under it
    models.py      the values: `ScoreEvent`, `SubmitResult`, `Table`...; answer bodies -> values
    connection.py  `ArenaClient`: one connection, batching, pipelining, resends, reconnects
    sync.py        `ArenaClientSync`, `connect_sync`: the same methods, blocking

`Backoff`, the schedule of reconnects and retries, is `arena.backoff`'s (the server's peer
connections use the same one).
"""

from arena.backoff import Backoff
from arena.client.connection import ArenaClient, ws_url
from arena.client.errors import (
    ArenaClientError,
    AuthenticationError,
    ClientClosed,
    ConnectionFailed,
    EventRejected,
    FrameTooLarge,
    QueryFailed,
)
from arena.client.models import (
    ClientStats,
    Entry,
    Members,
    Percentile,
    ScoreAtPercentile,
    ScoreEvent,
    Standing,
    SubmitResult,
    SubmitStatus,
    Table,
    TableInfo,
    new_idempotency_key,
)
from arena.client.sync import ArenaClientSync, connect_sync

__all__ = [
    "ArenaClient",
    "ArenaClientError",
    "ArenaClientSync",
    "AuthenticationError",
    "Backoff",
    "ClientClosed",
    "ClientStats",
    "ConnectionFailed",
    "Entry",
    "EventRejected",
    "FrameTooLarge",
    "Members",
    "Percentile",
    "QueryFailed",
    "ScoreAtPercentile",
    "ScoreEvent",
    "Standing",
    "SubmitResult",
    "SubmitStatus",
    "Table",
    "TableInfo",
    "connect_sync",
    "new_idempotency_key",
    "ws_url",
]

"""Arena's client for game servers: stream score events to Arena over one WebSocket, read
standings and follow live views, all typed.

    async with ArenaClient("http://127.0.0.1:8080", token) as arena:
        result = await arena.submit("high_score", "alice", 1200)    # SubmitResult (accepted)
        table = await arena.top("high_score", "daily", limit=10)    # Table with .entries
        async for top in arena.subscribe(TopView("high_score", "daily", limit=10)):
            ...                                                      # a Table at each change

For scripts without an event loop, `connect_sync` (or `ArenaClientSync`) gives the same methods,
blocking, over a private event loop in a thread (`subscribe` there is a plain iterator). Without
a token the client reads the public ``/v1/live``: queries and live views, no submits.

What the client does for you:

- **Auto-batching per board.** `submit` calls for one board made within ``linger`` seconds
  (default 2 ms) of each other travel in one submit frame (at most ``max_batch`` events and
  ``max_frame_bytes`` bytes). Boards never share a frame: the server acks a frame once all of it
  is durable, so a board whose owner is away (a node died, a takeover is under way) holds up only
  its own acks.
- **Pipelining.** Up to ``max_in_flight`` frames per board are sent before their answers arrive;
  past that new calls wait in the client's queue (the server applies its own backpressure the
  same way).
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

The package, one module per concept (it imports only the standard library, websockets and
orjson; the server's package re-exports it as ``arena.client``):

    errors.py      `ArenaClientError` and the tree under it
    models.py      the values: `ScoreEvent`, `SubmitResult`, `Table`...; answer bodies -> values
    views.py       the table queries as values (`TopView`...): fields and parsing, for queries
                   and live views alike
    connection.py  `ArenaClient`: one connection, batching per board, pipelining, resends,
                   reconnects, live views
    sync.py        `ArenaClientSync`, `connect_sync`: the same methods, blocking
    backoff.py     `Backoff`, the schedule of reconnects and retries (the server's connections
                   to its peer nodes use the same one)
    signature.py   `verify_signature`: check a webhook delivery's ``Arena-Signature`` (the
                   server signs with the same module)
"""

from arena_client.backoff import Backoff
from arena_client.connection import ArenaClient, ClientOptions, ws_url
from arena_client.errors import (
    ArenaClientError,
    AuthenticationError,
    ClientClosed,
    ConnectionFailed,
    EventRejected,
    FrameTooLarge,
    QueryFailed,
)
from arena_client.models import (
    ClientStats,
    Entry,
    EventFields,
    Json,
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
from arena_client.signature import verify_signature
from arena_client.sync import ArenaClientSync, connect_sync
from arena_client.views import (
    AroundView,
    MembersView,
    PercentileView,
    RankView,
    ScoreAtPercentileView,
    TopView,
    View,
)

__all__ = [
    "ArenaClient",
    "ArenaClientError",
    "ArenaClientSync",
    "AroundView",
    "AuthenticationError",
    "Backoff",
    "ClientClosed",
    "ClientOptions",
    "ClientStats",
    "ConnectionFailed",
    "Entry",
    "EventFields",
    "EventRejected",
    "FrameTooLarge",
    "Json",
    "Members",
    "MembersView",
    "Percentile",
    "PercentileView",
    "QueryFailed",
    "RankView",
    "ScoreAtPercentile",
    "ScoreAtPercentileView",
    "ScoreEvent",
    "Standing",
    "SubmitResult",
    "SubmitStatus",
    "Table",
    "TableInfo",
    "TopView",
    "View",
    "connect_sync",
    "new_idempotency_key",
    "verify_signature",
    "ws_url",
]

"""Load generators and peer benchmarks for Arena.

Run ``python -m loadtest --help``. Modules:

* ``workload``     the seeded event stream (pure)
* ``ingest``       the game-server simulator's driver: frames in flight, every ack checked
* ``process``      servers in child processes: start on a free port, wait until ready, stop
                   (``arena serve``, redis-server and the ceiling app here, and in the tests)
* ``config_toml``  config.toml text of an ``arena.config.Config`` (also the tests' writer)
* ``arena_client`` the benchmark board's server; the pipelining WebSocket client
* ``httpclient``   a tiny keep-alive HTTP/1.1 client on a raw asyncio Protocol
* ``query``        query phases (HTTP and WS), latency per request
* ``arena_run``    prefill, ingest, queries, lag probe against Arena
* ``ceiling``      a bare uvicorn ASGI app: the HTTP ceiling
* ``resp``         a RESP2 client on a raw asyncio Protocol, many commands in flight
* ``redis_server`` a private redis-server (AOF fsync always)
* ``redis_peer``   the same work against Redis 7 (Lua per frame); ``redis_query`` its queries
* ``compare``      all of it, one table; ``rebuild`` times ``arena rebuild``
* ``bench_engine`` the engine alone, in process: one table, one replay
* ``cluster``      nodes on one PostgreSQL: ingest, takeover; ``nodes`` starts them, ``handoff``
                   the rolling restart under ingest, ``before_after`` two source trees compared
"""

"""A game server's code as its author writes it, for `mypy --strict --disallow-any-expr` against
the installed distribution (test_standalone.py): every public method of both clients, each value
checked with `assert_type`, so nothing a user touches is `Any` (never run, only type-checked)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import assert_type

from arena_client import (
    ArenaClient,
    ArenaClientError,
    ArenaClientSync,
    AroundView,
    AuthenticationError,
    Backoff,
    ClientStats,
    ConnectionFailed,
    Entry,
    EventRejected,
    Members,
    MembersView,
    Percentile,
    PercentileView,
    QueryFailed,
    RankView,
    ScoreAtPercentile,
    ScoreAtPercentileView,
    ScoreEvent,
    Standing,
    SubmitResult,
    SubmitStatus,
    Table,
    TopView,
    connect_sync,
    new_idempotency_key,
    ws_url,
)


async def game_server(url: str, token: str) -> None:
    async with ArenaClient([url, url], token, linger=0.005, max_in_flight=8, give_up_after=None) as arena:
        assert_type(arena, ArenaClient)
        result = await arena.submit("high_score", "alice", 1200, occurred_at=datetime.now(timezone.utc),
                                    idempotency_key=new_idempotency_key(), meta={"match": 7, "map": ["a", 1]})
        assert_type(result, SubmitResult)
        assert_type(result.status, SubmitStatus)
        assert_type(result.recorded, bool)
        assert_type(result.reason, str | None)
        assert_type(result.message, str | None)
        assert_type(result.raise_for_status(), SubmitResult)
        results = await arena.submit_many([ScoreEvent("high_score", "bob", 900, 1_765_000_000_000)])
        assert_type(results, list[SubmitResult])
        table = await arena.top("high_score", "daily", limit=10, offset=0, period_id=None)
        assert_type(table, Table)
        assert_type(table.entries, tuple[Entry, ...])
        for entry in table.entries:
            assert_type(entry.rank, int)
            assert_type(entry.member, str)
            assert_type(entry.score, int)
            assert_type(entry.reached_at, datetime)
            assert_type(entry.reached_at_ms, int)
        assert_type(table.start, datetime | None)
        assert_type(table.seq, int)
        assert_type(table.size, int)
        assert_type(table.closed, bool)
        assert_type(table.period_id, str)
        standing = await arena.rank("high_score", "daily", "alice")
        assert_type(standing, Standing)
        assert_type(standing.entry, Entry | None)
        assert_type(await arena.around("high_score", "daily", "alice", radius=2), Table)
        assert_type(await arena.around("high_score", "daily", rank=1), Table)
        percentile = await arena.percentile("high_score", "daily", "alice")
        assert_type(percentile, Percentile)
        assert_type(percentile.top_percent, float | None)
        at = await arena.score_at_percentile("high_score", "daily", 10.0)
        assert_type(at, ScoreAtPercentile)
        assert_type(at.entry, Entry | None)
        friends = await arena.members("high_score", "daily", ["alice", "zed"])
        assert_type(friends, Members)
        assert_type(friends.missing, tuple[str, ...])
        await arena.ping()
        assert_type(arena.stats, ClientStats)
        assert_type(arena.stats.frames_sent, int)
        assert_type(arena.connected, bool)
        assert_type(arena.url, str)
        async for top in arena.subscribe(TopView("high_score", "daily", limit=10)):
            assert_type(top, Table)
            break
        async for mine in arena.subscribe(RankView("high_score", "daily", "alice")):
            assert_type(mine, Standing)
            break
        async for near in arena.subscribe(AroundView("high_score", "daily", member="alice", radius=3)):
            assert_type(near, Table)
            break
        async for share in arena.subscribe(PercentileView("high_score", "daily", "alice")):
            assert_type(share, Percentile)
            break
        async for cut in arena.subscribe(ScoreAtPercentileView("high_score", "daily", 10.0)):
            assert_type(cut, ScoreAtPercentile)
            break
        async for crowd in arena.subscribe(MembersView("high_score", "daily", ("alice", "bob"))):
            assert_type(crowd, Members)
            break
    reader = await ArenaClient(url).connect()  # no token: the public /v1/live, reads only
    await reader.close(timeout=1.0)


def script(url: str, token: str) -> None:
    with connect_sync(url, token, linger=0.01, retry_unavailable_for=5.0) as arena:
        assert_type(arena, ArenaClientSync)
        assert_type(arena.submit("high_score", "carol", 5, meta=None), SubmitResult)
        assert_type(arena.submit_many([{"board": "high_score", "member": "dan", "value": 3}]), list[SubmitResult])
        assert_type(arena.top("high_score", "daily"), Table)
        assert_type(arena.rank("high_score", "daily", "carol"), Standing)
        assert_type(arena.around("high_score", "daily", "carol"), Table)
        assert_type(arena.percentile("high_score", "daily", "carol"), Percentile)
        assert_type(arena.score_at_percentile("high_score", "daily", 50.0), ScoreAtPercentile)
        assert_type(arena.members("high_score", "daily", ["carol"]), Members)
        arena.ping()
        assert_type(arena.stats, ClientStats)
        assert_type(arena.connected, bool)
        assert_type(arena.url, str)
        for top in arena.subscribe(TopView("high_score", "daily")):
            assert_type(top, Table)
            break
        for mine in arena.subscribe(RankView("high_score", "daily", "carol")):
            assert_type(mine.entry, Entry | None)
            break
    reader = ArenaClientSync(url)
    reader.close()


def errors() -> None:
    try:
        script("http://127.0.0.1:8080", "token")
    except EventRejected as exc:
        assert_type(exc.reason, str)
        assert_type(exc.idempotency_key, str | None)
        assert_type(exc.message, str | None)
    except QueryFailed as exc:
        assert_type(exc.code, str)
        assert_type(exc.message, str)
    except AuthenticationError as exc:
        assert_type(exc.status, int)
    except ConnectionFailed as exc:
        assert_type(exc.idempotency_keys, tuple[str, ...])
    except ArenaClientError:
        pass
    assert_type(Backoff(0.05, 2.0).next(), float)
    assert_type(ws_url("http://127.0.0.1:8080"), str)
    asyncio.run(game_server("http://127.0.0.1:8080", "token"))

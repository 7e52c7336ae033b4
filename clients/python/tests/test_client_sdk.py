"""The client against a real in-process server: submitting, batching, pipelining, retries,
errors, typed query answers and the synchronous wrapper."""

from __future__ import annotations

import asyncio
import logging
import random
import re
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import httpx
import pytest

import arena.board.actor
from arena.board.load import load
from arena.journal.sqlite import journal_path
from arena_client import (
    ArenaClient,
    AuthenticationError,
    Backoff,
    ClientClosed,
    ConnectionFailed,
    Entry,
    EventFields,
    EventRejected,
    FrameTooLarge,
    Members,
    MembersView,
    QueryFailed,
    ScoreEvent,
    Standing,
    SubmitStatus,
    Table,
    connect_sync,
    new_idempotency_key,
    ws_url,
)
from loadtest.process import free_socket
from support.server import ADMIN_TOKEN, InProcessServer, make_config, now_ms, token_for, until

BOARDS: dict[str, dict[str, Any]] = {
    "b": {"aggregation": "best", "periods": ["alltime", "daily"]},
    "other": {"aggregation": "sum"},
}



def journal_keys(data_dir: Path, board: str) -> list[str]:
    db = sqlite3.connect(f"file:{journal_path(data_dir, board)}?mode=ro", uri=True)
    try:
        return [k for (k,) in db.execute("SELECT idempotency_key FROM score_event ORDER BY seq")]
    finally:
        db.close()


pytestmark = pytest.mark.server(BOARDS, {"gs": ["*"], "narrow": ["other"]})

async def test_submit_returns_accepted_and_the_event_is_visible_at_once(server: InProcessServer) -> None:
    async with ArenaClient(server.url, token_for("gs")) as client:
        result = await client.submit("b", "alice", 1200, meta={"match": 7})
        assert result.status is SubmitStatus.ACCEPTED and result.recorded and result.reason is None
        standing = await client.rank("b", "daily", "alice")
    assert standing.entry is not None and standing.entry.rank == 1 and standing.entry.score == 1200 and standing.size == 1


async def test_generated_keys_are_unique_uuid7_and_stable_across_a_retry(server: InProcessServer) -> None:
    keys = {new_idempotency_key() for _ in range(10_000)}
    assert len(keys) == 10_000
    assert all(k[14] == "7" for k in keys)  # version nibble
    async with ArenaClient(server.url, token_for("gs")) as client:
        results = await client.submit_many([ScoreEvent("b", f"m{i}", i) for i in range(50)])
    assert len({r.idempotency_key for r in results}) == 50
    assert journal_keys(server.config.server.data_dir, "b") == [r.idempotency_key for r in results]


async def test_a_resent_key_comes_back_duplicate_which_counts_as_recorded(server: InProcessServer) -> None:
    at = now_ms()
    async with ArenaClient(server.url, token_for("gs")) as client:
        first = await client.submit("b", "alice", 5, occurred_at=at, idempotency_key="k1")
        again = await client.submit("b", "alice", 5, occurred_at=at, idempotency_key="k1")
        assert first.status is SubmitStatus.ACCEPTED
        assert again.status is SubmitStatus.DUPLICATE and again.recorded
        with pytest.raises(EventRejected) as reused:
            await client.submit("b", "alice", 6, occurred_at=at, idempotency_key="k1")
    assert reused.value.reason == "idempotency_key_reused" and reused.value.idempotency_key == "k1"


async def test_rejected_events_raise_event_rejected_with_reason_and_key(server: InProcessServer) -> None:
    async with ArenaClient(server.url, token_for("narrow")) as client:
        with pytest.raises(EventRejected) as out_of_range:
            await client.submit("other", "m", -1, idempotency_key="neg")
        with pytest.raises(EventRejected) as forbidden:
            await client.submit("b", "m", 1)
        with pytest.raises(EventRejected) as future:
            await client.submit("other", "m", 1, occurred_at=now_ms() + 3_600_000)
        with pytest.raises(EventRejected) as unknown:
            await client.submit("nope", "m", 1)
    assert (out_of_range.value.reason, out_of_range.value.idempotency_key) == ("value_out_of_range", "neg")
    assert forbidden.value.reason == "forbidden"
    assert future.value.reason == "occurred_in_future"
    assert unknown.value.reason == "unknown_board"
    assert isinstance(out_of_range.value.idempotency_key, str)
    assert out_of_range.value.message is not None and out_of_range.value.message.startswith("value: must be an integer within")
    assert unknown.value.message == 'board: no board named "nope"' and unknown.value.message in str(unknown.value)


async def test_submit_many_reports_each_result_in_order_without_raising(server: InProcessServer) -> None:
    at = now_ms()
    events: list[ScoreEvent | EventFields] = [
        ScoreEvent("b", "a", 1, at, "e1"),
        {"board": "b", "member": "b", "value": -5, "idempotency_key": "e2"},
        ScoreEvent("b", "c", 3, datetime.now(timezone.utc), "e3"),
        ScoreEvent("b", "a", 1, at, "e1"),
        ScoreEvent("b", "d", 4, "2026-01-01T00:00:00Z", "e4"),
    ]
    async with ArenaClient(server.url, token_for("gs")) as client:
        results = await client.submit_many(events)
    assert [(r.idempotency_key, r.status.value, r.reason) for r in results] == [
        ("e1", "accepted", None),
        ("e2", "rejected", "value_out_of_range"),
        ("e3", "accepted", None),
        ("e1", "duplicate", None),
        ("e4", "accepted", None),
    ]
    with pytest.raises(EventRejected):
        results[1].raise_for_status()
    assert results[0].raise_for_status() is results[0]


async def test_concurrent_submits_are_batched_into_few_frames(server: InProcessServer) -> None:
    async with ArenaClient(server.url, token_for("gs"), linger=0.05, max_batch=1000) as client:
        results = await asyncio.gather(*(client.submit("b", f"m{i}", i) for i in range(2000)))
        stats = client.stats
    assert all(r.status is SubmitStatus.ACCEPTED for r in results)
    assert stats.events_sent == 2000
    assert stats.frames_sent <= 4  # 2000 events made in one loop turn: two full frames, give or take
    assert len(journal_keys(server.config.server.data_dir, "b")) == 2000


async def test_submit_many_splits_at_max_batch_and_pipelines_up_to_max_in_flight(server: InProcessServer) -> None:
    async with ArenaClient(server.url, token_for("gs"), max_batch=10, max_in_flight=3) as client:
        results = await client.submit_many(ScoreEvent("b", f"m{i % 7}", i) for i in range(305))
        stats = client.stats
    assert len(results) == 305 and all(r.recorded for r in results)
    assert stats.frames_sent == 31
    assert 1 <= stats.peak_in_flight <= 3


async def test_a_single_event_never_waits_for_more_than_the_linger(server: InProcessServer) -> None:
    async with ArenaClient(server.url, token_for("gs"), linger=0.001) as client:
        for i in range(5):
            assert (await client.submit("b", "solo", i)).recorded
        assert client.stats.frames_sent == 5


async def test_the_server_refusing_a_batch_size_halves_max_batch_and_resends(tmp_path: Path) -> None:
    config = make_config(tmp_path, BOARDS, max_batch=100)
    async with InProcessServer(config) as server:
        async with ArenaClient(server.url, token_for("gs"), max_batch=400, linger=0.05) as client:
            results = await client.submit_many(ScoreEvent("b", f"m{i}", i) for i in range(400))
            assert client.max_batch <= 100
    assert all(r.status is SubmitStatus.ACCEPTED for r in results)
    assert len(journal_keys(tmp_path, "b")) == 400


async def test_an_unknown_token_fails_the_handshake_with_authentication_error(server: InProcessServer) -> None:
    with pytest.raises(AuthenticationError) as refused:
        async with ArenaClient(server.url, "not-a-token"):
            pass
    assert refused.value.status in (401, 403)
    with pytest.raises(AuthenticationError):
        async with ArenaClient(server.url, ADMIN_TOKEN):  # an admin token is not a game-server token
            pass


async def test_a_server_with_a_smaller_frame_limit_fails_the_calls_instead_of_resending_forever(tmp_path: Path) -> None:
    config = make_config(tmp_path, BOARDS, max_frame_bytes=4096)
    async with InProcessServer(config) as server:
        async with ArenaClient(server.url, token_for("gs"), reconnect_base=0.01) as client:
            events = [ScoreEvent("b", f"member-{i:04}", i, idempotency_key=f"big-{i:04}") for i in range(200)]
            with pytest.raises(FrameTooLarge):
                await asyncio.wait_for(client.submit_many(events), 10)
            with pytest.raises(FrameTooLarge):
                await client.submit("b", "x", 1)
        assert journal_keys(tmp_path, "b") == []


async def test_nothing_listening_gives_connection_failed_after_give_up(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="arena.client")
    sock = free_socket()  # bound, never listening: connections are refused
    port = sock.getsockname()[1]
    try:
        url = f"http://127.0.0.1:{port}"
        with pytest.raises(ConnectionFailed):
            async with ArenaClient(url, token_for("gs"), give_up_after=0.3, reconnect_base=0.01):
                pass
    finally:
        sock.close()
    # each failed attempt while it retried was said, with the URL and the next wait: never a silent wait
    retries = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "retrying in" in r.getMessage()]
    assert retries, caplog.text
    pattern = rf"arena client: connect to ws://127\.0\.0\.1:{port}/v1/ws failed \(.+\); retrying in \d+\.\d\ds \(down \d+\.\ds of 0\.3s\)"
    assert all(re.fullmatch(pattern, message) for message in retries), retries


async def test_unavailable_is_retried_with_the_same_key_until_accepted(server: InProcessServer) -> None:
    async with ArenaClient(server.url, token_for("gs"), reconnect_base=0.01) as client, \
            httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.post("/v1/_test/boards/b/crash", json={"times": 1})).status_code == 200
        result = await client.submit("b", "phoenix", 9, idempotency_key="retry-me")
        assert result.status is SubmitStatus.ACCEPTED
        assert client.stats.events_resent >= 1
        assert (await client.rank("b", "alltime", "phoenix")).entry == Entry(1, "phoenix", 9, ANY)
    assert journal_keys(server.config.server.data_dir, "b").count("retry-me") == 1


async def test_unavailable_surfaces_as_rejected_after_retry_unavailable_for(tmp_path: Path) -> None:
    config = make_config(tmp_path, BOARDS, max_restarts=0)
    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        async with ArenaClient(server.url, token_for("gs"), retry_unavailable_for=0.2, reconnect_base=0.01) as client:
            assert (await http.post("/v1/_test/boards/b/crash", json={"times": 1})).status_code == 200
            with pytest.raises(EventRejected) as failed:
                await client.submit("b", "m", 1, idempotency_key="doomed")
    assert (failed.value.reason, failed.value.idempotency_key) == ("unavailable", "doomed")


async def test_a_query_answered_not_ready_is_sent_again_until_the_board_has_loaded(tmp_path: Path, monkeypatch: Any) -> None:
    loading = asyncio.Event()

    async def held_load(*args: Any, **kwargs: Any) -> Any:
        await loading.wait()
        return await load(*args, **kwargs)

    monkeypatch.setattr(arena.board.actor, "load", held_load)
    async with InProcessServer(make_config(tmp_path, {"b": {}}), wait_ready=False) as server:
        try:
            async with ArenaClient(server.url, token_for("gs"), reconnect_base=0.01, reconnect_max=0.05) as client:
                query = asyncio.ensure_future(client.top("b", "alltime"))

                def sent_again_and_again() -> bool:  # answered not_ready, sent again, and again
                    assert not query.done(), query.exception()
                    return client.stats.queries_sent >= 3

                await until(sent_again_and_again, "the query to be sent three times")
                loading.set()
                assert (await asyncio.wait_for(query, 10)).size == 0
        finally:
            loading.set()  # a server stops once its boards have loaded

    loading = asyncio.Event()
    (tmp_path / "2").mkdir()
    async with InProcessServer(make_config(tmp_path / "2", {"b": {}}), wait_ready=False) as server:
        try:
            async with ArenaClient(server.url, token_for("gs"), retry_unavailable_for=0.1) as client:
                with pytest.raises(QueryFailed) as failed:
                    await client.top("b", "alltime")  # still loading after retry_unavailable_for
        finally:
            loading.set()
    assert failed.value.code == "not_ready"


async def test_queries_return_typed_frozen_answers(server: InProcessServer) -> None:
    at = now_ms()
    async with ArenaClient(server.url, token_for("gs")) as client:
        await client.submit_many(ScoreEvent("b", f"p{i}", i * 10, at - i) for i in range(1, 11))
        top = await client.top("b", "daily", limit=3)
        page = await client.top("b", "alltime", limit=3, offset=8)
        around = await client.around("b", "daily", "p5", radius=1)
        around_rank = await client.around("b", "daily", rank=1, radius=1)
        percentile = await client.percentile("b", "daily", "p9")
        at_p = await client.score_at_percentile("b", "daily", 50)
        await client.ping()
        missing = await client.rank("b", "daily", "nobody")
        present = await client.rank("b", "daily", "p3", period_id=top.period_id)
        with pytest.raises(QueryFailed) as no_percentile:
            await client.percentile("b", "daily", "nobody")
        with pytest.raises(QueryFailed) as bad_period:
            await client.top("b", "hourly")
        with pytest.raises(QueryFailed) as bad_p:
            await client.score_at_percentile("b", "daily", 0)
    assert isinstance(top, Table) and top.size == 10 and top.period == "daily" and not top.closed
    assert [e.member for e in top.entries] == ["p10", "p9", "p8"]
    assert top.entries[0] == Entry(1, "p10", 100, top.entries[0].reached_at)
    assert top.entries[0].reached_at_ms == at - 10
    assert top.start is not None and top.end is not None and top.start.tzinfo is not None
    assert page.start is None and page.end is None and [e.rank for e in page.entries] == [9, 10]
    assert [e.member for e in around.entries] == ["p6", "p5", "p4"]
    assert [e.rank for e in around_rank.entries] == [1, 2]
    assert percentile.entry is not None and percentile.entry.rank == 2 and percentile.top_percent == 20.0
    assert at_p.entry is not None and at_p.entry.rank == 5 and at_p.p == 50.0
    assert isinstance(missing, Standing) and missing.entry is None  # a state, as in a live view
    assert (missing.board, missing.period, missing.period_id, missing.size) == ("b", "daily", top.period_id, 10)
    assert missing.seq >= top.seq
    assert present.entry == Entry(8, "p3", 30, ANY)
    assert no_percentile.value.code == "member_not_found"
    assert bad_period.value.code == "unknown_period"
    assert bad_p.value.code == "invalid_request"
    with pytest.raises(AttributeError):
        top.size = 3  # type: ignore[misc]


async def test_members_returns_the_friends_in_rank_order_and_the_missing_in_request_order(server: InProcessServer) -> None:
    at = now_ms()
    async with ArenaClient(server.url, token_for("gs")) as client:
        await client.submit_many(ScoreEvent("b", f"p{i}", i * 10, at) for i in range(1, 6))
        friends = await client.members("b", "daily", ["p2", "zed", "p4", "p2", "amy"])
        live = client.subscribe(MembersView("b", "daily", ("p1", "new")))
        assert (await anext(live)).missing == ("new",)
        await client.submit("b", "new", 1000)
        assert [e.member for e in (await anext(live)).entries] == ["new", "p1"]
        await live.aclose()
        with pytest.raises(QueryFailed) as empty:
            await client.members("b", "daily", [])
    assert isinstance(friends, Members) and friends.size == 5 and friends.period == "daily"
    assert [(e.rank, e.member, e.score) for e in friends.entries] == [(2, "p4", 40), (4, "p2", 20)]
    assert friends.missing == ("zed", "amy")
    assert empty.value.code == "invalid_request"


async def test_query_with_period_id_selects_that_table(server: InProcessServer) -> None:
    async with ArenaClient(server.url, token_for("gs")) as client:
        await client.submit("b", "x", 1)
        today = (await client.top("b", "daily")).period_id
        same = await client.top("b", "daily", period_id=today)
        with pytest.raises(QueryFailed) as future:
            await client.top("b", "daily", period_id="2999-01-01")
    assert same.period_id == today and same.size == 1
    assert future.value.code == "unknown_period"


async def test_calls_after_close_raise_client_closed(server: InProcessServer) -> None:
    client = ArenaClient(server.url, token_for("gs"))
    with pytest.raises(ClientClosed):
        await client.submit("b", "m", 1)
    await client.connect()
    await client.close()
    await client.close()  # twice is fine
    with pytest.raises(ClientClosed):
        await client.submit("b", "m", 1)


async def test_close_flushes_events_still_lingering(server: InProcessServer) -> None:
    client = await ArenaClient(server.url, token_for("gs"), linger=10.0).connect()
    pending = [asyncio.ensure_future(client.submit("b", f"m{i}", i)) for i in range(20)]
    await asyncio.sleep(0)  # one turn: the submits run up to their wait, their events lingering
    await client.close()
    assert all(p.result().recorded for p in pending)


async def test_a_value_that_cannot_be_sent_fails_at_the_call(server: InProcessServer) -> None:
    async with ArenaClient(server.url, token_for("gs")) as client:
        with pytest.raises(ValueError):
            await client.submit("b", "m", 1, occurred_at=datetime(2026, 1, 1))  # naive
        with pytest.raises(TypeError):
            await client.submit("b", "m", 1, meta={"x": object()})  # type: ignore[dict-item]
        with pytest.raises(ValueError):
            await client.submit("b", "m", 1, meta={"blob": "x" * 2_000_000})
        assert (await client.submit("b", "m", 1)).recorded  # the client still works


def test_urls_map_to_the_ingest_endpoint() -> None:
    assert ws_url("http://h:1") == "ws://h:1/v1/ws"
    assert ws_url("https://h") == "wss://h/v1/ws"
    assert ws_url("ws://h:1/v1/ws") == "ws://h:1/v1/ws"
    with pytest.raises(ValueError):
        ws_url("ftp://h")


async def test_the_sync_wrapper_has_the_same_methods_and_batches_threads(server: InProcessServer) -> None:
    def script() -> tuple[list[str], int | None, int]:
        with connect_sync(server.url, token_for("gs"), linger=0.02) as client:
            assert client.submit("b", "s0", 1).status is SubmitStatus.ACCEPTED
            results = client.submit_many([ScoreEvent("b", f"s{i}", i) for i in range(1, 100)])
            with pytest.raises(EventRejected):
                client.submit("b", "s", -1)
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(8) as pool:
                threaded = list(pool.map(lambda i: client.submit("b", f"t{i}", i), range(200)))
            top = client.top("b", "daily", limit=2)
            rank = client.rank("b", "daily", "s50")
            client.around("b", "daily", "s50", radius=2)
            client.percentile("b", "daily", "s50")
            client.score_at_percentile("b", "daily", 100)
            assert client.members("b", "daily", ["s50", "nobody"]).missing == ("nobody",)
            client.ping()
            assert client.rank("b", "daily", "nobody").entry is None
            assert all(r.recorded for r in results + threaded)
            frames = client.stats.frames_sent
        with pytest.raises(ClientClosed):
            client.submit("b", "late", 1)
        return [e.member for e in top.entries], rank.entry.score if rank.entry else None, frames

    members, score, frames = await asyncio.to_thread(script)
    assert members == ["t199", "t198"] and score == 50
    assert frames < 1 + 1 + 1 + 200  # the threads' submits shared frames


async def test_the_sync_wrapper_raises_authentication_error_at_connect(server: InProcessServer) -> None:
    def script() -> None:
        with pytest.raises(AuthenticationError):
            connect_sync(server.url, "wrong")

    await asyncio.to_thread(script)


async def test_submit_many_with_one_unsendable_event_sends_none(server: InProcessServer) -> None:
    async with ArenaClient(server.url, token_for("gs")) as client:
        with pytest.raises(TypeError):
            await client.submit_many([ScoreEvent("b", "ok", 1), ScoreEvent("b", "bad", 1, meta={"x": object()})])  # type: ignore[dict-item]
        await client.ping()
        assert client.stats.events_sent == 0
    assert journal_keys(server.config.server.data_dir, "b") == []


async def test_a_cancelled_submit_that_was_not_sent_is_dropped(server: InProcessServer) -> None:
    async with ArenaClient(server.url, token_for("gs"), linger=10.0, max_batch=1000) as client:
        waiting = asyncio.ensure_future(client.submit("b", "gone", 1))
        await asyncio.sleep(0)  # one turn: the submit runs up to its wait, its event queued (lingering)
        waiting.cancel()
        kept = await client.submit_many([ScoreEvent("b", f"m{i}", i) for i in range(1000)])  # a full batch goes at once
        assert all(r.recorded for r in kept)
    assert len(journal_keys(server.config.server.data_dir, "b")) == 1000


def test_reconnect_backoff_doubles_up_to_its_cap_with_equal_jitter() -> None:
    # the schedule alone: timing it through a socket would be flaky
    backoff = Backoff(0.05, 2.0, rng=random.Random(7))
    delays = [backoff.next() for _ in range(10)]
    for n, delay in enumerate(delays):
        ceiling = min(2.0, 0.05 * 2**n)
        assert ceiling / 2 <= delay <= ceiling, (n, delay)
    assert delays[-1] >= 1.0  # capped at 2 s, never below half of it
    backoff.reset()
    assert 0.025 <= backoff.next() <= 0.05
    other = Backoff(0.05, 2.0, rng=random.Random(8))
    assert [other.next() for _ in range(10)] != delays  # jitter: clients do not reconnect in step

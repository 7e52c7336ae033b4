"""Verifiable standings: the digest route, `arena verify` against a running server (also while
events keep arriving, and with a journal changed behind the server's back), and digest equality
after a restart and in `arena rebuild`'s output; on both journal backends."""

from __future__ import annotations

import asyncio
import hashlib
import signal
import sqlite3
from pathlib import Path
from typing import Any

import httpx

from arena.api import queries
from arena.client import ArenaClient, ScoreEvent
from arena.config import JournalSettings
from arena.engine.times import parse_rfc3339_ms
from arena.journal.sqlite import journal_path
from loadtest.config_toml import write_config
from support.arena_cli import arena, rebuild_digests, run_arena
from support.postgres import fetchval
from support.server import (
    ChildServer,
    Client,
    InProcessServer,
    clear_of_an_hour_boundary,
    event,
    make_config,
    now_ms,
    token_for,
    until,
)

HOUR = 3_600_000
BOARDS = {
    "hs": {"aggregation": "best", "periods": ["alltime", "daily", "hourly"]},
    "kills": {"aggregation": "sum", "periods": ["alltime", "weekly", "monthly"]},
    "last": {"aggregation": "latest", "order": "asc", "tie": "latest", "periods": ["alltime", "hourly"]},
}



def contract_sha256(entries: list[dict[str, Any]]) -> str:
    text = "".join(f"{e['rank']}\t{e['member']}\t{e['score']}\t{parse_rfc3339_ms(e['reached_at'])}\n" for e in entries)
    return hashlib.sha256(text.encode()).hexdigest()


async def served_digests(url: str, boards: dict[str, Any] = BOARDS) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Every listed table's digest body, by (board, period, period_id)."""
    found = {}
    async with httpx.AsyncClient(base_url=url) as http:
        for board, body in boards.items():
            for period in body["periods"]:
                listing = (await http.get(f"/v1/boards/{board}/{period}/periods")).json()
                for p in listing["periods"]:
                    d = (await http.get(f"/v1/boards/{board}/{period}/digest", params={"period_id": p["period_id"]})).json()
                    found[(board, period, p["period_id"])] = d
    return found


def child(tmp_path: Path, journal: JournalSettings, boards: dict[str, Any] = BOARDS) -> ChildServer:
    config = make_config(tmp_path / "data", boards, journal=journal)
    return ChildServer(write_config(config, tmp_path / "config.toml"))


async def fill(url: str, n: int = 600) -> None:
    at = now_ms()
    async with ArenaClient(url, token_for("gs")) as client:
        events = [ScoreEvent(b, f"m{i % 53}", (i * 7919) % 1000, at - (i % 50) * 1000) for i in range(n) for b in BOARDS]
        assert all(r.recorded for r in await client.submit_many(events))


async def rewrite_score(journal: JournalSettings, data_dir: Path, board: str, key: str, value: int) -> None:
    """Change a journaled event's value in the store, behind the server's back."""
    if journal.backend == "sqlite":
        db = sqlite3.connect(journal_path(data_dir, board), timeout=10)
        with db:
            assert db.execute("UPDATE score_event SET value = ? WHERE idempotency_key = ?", (value, key)).rowcount == 1
        db.close()
        return
    assert journal.url is not None
    updated = await fetchval(journal.url, f"WITH u AS (UPDATE {journal.schema}.score_event SET value = $1"
                             " WHERE board = $2 AND idempotency_key = $3 RETURNING 1) SELECT count(*) FROM u",
                             value, board, key.encode())
    assert updated == 1


# -- the digest route ----------------------------------------------------------------------------


async def test_digest_is_the_sha256_of_the_contract_text_and_carries_seq(tmp_path: Path) -> None:
    async with InProcessServer(make_config(tmp_path, BOARDS)) as server, httpx.AsyncClient(base_url=server.url) as http:
        empty = (await http.get("/v1/boards/hs/daily/digest")).json()
        assert empty["sha256"] == hashlib.sha256(b"").hexdigest() and empty["size"] == 0 and empty["seq"] == 0
        await fill(server.url, 200)
        for board, period in [("hs", "daily"), ("kills", "alltime"), ("last", "hourly")]:
            digest = (await http.get(f"/v1/boards/{board}/{period}/digest")).json()
            top = (await http.get(f"/v1/boards/{board}/{period}/top", params={"limit": 1000})).json()
            assert {k: digest[k] for k in ("board", "period", "period_id", "start", "end", "closed", "size")} == \
                {k: top[k] for k in ("board", "period", "period_id", "start", "end", "closed", "size")}
            assert digest["sha256"] == contract_sha256(top["entries"])
            assert digest["seq"] == 200  # every record of this board's journal so far
        assert (await http.get("/v1/boards/hs/daily/digest", params={"period_id": "nope"})).status_code == 404


class HeldSteps:
    """Stands in for `asyncio` in `arena.api.queries`: the digest's first pause between two
    steps waits for ``resume``, so the test can change the table mid-digest."""

    def __init__(self) -> None:
        self.paused = asyncio.Event()
        self.resume = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        if not self.paused.is_set():
            self.paused.set()
            await self.resume.wait()
        await asyncio.sleep(seconds)


async def test_a_digest_hashes_in_steps_and_describes_the_table_at_its_seq(tmp_path: Path, monkeypatch: Any) -> None:
    # a 1M-entry table takes over a second to hash: the loop runs (ingest, other queries)
    # between steps, and what is applied meanwhile must not leak into the digest
    steps = HeldSteps()
    monkeypatch.setattr(queries, "asyncio", steps)
    monkeypatch.setattr(queries, "DIGEST_STEP", 8)
    async with InProcessServer(make_config(tmp_path, {"hs": BOARDS["hs"]})) as server, \
            httpx.AsyncClient(base_url=server.url) as http, ArenaClient(server.url, token_for("gs")) as client:
        at = now_ms()
        assert all(r.recorded for r in await client.submit_many(ScoreEvent("hs", f"m{i}", i, at) for i in range(100)))
        entries = (await http.get("/v1/boards/hs/alltime/top", params={"limit": 1000})).json()["entries"]
        request = asyncio.create_task(http.get("/v1/boards/hs/alltime/digest"))
        await asyncio.wait_for(steps.paused.wait(), 5)
        late = await client.submit_many([ScoreEvent("hs", "late", 10**6, at), ScoreEvent("hs", "m5", 10**5, at)])
        assert all(r.recorded for r in late)
        rank = (await http.get("/v1/boards/hs/alltime/members/late")).json()  # answered mid-digest
        steps.resume.set()
        body = (await request).json()
        now = (await http.get("/v1/boards/hs/alltime/digest")).json()
    assert rank["entry"]["rank"] == 1
    assert (body["seq"], body["size"], body["sha256"]) == (100, 100, contract_sha256(entries))
    assert (now["seq"], now["size"]) == (102, 101) and now["sha256"] != body["sha256"]


async def test_member_names_with_tabs_would_be_ambiguous_so_control_characters_are_refused(tmp_path: Path) -> None:
    async with InProcessServer(make_config(tmp_path, BOARDS)) as server:
        client = await Client.connect(server.ws_url, token_for("gs"))
        [result] = await client.submit([event("hs", "a\tb", 1, now_ms(), "tab")])
        await client.close()
    assert result["reason"] == "invalid_event"


# -- arena verify ---------------------------------------------------------------------------------


async def test_verify_passes_while_events_keep_arriving(tmp_path: Path, served_journal: JournalSettings) -> None:
    server = child(tmp_path, served_journal)
    await asyncio.to_thread(server.start)
    stop = asyncio.Event()
    written = 0

    async def writer() -> None:
        nonlocal written
        async with ArenaClient(server.url, token_for("gs"), linger=0.001) as client:
            while not stop.is_set():
                at = now_ms()
                await client.submit_many(ScoreEvent(b, f"w{written % 97}", written % 1000, at) for b in BOARDS)
                written += 1

    try:
        await fill(server.url)
        task = asyncio.create_task(writer())
        await until(lambda: written >= 20, "the writer's first 20 frames")
        before = written
        code, out, err = await run_arena("verify", "--config", server.config_path, "--url", server.url)
        during = written - before
        stop.set()
        await task
    finally:
        server.kill()
    assert code == 0, out + err
    assert "MISMATCH" not in out
    assert during > 0, "the writer did not run during verify"
    checked = [line for line in out.splitlines() if line.startswith("ok\t")]
    assert len(checked) >= 8  # hs: alltime, daily, hourly; kills: alltime, weekly, monthly; last: alltime, hourly
    assert "0 mismatched" in err


async def test_verify_fails_on_a_journal_changed_behind_the_servers_back(tmp_path: Path, served_journal: JournalSettings) -> None:
    boards = {"hs": {"aggregation": "best", "periods": ["alltime"]}}
    server = child(tmp_path, served_journal, boards)
    await asyncio.to_thread(server.start)
    try:
        at = now_ms()
        async with ArenaClient(server.url, token_for("gs")) as client:
            await client.submit_many(ScoreEvent("hs", f"m{i}", 100 - i, at, f"k{i}") for i in range(10))
        code, out, err = await run_arena("verify", "--config", server.config_path, "--url", server.url)
        assert code == 0, out + err
        # m3 is rank 4 with 97: rewrite its journaled score to 1 (the server's tables do not change)
        await rewrite_score(served_journal, tmp_path / "data", "hs", "k3", 1)
        code, out, err = await run_arena("verify", "--config", server.config_path, "--url", server.url)
    finally:
        server.kill()
    assert code == 1, out + err
    mismatch = [line for line in out.splitlines() if line.startswith("MISMATCH")]
    assert len(mismatch) == 1 and "hs/alltime/alltime" in mismatch[0]
    assert "first differing rank 4" in mismatch[0]
    assert "1 mismatched" in err


async def test_verify_reports_an_unreachable_server_clearly(tmp_path: Path) -> None:
    config = write_config(make_config(tmp_path / "data", BOARDS), tmp_path / "config.toml")
    code, _out, err = await run_arena("verify", "--config", config, "--url", "http://127.0.0.1:9")
    assert code == 2 and "Traceback" not in err and "arena verify:" in err


# -- restart and rebuild ---------------------------------------------------------------------------


async def test_digests_are_equal_after_a_restart_and_in_arena_rebuild(tmp_path: Path, served_journal: JournalSettings) -> None:
    await clear_of_an_hour_boundary()
    server = child(tmp_path, served_journal)
    await asyncio.to_thread(server.start)
    try:
        await fill(server.url)
        before = await served_digests(server.url)
        server.signal(signal.SIGTERM)
        assert await asyncio.to_thread(server.wait) == 0
        run = await asyncio.to_thread(arena, "rebuild", "--config", server.config_path)
        assert run.returncode == 0, run.stderr
        rebuilt = rebuild_digests(run.stdout)
        await asyncio.to_thread(server.start)
        after = await served_digests(server.url)
    finally:
        server.kill()
    assert after == before
    with_entries = {k: d for k, d in before.items() if d["size"]}
    assert len(with_entries) == 8
    for key, d in with_entries.items():
        assert rebuilt[key].sha256 == d["sha256"], key
        assert rebuilt[key].members == d["size"]
    for key, table in rebuilt.items():  # tables rebuild prints and the server lists agree too
        if key in before:
            assert before[key]["sha256"] == table.sha256


async def test_rebuild_prints_every_table_the_server_lists_the_empty_retained_ones_too(
    tmp_path: Path, served_journal: JournalSettings
) -> None:
    """Daily with keep_closed = 3 lists four or five windows; rebuild printed only those it had
    events for."""
    boards = {"d": {"aggregation": "sum", "periods": ["alltime", "daily"], "keep_closed": 3}}
    config = make_config(tmp_path / "data", boards, journal=served_journal)
    async with InProcessServer(config) as server:
        client = await Client.connect(server.ws_url, token_for("gs"))
        assert [r["status"] for r in await client.submit([event("d", "m", 1, now_ms(), "k")])] == ["accepted"]
        await client.close()
        served = await served_digests(server.url, boards)
    rebuilt = rebuild_digests(arena("rebuild", "--config", write_config(config, tmp_path / "config.toml")).stdout)
    assert len([k for k in served if k[1] == "daily"]) >= 4
    assert {k: (t.members, t.sha256) for k, t in rebuilt.items()} == {k: (d["size"], d["sha256"]) for k, d in served.items()}


async def test_rebuild_all_prints_closed_tables_past_the_retention(tmp_path: Path, served_journal: JournalSettings) -> None:
    boards = {"h": {"aggregation": "sum", "periods": ["hourly"], "keep_closed": 1}}
    config = make_config(tmp_path / "data", boards, journal=served_journal)
    config.server.data_dir.mkdir()
    base = (now_ms() // HOUR - 30) * HOUR  # thirty hours ago
    async with InProcessServer(config) as server, httpx.AsyncClient(base_url=server.url) as http:
        client = await Client.connect(server.ws_url, token_for("gs"))
        for hour in range(5):
            await http.post("/v1/_test/clock", json={"now_ms": base + hour * HOUR + 1000})
            assert [r["status"] for r in await client.submit([event("h", "m", hour + 1, base + hour * HOUR, f"k{hour}")])] == ["accepted"]
        await http.post("/v1/_test/clock", json={"now_ms": None})
        await client.close()
    path = write_config(config, tmp_path / "config.toml")
    everything = rebuild_digests(arena("rebuild", "--config", path, "--all").stdout)
    retained = rebuild_digests(arena("rebuild", "--config", path).stdout)
    hours = {k[2] for k in everything}
    assert len([k for k, t in everything.items() if t.members]) == 5, everything
    assert all(t.members == 0 for t in retained.values())  # nothing recent: only the current window
    assert len(hours) >= 5


async def test_verify_agrees_on_retained_tables_whatever_its_own_clock_says(tmp_path: Path, served_journal: JournalSettings) -> None:
    """The server's clock decides which closed tables it retains; verify checks those, even when
    its own clock has already moved past them (here: the server's test clock is a day behind)."""
    boards = {"h": {"aggregation": "best", "periods": ["hourly"], "keep_closed": 2}}
    server = child(tmp_path, served_journal, boards)
    await asyncio.to_thread(server.start)
    base = (now_ms() // HOUR - 30) * HOUR
    try:
        async with httpx.AsyncClient(base_url=server.url) as http:
            client = await Client.connect(server.ws_url, token_for("gs"))
            for hour in range(4):
                await http.post("/v1/_test/clock", json={"now_ms": base + hour * HOUR + 1000})
                await client.submit([event("h", f"m{i}", hour * 10 + i, base + hour * HOUR, f"k{hour}-{i}") for i in range(5)])
            await client.close()
            await http.post("/v1/_test/clock", json={"now_ms": base + 3 * HOUR + 120_000})  # hour 2 closes too
            listing = (await http.get("/v1/boards/h/hourly/periods")).json()["periods"]
        # the open hour 3 and the two retained closed hours 2 and 1 (and the empty table of the
        # server's start-up hour, a day later, listed because it exists)
        assert [(p["size"], p["closed"]) for p in listing if p["size"]] == [(5, False), (5, True), (5, True)]
        code, out, err = await run_arena("verify", "--config", server.config_path, "--url", server.url)
    finally:
        server.kill()
    assert code == 0, out + err
    assert len([line for line in out.splitlines() if line.startswith("ok\t")]) == len(listing)

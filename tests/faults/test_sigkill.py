"""SIGKILL under steady ingest: no acked event is ever lost, nothing unacked is half-applied, and
a resend of the unacked frames (same keys) is told exactly what the journal already holds; on
both journal backends (on PostgreSQL a restart waits for the killed node's lease to expire)."""

from __future__ import annotations

import asyncio
import random
import signal
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest

from arena.config import JournalSettings
from arena.engine.times import parse_rfc3339_ms
from support.faults import (
    Fingerprint,
    Ledger,
    assert_standings_match_rebuild,
    random_writers,
    rounds,
    seed,
    stored,
    write_config,
)
from support.server import ADMIN_TOKEN, ChildServer, Client, token_for, until

BOARDS: dict[str, dict[str, Any]] = {
    "best": {"aggregation": "best", "periods": ["alltime", "daily"]},
    "total": {"aggregation": "sum", "periods": ["alltime", "hourly"], "max_value": 1000},
}
PERIODS = {name: body["periods"] for name, body in BOARDS.items()}
WRITERS = 4
IN_FLIGHT = 4
MEMBERS = [f"player-{i:02d}" for i in range(40)]


def _fingerprint(e: dict[str, Any]) -> Fingerprint:
    return (e["member"], e["value"], e["occurred_at"])


async def _journal(journal: JournalSettings, data_dir: Path) -> dict[str, dict[str, Fingerprint]]:
    return {board: await stored(journal, data_dir, board) for board in BOARDS}


async def _ingest_and_kill(server: ChildServer, rng: random.Random, round_no: int) -> Ledger:
    """Writers stream until a random moment after the first ack, then the server is SIGKILLed."""
    ledger = Ledger()
    stop = asyncio.Event()
    writers = random_writers(server.ws_url, rng, f"r{round_no}", list(BOARDS), MEMBERS, ledger, stop,
                             writers=WRITERS, in_flight=IN_FLIGHT)
    await until(lambda: ledger.acked, "a first ack", 60)
    await asyncio.sleep(rng.uniform(0.05, 1.5))  # the scenario: a kill at a random moment of the ingest
    server.kill()  # SIGKILL
    await asyncio.wait_for(asyncio.gather(*writers), 60)
    return ledger


def _check_round(ledger: Ledger, journal: dict[str, dict[str, Fingerprint]]) -> dict[str, int]:
    """Acked events are journaled as sent; every unacked frame is all-or-nothing per board."""
    lost = 0
    for events, results in ledger.acked:
        assert [r["status"] for r in results] == ["accepted"] * len(events), results
        for e in events:
            if journal[e["board"]].get(e["idempotency_key"]) != _fingerprint(e):
                lost += 1
    assert lost == 0, f"{lost} acked events are not in the journal"
    half = 0
    unacked_journaled = 0
    for events in ledger.unacked:
        by_board: dict[str, list[bool]] = defaultdict(list)
        for e in events:
            found = journal[e["board"]].get(e["idempotency_key"])
            assert found in (None, _fingerprint(e))
            by_board[e["board"]].append(found is not None)
        for present in by_board.values():
            if any(present) and not all(present):
                half += 1
            unacked_journaled += sum(present)
    assert half == 0, f"{half} unacked frames are half journaled"
    return {
        "acked_events": sum(len(events) for events, _ in ledger.acked),
        "unacked_frames": len(ledger.unacked),
        "unacked_events_journaled": unacked_journaled,
        "unacked_events_not_journaled": sum(len(ev) for ev in ledger.unacked) - unacked_journaled,
    }


def _check_audit(url: str, ledger: Ledger, member: str) -> None:
    """The admin audit route agrees: a member's acked events are listed, as sent, from "gs"."""
    acked = {e["idempotency_key"]: e for events, _ in ledger.acked for e in events
             if e["board"] == "best" and e["member"] == member}
    answer = httpx.get(f"{url}/v1/boards/best/events", params={"member": member, "limit": 1000},
                       headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30)
    assert answer.status_code == 200, answer.text
    listed = {e["idempotency_key"]: e for e in answer.json()["events"]}
    for key, sent in acked.items():
        e = listed[key]
        assert (e["member"], e["value"], parse_rfc3339_ms(e["occurred_at"]), e["source"]) == (
            member, sent["value"], sent["occurred_at"], "gs")


async def _resend_unacked(server: ChildServer, ledger: Ledger, journal: dict[str, dict[str, Fingerprint]]) -> None:
    """The client's retry after reconnecting: duplicate for what was journaled, accepted otherwise."""
    client = await Client.connect(server.ws_url, token_for("gs"))
    try:
        for events in ledger.unacked:
            expected = ["duplicate" if e["idempotency_key"] in journal[e["board"]] else "accepted" for e in events]
            results = await client.submit(events, timeout=60)
            assert [r["status"] for r in results] == expected, results
    finally:
        await client.close()


def _totals(sent: dict[str, dict[str, Any]]) -> dict[str, int]:
    totals: dict[str, int] = defaultdict(int)
    for e in sent.values():
        if e["board"] == "total":
            totals[e["member"]] += e["value"]
    return dict(totals)


async def _run(tmp_path: Path, journal_settings: JournalSettings, n_rounds: int) -> list[dict[str, int]]:
    config = write_config(tmp_path, BOARDS, journal=journal_settings)
    data_dir = tmp_path / "data"
    rng = random.Random(seed())
    server = ChildServer(config)
    await asyncio.to_thread(server.start)
    sent: dict[str, dict[str, Any]] = {}
    report = []
    try:
        for round_no in range(n_rounds):
            ledger = await _ingest_and_kill(server, rng, round_no)
            for events in [ev for ev, _ in ledger.acked] + ledger.unacked:
                sent.update((e["idempotency_key"], e) for e in events)
            await asyncio.to_thread(server.start)
            journal = await _journal(journal_settings, data_dir)
            report.append(_check_round(ledger, journal))
            _check_audit(server.url, ledger, rng.choice(MEMBERS))
            assert_standings_match_rebuild(server.url, config, PERIODS)
            await _resend_unacked(server, ledger, journal)
        # Everything ever sent is journaled exactly once, and the standings add up.
        journal = await _journal(journal_settings, data_dir)
        assert sum(len(j) for j in journal.values()) == len(sent)
        for key, e in sent.items():
            assert journal[e["board"]][key] == _fingerprint(e)
        assert_standings_match_rebuild(server.url, config, PERIODS)
        top = httpx.get(server.url + "/v1/boards/total/alltime/top", params={"limit": 1000}).json()
        assert {x["member"]: x["score"] for x in top["entries"]} == _totals(sent)
        server.signal(signal.SIGTERM)
        assert await asyncio.to_thread(server.wait) == 0
    finally:
        server.kill()
    return report


async def test_sigkill_during_ingest_loses_no_acked_event(tmp_path: Path, served_journal: JournalSettings) -> None:
    report = await _run(tmp_path, served_journal, 1)
    assert report[0]["acked_events"] > 0


@pytest.mark.slow
async def test_sigkill_rounds_lose_no_acked_event(tmp_path: Path, served_journal: JournalSettings) -> None:
    n = rounds(10)
    report = await _run(tmp_path, served_journal, n)
    print(f"\nSIGKILL rounds: {n}")
    for i, r in enumerate(report):
        print(f"  round {i}: {r}")
    assert sum(r["acked_events"] for r in report) > 0

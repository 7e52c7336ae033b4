"""Never stale across a SIGKILL and a restart (DESIGN.md, "Never stale"), through a real `arena
serve`: readers poll from the moment the new process starts, while it loads from a snapshot and
a long journal tail after it (or replays in full, current short tables first); every answer that
is not a 503 equals the oracle's standings at the answer's seq, and that seq is at least the seq
of every event acked before the kill. Both journal backends."""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from arena.config import JournalSettings
from support.faults import Ledger, audited, random_writers, seed, write_config
from support.oracle import OBoard, OEvent, Row, digest, rank, window_of
from support.server import ChildServer, clear_of_an_hour_boundary, until

BOARD = {"aggregation": "sum", "periods": ["alltime", "daily", "hourly"], "max_value": 1000}
ORACLE_BOARD = OBoard(aggregation="sum", periods=("alltime", "daily", "hourly"), max_value=1000)
MEMBERS = [f"p{i:03d}" for i in range(200)]
SNAPSHOT_EVERY = 10_000
TAIL = 8_000
"""Events acked after the first snapshot is written before the kill (fewer than
``SNAPSHOT_EVERY``, so that it stays the newest): the tail a start from it replays."""
READERS = 4


@dataclass
class Answer:
    what: str  # top:<period>, rank, digest
    body: dict[str, Any]


@dataclass
class Polls:
    answers: list[Answer] = field(default_factory=list)
    not_ready: int = 0
    refused: int = 0


async def _ingest_and_kill(server: ChildServer, snapshots: bool) -> Ledger:
    """Writers stream until a snapshot is written and ``TAIL`` more events are acked (or, without
    snapshots, ``SNAPSHOT_EVERY + TAIL`` events), then the server is SIGKILLed."""
    ledger = Ledger()
    stop = asyncio.Event()
    writers = random_writers(server.ws_url, random.Random(seed()), "s", ["b"], MEMBERS, ledger, stop,
                             writers=4, in_flight=4)

    def acked() -> int:
        return sum(len(events) for events, _ in ledger.acked)

    if snapshots:
        await until(lambda: "written to" in server.log(), "the first snapshot", 120)
    goal = (acked() if snapshots else SNAPSHOT_EVERY) + TAIL
    await until(lambda: acked() >= goal, f"{goal} acked events", 120)
    server.kill()
    await asyncio.wait_for(asyncio.gather(*writers), 60)
    return ledger


async def _poll(url: str, polls: Polls, done: asyncio.Event, reader: int) -> None:
    """Ask top (alltime, daily), a member's rank and the alltime digest over and over, from
    before the server listens until ``done``."""
    asks = [("top:alltime", "/v1/boards/b/alltime/top?limit=1000"), ("top:daily", "/v1/boards/b/daily/top?limit=1000"),
            ("rank", f"/v1/boards/b/alltime/members/{MEMBERS[reader]}"), ("digest", "/v1/boards/b/alltime/digest")]
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        deadline = time.monotonic() + 180
        while not done.is_set():
            assert time.monotonic() < deadline, "the readers outlived their deadline"
            for what, path in asks:
                try:
                    answer = await http.get(path)
                except httpx.TransportError:  # not listening yet
                    polls.refused += 1
                    await asyncio.sleep(0.002)  # poll again, the deadline above bounds it
                    continue
                if answer.status_code == 503:
                    assert answer.json()["error"]["code"] == "not_ready", answer.text
                    polls.not_ready += 1
                    continue
                assert answer.status_code == 200 or (what == "rank" and answer.status_code == 404), answer.text
                if answer.status_code == 200:
                    polls.answers.append(Answer(what, answer.json()))


async def _restart_and_poll(server: ChildServer) -> Polls:
    """Start the server again on its port, polling from before it listens until well after /readyz."""
    polls = Polls()
    done = asyncio.Event()
    readers = [asyncio.create_task(_poll(server.url, polls, done, r)) for r in range(READERS)]
    try:
        await asyncio.to_thread(server.start, 120, server.port, ready=False)
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            await until(lambda: _ready(http), "the restarted server to be ready", 120)
        settled = len(polls.answers) + 50 * READERS
        await until(lambda: len(polls.answers) >= settled, "answers after the load", 60)
    finally:
        done.set()
        await asyncio.gather(*readers)
    return polls


async def _ready(http: httpx.AsyncClient) -> bool:
    return (await http.get("/readyz")).status_code == 200


class Journal:
    """The board's events by seq (read back through the admin audit route), and the oracle's
    standings at any seq."""

    def __init__(self, events: Sequence[dict[str, Any]]) -> None:
        self.events = sorted(events, key=lambda e: e["seq"])
        self.seq_of = {e["idempotency_key"]: e["seq"] for e in self.events}
        self._rows: dict[tuple[int, str, str], list[Row]] = {}
        self._windows: dict[str, list[str]] = {}

    def rows(self, seq: int, period: str, period_id: str) -> list[Row]:
        """The table at ``seq`` (computed once: many answers share a seq)."""
        if (seq, period, period_id) not in self._rows:
            if period not in self._windows:
                self._windows[period] = [window_of(period, e["occurred_at"], 0).period_id for e in self.events]
            applied = [OEvent(e["member"], e["value"], e["occurred_at"], e["idempotency_key"])
                       for e, window in zip(self.events, self._windows[period], strict=True)
                       if e["seq"] <= seq and window == period_id]
            self._rows[(seq, period, period_id)] = rank(ORACLE_BOARD, applied)
        return self._rows[(seq, period, period_id)]


def _check(polls: Polls, journal: Journal, acked_floor: int) -> None:
    for answer in polls.answers:
        body = answer.body
        assert body["seq"] >= acked_floor, f"{answer.what} at seq {body['seq']} misses events acked up to {acked_floor}"
        rows = journal.rows(body["seq"], body["period"], body["period_id"])
        assert body["size"] == len(rows), (answer.what, body["seq"])
        if answer.what == "digest":
            assert body["sha256"] == digest(rows), body["seq"]
        elif answer.what == "rank":
            entry = body["entry"]
            assert [r for r in rows if r[1] == entry["member"]][0][:3] == (entry["rank"], entry["member"], entry["score"])
        else:
            assert [(e["rank"], e["member"], e["score"]) for e in body["entries"]] == [r[:3] for r in rows], body["seq"]


@pytest.mark.parametrize("snapshots", [True, False], ids=["snapshot-and-tail", "full-replay"])
async def test_answers_while_a_restarted_board_loads_are_never_stale(
    tmp_path: Path, served_journal: JournalSettings, snapshots: bool
) -> None:
    await clear_of_an_hour_boundary()  # no table closes while events arrive (an hour, or the day)
    config = write_config(tmp_path, {"b": BOARD}, journal=served_journal,
                          snapshot_every_events=SNAPSHOT_EVERY if snapshots else 0)
    server = ChildServer(config)
    await asyncio.to_thread(server.start)
    try:
        ledger = await _ingest_and_kill(server, snapshots)
        polls = await _restart_and_poll(server)
        journal = Journal(await audited(server.url, "b", MEMBERS))
        acked_floor = max(journal.seq_of[e["idempotency_key"]] for events, _ in ledger.acked for e in events)
        _check(polls, journal, acked_floor)
        started = re.search(r"started from the snapshot at seq (\d+) and (\d+) records after it", server.log())
        assert (started is not None) == snapshots
        print(f"\n{len(polls.answers)} answers checked, {polls.not_ready} not_ready, {polls.refused} refused; "
              f"acked up to seq {acked_floor} of {len(journal.events)}; start: {started and started.group(0)}")
    finally:
        server.kill()

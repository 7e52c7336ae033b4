"""Torn and corrupt journals: a bad file is detected at start with a clear message naming it (log
and /readyz), its board is failed, and the other boards start and serve."""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from websockets.sync.client import connect

from loadtest.process import wait_until
from support.arena_cli import arena
from support.faults import assert_standings_match_rebuild, journal_file, server_digests, write_config
from support.server import ChildServer, now_ms, token_for

BOARDS: dict[str, dict[str, Any]] = {"good": {"periods": ["alltime", "daily"]}, "bad": {"periods": ["alltime", "daily"]}}
PERIODS = {name: body["periods"] for name, body in BOARDS.items()}


def submit(url: str, events: list[dict[str, Any]]) -> list[str]:
    with connect(url, additional_headers={"Authorization": f"Bearer {token_for('gs')}"}, max_size=None) as ws:
        ws.send(orjson.dumps({"op": "submit", "id": 1, "events": events}).decode())
        answer = orjson.loads(ws.recv(timeout=60))
    return [r["status"] if r["status"] != "rejected" else f"rejected:{r['reason']}" for r in answer["results"]]


def _events(board: str, n: int, prefix: str) -> list[dict[str, Any]]:
    now = now_ms()
    return [
        {"board": board, "member": f"m{i % 300}", "value": i, "occurred_at": now - i, "idempotency_key": f"{prefix}-{i}",
         "meta": {"match": f"match-{i}"}}
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A data dir whose journals a real server wrote and then closed cleanly (WAL checkpointed)."""
    root = tmp_path_factory.mktemp("pristine")
    server = ChildServer(write_config(root, BOARDS))
    server.start()
    try:
        for board in BOARDS:
            for batch in range(4):
                assert set(submit(server.ws_url, _events(board, 1000, f"{board}{batch}"))) == {"accepted"}
        server.signal(signal.SIGTERM)
        assert server.wait() == 0
    finally:
        server.kill()
    assert not Path(f"{journal_file(root / 'data', 'bad')}-wal").exists()
    yield root / "data"


def _cut_in_half(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def _cut_the_tail(path: Path) -> None:
    os.truncate(path, path.stat().st_size - 100)  # inside the last page


def _garbage_file(path: Path) -> None:
    path.write_bytes(random.Random(1).randbytes(path.stat().st_size))


def _garbage_page(path: Path) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(size // 2 // 4096 * 4096)
        f.write(random.Random(2).randbytes(4096))


def _not_sqlite(path: Path) -> None:
    path.write_text("this is not a journal\n" * 100)


CORRUPTIONS: dict[str, Callable[[Path], None]] = {
    "truncated_in_half": _cut_in_half,
    "truncated_inside_last_page": _cut_the_tail,
    "garbage_bytes": _garbage_file,
    "garbage_page": _garbage_page,
    "not_sqlite": _not_sqlite,
}


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_corrupt_journal_fails_its_board_by_name_and_the_others_serve(
    corruption: str, pristine: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    shutil.copytree(pristine, data)
    bad = journal_file(data, "bad")
    CORRUPTIONS[corruption](bad)
    config = write_config(tmp_path, BOARDS, idle_unload_seconds=0)  # the good board loads at start
    server = ChildServer(config)
    server.start(ready=False)
    try:
        answers: list[httpx.Response] = []

        def good_is_ready() -> bool:
            answers[:] = [httpx.get(server.url + "/readyz")]
            return bool(answers[0].json()["boards"]["good"] == "ready")

        wait_until(good_is_ready, "board good to be ready", 30, interval=0.02)
        [ready] = answers
        body = ready.json()
        assert ready.status_code == 503
        assert body["boards"] == {"good": "ready", "bad": "failed"}
        assert str(bad) in body["failures"]["bad"]
        assert "good" not in body.get("failures", {})
        log = server.log()
        assert f"board bad failed: {bad}" in log, log

        top = httpx.get(server.url + "/v1/boards/bad/alltime/top")
        assert top.status_code == 503 and top.json()["error"]["code"] == "unavailable"
        assert top.headers["retry-after"] == "1"
        assert submit(server.ws_url, _events("bad", 3, "after")) == ["rejected:unavailable"] * 3

        good = httpx.get(server.url + "/v1/boards/good/alltime/top", params={"limit": 1000}).json()
        assert good["size"] == 300
        assert submit(server.ws_url, _events("good", 3, "after")) == ["accepted"] * 3
        server.signal(signal.SIGTERM)
        assert server.wait() == 0
    finally:
        server.kill()
    # The offline rebuild refuses the bad journal by name too, and still rebuilds the good one.
    done = arena("rebuild", "--config", config)
    assert done.returncode == 1
    assert str(bad) in done.stderr
    assert any(line.startswith("good\talltime\t") for line in done.stdout.splitlines())


def test_torn_wal_after_sigkill_starts_with_a_consistent_prefix(tmp_path: Path) -> None:
    """A WAL cut mid-frame (a lost tail of writes) is crash recovery, not corruption: the board
    starts with the transactions before the cut, whole, and its standings equal a rebuild."""
    config = write_config(tmp_path, BOARDS)
    data = tmp_path / "data"
    server = ChildServer(config)
    server.start()
    batches = [_events("bad", 50, f"b{batch}") for batch in range(20)]
    try:
        for events in batches:
            assert set(submit(server.ws_url, events)) == {"accepted"}
        server.kill()  # SIGKILL: the WAL stays
        wal = Path(f"{journal_file(data, 'bad')}-wal")
        page = 4096
        frames = (wal.stat().st_size - 32) // (24 + page)
        assert 10 < frames < 1000  # not checkpointed yet (SQLite does at 1000 pages)
        os.truncate(wal, 32 + (frames // 2) * (24 + page) + 24 + page // 2)  # half a frame
        server.start()
        db = sqlite3.connect(f"file:{journal_file(data, 'bad')}?mode=ro", uri=True)
        try:
            keys = [k for (k,) in db.execute("SELECT idempotency_key FROM score_event ORDER BY seq")]
            seqs = [s for (s,) in db.execute("SELECT seq FROM score_event ORDER BY seq")]
        finally:
            db.close()
        assert seqs == list(range(1, len(seqs) + 1))
        assert len(keys) % 50 == 0 and len(keys) < 1000  # whole frames (one per transaction here)
        assert keys == [f"b{i // 50}-{i % 50}" for i in range(len(keys))]
        assert_standings_match_rebuild(server.url, config, PERIODS)
        assert server_digests(server.url, {"good": ["alltime"]})[("good", "alltime", "alltime")][1] == 0
        # The lost tail can simply be resent.
        for batch, events in enumerate(batches):
            expected = "duplicate" if batch * 50 < len(keys) else "accepted"
            assert set(submit(server.ws_url, events)) == {expected}
    finally:
        server.kill()


def test_a_start_after_a_graceful_stop_skips_the_integrity_check_and_one_after_sigkill_runs_it(tmp_path: Path) -> None:
    """sqlite only (PostgreSQL has no such check). The check of a journal reads every page: a
    journal closed cleanly is trusted to sqlite's own guarantees instead; one a SIGKILL left after
    a write is checked; one killed before its first write since the last clean close is as it was
    closed, and is not."""
    data = tmp_path / "data"
    config = write_config(tmp_path, BOARDS, idle_unload_seconds=0)  # both boards load at start
    server = ChildServer(config)
    server.start()
    try:
        for board in BOARDS:
            assert set(submit(server.ws_url, _events(board, 100, f"{board}-a"))) == {"accepted"}
        server.signal(signal.SIGTERM)
        assert server.wait() == 0
        server.start()
        log = server.log()
        for board in BOARDS:
            assert f"journal {journal_file(data, board)}: closed cleanly at seq 100, integrity check skipped" in log, log
        assert "integrity check passed" not in log, log

        assert set(submit(server.ws_url, _events("good", 100, "good-b"))) == {"accepted"}
        server.kill()  # SIGKILL: good wrote since its open, bad did not
        server.start()
        log = server.log()
        assert f"journal {journal_file(data, 'good')}: integrity check passed" in log, log
        assert f"journal {journal_file(data, 'bad')}: closed cleanly at seq 100, integrity check skipped" in log, log
        assert_standings_match_rebuild(server.url, config, PERIODS)
    finally:
        server.kill()


def test_a_start_after_sigkill_checks_the_journal_beside_the_load_and_still_fails_a_damaged_one(tmp_path: Path) -> None:
    """sqlite only. After a SIGKILL, a board's start loads its snapshot and tail while its
    journal's integrity check runs in a thread of its own, and turns ready only once the check
    passed (by the order of the log's lines); a journal damaged in place after the SIGKILL fails
    its board at that start as it did when the open waited for the check."""
    data = tmp_path / "data"
    config = write_config(tmp_path, BOARDS, idle_unload_seconds=0, snapshot_every_events=1000)
    server = ChildServer(config)
    server.start()
    try:
        for board in BOARDS:
            for batch in range(2):
                assert set(submit(server.ws_url, _events(board, 600, f"{board}{batch}"))) == {"accepted"}
        wait_until(lambda: all((data / f"{board}.snapshot").exists() for board in BOARDS), "the snapshots", 30, interval=0.02)
        for board in BOARDS:
            assert set(submit(server.ws_url, _events(board, 100, f"{board}-tail"))) == {"accepted"}
        server.kill()  # SIGKILL: no clean-close mark
        bad = journal_file(data, "bad")
        db = sqlite3.connect(bad)
        try:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # its pages into the file, as sqlite's own checkpoints do
        finally:
            db.close()
        _garbage_page(bad)  # the same file, damaged in place
        server.start(ready=False)
        wait_until(lambda: httpx.get(server.url + "/readyz").json()["boards"] == {"good": "ready", "bad": "failed"},
                   "good ready and bad failed", 30, interval=0.02)
        body = httpx.get(server.url + "/readyz").json()
        assert str(bad) in body["failures"]["bad"]
        log = server.log()
        assert f"board bad failed: {bad}" in log, log
        good = journal_file(data, "good")
        lines = [f"journal {good}: not closed cleanly: integrity check begun in its own thread",
                 "board good: started from the snapshot at seq",
                 f"journal {good}: integrity check passed",
                 "board good ready:"]
        assert all(line in log for line in lines), log
        assert log.index(lines[0]) < log.index(lines[2]) < log.index(lines[3]), log
        assert log.index(lines[1]) < log.index(lines[3]), log
        assert submit(server.ws_url, _events("good", 3, "after")) == ["accepted"] * 3
        assert submit(server.ws_url, _events("bad", 3, "after")) == ["rejected:unavailable"] * 3
    finally:
        server.kill()

"""The JavaScript client's own tests (`npm test` in clients/js: Node.js's test runner) against
real servers: this test writes a config.toml, and the Node.js tests start `arena serve` on it
themselves (by this interpreter, with this tree's `arena`), SIGKILL it and restart it. On both
journal backends."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from arena.config import JournalSettings
from support.faults import write_config
from support.node import PACKAGE, npm_run
from support.server import token_for

BOARDS = {
    "score": {"aggregation": "best", "periods": ["alltime", "daily"]},
    "points": {"aggregation": "sum", "periods": ["alltime"]},
}


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_npm_test_passes_against_a_real_server(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    journal = request.getfixturevalue("pg_journal") if backend == "postgresql" else JournalSettings()
    assert isinstance(journal, JournalSettings)
    config = write_config(tmp_path, BOARDS, journal=journal)
    run = npm_run("test", env={
        "ARENA_CONFIG": str(config),
        "ARENA_TOKEN": token_for("gs"),
        "ARENA_PYTHON": sys.executable,
        "PYTHONPATH": str(PACKAGE.parents[1]),
    })
    logs = "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}" for log in sorted(tmp_path.glob("serve-*.log")))
    assert run.returncode == 0, f"npm test failed:\n{run.stdout[-20000:]}\n{run.stderr[-5000:]}\n{logs}"

"""The command line from tests: `arena rebuild` / `arena verify` run as child processes with their
output parsed. (Their config.toml: `loadtest.config_toml.write_config`.)"""

from __future__ import annotations

import asyncio
import subprocess
from dataclasses import dataclass
from pathlib import Path

from loadtest.process import ARENA


def arena(*args: str | Path, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run `python -m arena ARGS` and capture its output."""
    return subprocess.run([*ARENA, *map(str, args)], capture_output=True, text=True, timeout=timeout)


async def run_arena(*args: str | Path) -> tuple[int, str, str]:
    """`arena` from a test's event loop (which may serve in-process meanwhile): its exit code,
    stdout and stderr."""
    done = await asyncio.to_thread(arena, *args)
    return done.returncode, done.stdout, done.stderr


@dataclass(frozen=True)
class RebuiltTable:
    events: int
    members: int
    sha256: str


def rebuild_digests(stdout: str) -> dict[tuple[str, str, str], RebuiltTable]:
    """`arena rebuild` output as {(board, period, period_id): RebuiltTable}."""
    lines = stdout.splitlines()
    assert lines and lines[0] == "board\tperiod\tperiod_id\tevents\tmembers\tseconds\tsha256", stdout
    tables = {}
    for line in lines[1:]:
        board, period, period_id, events, members, _seconds, sha256 = line.split("\t")
        tables[(board, period, period_id)] = RebuiltTable(int(events), int(members), sha256)
    return tables

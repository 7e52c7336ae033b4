"""The command line from tests: a `make_config` Config written as config.toml, and `arena rebuild`
/ `arena verify` run as child processes with their output parsed."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from arena.config import Config
from loadtest.process import ARENA


def toml_value(value: object) -> str:
    """A Python value as a TOML value (the few types a test config holds)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def configtoml_value(config: Config) -> str:
    """The config.toml text of a Config (as `support.server.make_config` builds them)."""
    s = config.server
    lines = ["[server]"]
    for key in ("host", "port", "data_dir", "durability", "max_batch", "max_frame_bytes", "max_in_flight_frames",
                "mailbox_events", "max_connections", "max_restarts"):
        lines.append(f"{key} = {toml_value(getattr(s, key))}")
    for server in config.servers:
        lines += ["", "[[servers]]", f"id = {toml_value(server.id)}", f"token_sha256 = {toml_value(server.token_sha256)}",
                  f"boards = {toml_value(list(server.boards))}"]
    for admin in config.admins:
        lines += ["", "[[admins]]", f"id = {toml_value(admin.id)}", f"token_sha256 = {toml_value(admin.token_sha256)}"]
    for name, b in config.boards.items():
        lines += [
            "", f"[boards.{name}]",
            f"aggregation = {toml_value(b.aggregation.value)}",
            f"order = {toml_value(b.order.value)}",
            f"tie = {toml_value(b.tie.value)}",
            f"periods = {toml_value([k.value for k in b.periods])}",
            f"timezone = {toml_value(b.timezone)}",
            f"min_value = {b.min_value}",
            f"max_value = {b.max_value}",
            f"close_grace_seconds = {b.close_grace_ms // 1000}",
            f"max_future_skew_seconds = {b.max_future_skew_ms // 1000}",
            f"keep_closed = {b.keep_closed}",
        ]
    return "\n".join(lines) + "\n"


def write_config(config: Config, path: Path) -> Path:
    path.write_text(configtoml_value(config))
    return path


def arena(*args: str | Path, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run `python -m arena ARGS` and capture its output."""
    return subprocess.run([*ARENA, *map(str, args)], capture_output=True, text=True, timeout=timeout)


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

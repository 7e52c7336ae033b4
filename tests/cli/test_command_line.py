"""The `arena` command line as an operator types it: `--version`, options before or after the
subcommand, and `GET /` pointing at the console."""

from __future__ import annotations

import tomllib
from pathlib import Path

import httpx
import pytest

from support import arena_cli
from support.faults import write_config
from support.server import InProcessServer, make_config

ROOT = Path(__file__).resolve().parents[2]
BOARDS = {"b": {"periods": ["alltime"]}}


def test_version_prints_the_package_version() -> None:
    run = arena_cli.arena("--version", timeout=30)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"arena {tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['version']}"


def _read(stderr: str, directory: Path) -> bool:
    """Whether `arena rebuild` read the config written in ``directory`` (its board has no journal yet)."""
    return f"# rebuilding b from {directory / 'data' / 'b.journal.sqlite'}" in stderr


@pytest.mark.parametrize("argv", [
    ["--log-level", "DEBUG", "rebuild", "--config", "{config}"],
    ["rebuild", "--config", "{config}", "--log-level", "DEBUG"],
    ["--config", "{config}", "rebuild", "--log-level", "DEBUG"],
    ["--config", "{config}", "--log-level", "DEBUG", "rebuild"],
])
def test_options_are_accepted_before_or_after_the_subcommand(tmp_path: Path, argv: list[str]) -> None:
    config = write_config(tmp_path, BOARDS)
    run = arena_cli.arena(*(a.format(config=config) for a in argv), timeout=60)
    assert _read(run.stderr, tmp_path) and "DEBUG arena: rebuild took" in run.stderr, run.stderr


def test_an_option_given_in_both_places_is_not_overwritten_by_a_default(tmp_path: Path) -> None:
    config = write_config(tmp_path, BOARDS)
    given_after = arena_cli.arena("--log-level", "DEBUG", "rebuild", "--config", config, "--log-level", "WARNING", timeout=60)
    assert _read(given_after.stderr, tmp_path) and "DEBUG" not in given_after.stderr, given_after.stderr
    given_before = arena_cli.arena("--config", config, "rebuild", timeout=60)
    assert _read(given_before.stderr, tmp_path), given_before.stderr
    missing = arena_cli.arena("--config", config, "rebuild", "--config", tmp_path / "missing.toml", timeout=60)
    assert missing.returncode == 2 and "missing.toml" in missing.stderr


async def test_the_root_redirects_to_the_console(tmp_path: Path) -> None:
    async with InProcessServer(make_config(tmp_path / "data", BOARDS), fault_injection=False) as server:
        async with httpx.AsyncClient(base_url=server.url) as http:
            answer = await http.get("/")
            assert answer.status_code == 307 and answer.headers["location"] == "/console"
            assert (await http.get("/", follow_redirects=True)).headers["content-type"].startswith("text/html")

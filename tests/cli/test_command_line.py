"""The `arena` command line as an operator types it: `--version`, options before or after the
subcommand, `GET /` pointing at the console, and offline commands that need no cluster secret."""

from __future__ import annotations

import asyncio
import tomllib
from pathlib import Path

import httpx
import pytest

from arena.config import ClusterSettings, JournalSettings
from support import arena_cli
from support.faults import write_config
from support.server import ChildServer, Client, InProcessServer, event, make_config, now_ms, statuses, token_for

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


async def test_rebuild_and_verify_of_a_cluster_need_no_cluster_secret(
    tmp_path: Path, pg_journal: JournalSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path, BOARDS, journal=pg_journal, cluster=ClusterSettings(node_id="node-a"))
    monkeypatch.delenv("ARENA_CLUSTER_SECRET", raising=False)
    refused = await asyncio.to_thread(arena_cli.arena, "serve", "--config", config, "--port", "0", timeout=60)
    assert refused.returncode == 2 and "arena serve: cluster: $ARENA_CLUSTER_SECRET must be set" in refused.stderr
    node = ChildServer(config, fault_injection=False, env={"ARENA_CLUSTER_SECRET": "s3cret-for-serve-only"})
    await asyncio.to_thread(node.start)
    try:
        client = await Client.connect(node.ws_url, token_for("gs"))
        assert statuses(await client.submit([event("b", "m", 5, now_ms(), "k1")])) == ["accepted"]
        await client.close()
        rebuilt = await asyncio.to_thread(arena_cli.arena, "rebuild", "--config", config, timeout=60)
        assert rebuilt.returncode == 0, rebuilt.stderr
        assert arena_cli.rebuild_digests(rebuilt.stdout)[("b", "alltime", "alltime")].events == 1
        verified = await asyncio.to_thread(arena_cli.arena, "verify", "--config", config, "--url", node.url, timeout=60)
        assert verified.returncode == 0, verified.stderr
        assert "1 tables checked, 0 mismatched" in verified.stderr
    finally:
        node.kill()


def test_what_pip_install_leaves_behind_is_ignored_by_git() -> None:
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert "build/" in ignored and "*.egg-info/" in ignored

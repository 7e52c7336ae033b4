"""The client quick starts in docs/client.md, the README's tour and the live example of
docs/protocol.md run as written against a real server built from the repository's config.toml
(its development token and its high_score board)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.snippets import DOC_URL, ROOT, python_blocks, run_against_the_default_config

DOC = ROOT / "docs" / "client.md"
SNIPPETS = python_blocks(DOC)
README_SNIPPETS = python_blocks(ROOT / "README.md")
PROTOCOL_SNIPPETS = python_blocks(ROOT / "docs" / "protocol.md")


def test_the_doc_has_an_async_and_a_sync_quick_start_of_15_lines_at_most() -> None:
    assert len(SNIPPETS) == 2
    assert "asyncio.run" in SNIPPETS[0] and "connect_sync" in SNIPPETS[1]
    for snippet in SNIPPETS:
        assert len(snippet.splitlines()) <= 15, snippet
        assert DOC_URL in snippet


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        (0, ["accepted", "rejected: value_out_of_range", "1 alice 1200", "2 bot99 99"]),
        (1, ["duplicate True", "50 recorded", "1 of ", "Entry(rank="]),
    ],
    ids=["async", "sync"],
)
async def test_the_quick_start_runs(tmp_path: Path, index: int, expected: list[str]) -> None:
    await run_against_the_default_config(tmp_path, SNIPPETS[index], expected)


async def test_the_readme_example_client_runs_twice(tmp_path: Path) -> None:
    assert len(README_SNIPPETS) == 1 and DOC_URL in README_SNIPPETS[0]
    for _ in range(2):  # a second run must not trip over the first one's keys
        await run_against_the_default_config(tmp_path, README_SNIPPETS[0], ["accepted 1", "1 alice 1200", "2 bob 900"])


async def test_the_protocol_live_example_follows_a_view_and_reads_friends(tmp_path: Path) -> None:
    assert len(PROTOCOL_SNIPPETS) == 1 and DOC_URL in PROTOCOL_SNIPPETS[0]
    await run_against_the_default_config(tmp_path, PROTOCOL_SNIPPETS[0], ["[(1, 'alice')]", "('zed',)"])

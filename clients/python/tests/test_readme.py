"""The examples of clients/python/README.md run as written against a real server."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.snippets import DOC_URL, python_blocks, run_against_the_default_config

SNIPPETS = python_blocks(Path(__file__).resolve().parents[1] / "README.md")


def test_the_readme_has_an_async_and_a_sync_example() -> None:
    assert len(SNIPPETS) == 2
    assert "asyncio.run" in SNIPPETS[0] and "connect_sync" in SNIPPETS[1]
    assert all(DOC_URL in snippet for snippet in SNIPPETS)


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        (0, ["accepted", "value_out_of_range", "1 alice 1200", "None", "Entry(rank=1, member='alice'"]),
        (1, ["bob", "['bob']"]),
    ],
    ids=["async", "sync"],
)
async def test_the_example_runs(tmp_path: Path, index: int, expected: list[str]) -> None:
    await run_against_the_default_config(tmp_path, SNIPPETS[index], expected)

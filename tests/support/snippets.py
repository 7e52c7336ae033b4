"""Code blocks of the documentation, run as written against a real server built from the
repository's config.toml (its development token and its high_score board)."""

from __future__ import annotations

import asyncio
import re
import sys
from dataclasses import replace
from pathlib import Path

from arena.config import load_config
from support.server import InProcessServer

ROOT = Path(__file__).resolve().parents[2]
DOC_URL = "http://127.0.0.1:8080"
"""The server's address in the examples; replaced by the test server's."""


def python_blocks(page: Path) -> list[str]:
    """The ```python blocks of a Markdown page, in order."""
    return re.findall(r"^```python\n(.*?)^```$", page.read_text(), re.S | re.M)


async def run_against_the_default_config(tmp_path: Path, snippet: str, expected: list[str]) -> None:
    """Run ``snippet`` in a child interpreter against a server of config.toml (data in
    ``tmp_path``) and check that its output holds each of ``expected``."""
    config = load_config(ROOT / "config.toml")
    config = replace(config, server=replace(config.server, data_dir=tmp_path))
    async with InProcessServer(config) as server:
        code = snippet.replace(DOC_URL, server.url)
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code, cwd=tmp_path,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    for line in expected:
        assert line in out.decode(), out.decode()

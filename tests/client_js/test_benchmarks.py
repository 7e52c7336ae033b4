"""The JavaScript client's benchmarks run: `python -m loadtest.sdk_writers` (both SDKs' writers
against one node, nothing rejected) and `python -m loadtest.browser_views` (a Chromium page
holding live views while events change them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadtest import browser_views, sdk_writers
from support.browser import chromium_path
from support.node import in_package


@pytest.fixture(scope="module")
def built() -> None:
    build = in_package("npm", "run", "build")
    assert build.returncode == 0, build.stdout + build.stderr


def test_the_sdk_writers_benchmark_runs_both_clients(built: None, tmp_path: Path) -> None:
    out = tmp_path / "writers.json"
    code = sdk_writers.main(["--seconds", "0.5", "--rounds", "1", "--concurrency", "2", "--batch", "50", "--json", str(out)])
    result = json.loads(out.read_text())
    assert code in (0, 1) and result["rejected"] == 0
    assert result["rates"]["python"][0] > 0 and result["rates"]["node"][0] > 0


def test_the_browser_views_benchmark_runs(built: None, capsys: pytest.CaptureFixture[str]) -> None:
    chromium_path()  # fails under CI, skips elsewhere, without a browser
    assert browser_views.main(["--views", "20", "--seconds", "1", "--rate", "100"]) == 0
    assert "page CPU (cores)" in capsys.readouterr().out

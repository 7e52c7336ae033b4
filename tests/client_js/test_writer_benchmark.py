"""`python -m loadtest.sdk_writers` runs: both SDKs' writers against one node, nothing rejected."""

from __future__ import annotations

import json
from pathlib import Path

from loadtest import sdk_writers
from support.node import in_package


def test_the_sdk_writers_benchmark_runs_both_clients(tmp_path: Path) -> None:
    build = in_package("npm", "run", "build")
    assert build.returncode == 0, build.stdout + build.stderr
    out = tmp_path / "writers.json"
    code = sdk_writers.main(["--seconds", "0.5", "--rounds", "1", "--concurrency", "2", "--batch", "50", "--json", str(out)])
    result = json.loads(out.read_text())
    assert code in (0, 1) and result["rejected"] == 0
    assert result["rates"]["python"][0] > 0 and result["rates"]["node"][0] > 0

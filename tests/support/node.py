"""clients/js (the JavaScript client) from the tests: where it is, and running its npm scripts (Node.js and npm on PATH,
its packages installed by `npm ci`). Without them the test fails under CI and is skipped elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "js"


def need_node() -> str:
    """The npm executable, once clients/js has its packages. Fails under CI, skips elsewhere."""
    npm = shutil.which("npm")
    reason = None
    if npm is None or shutil.which("node") is None:
        reason = "Node.js and npm are not on PATH (Node.js 20 or later)"
    elif not (PACKAGE / "node_modules").is_dir():
        reason = "clients/js has no node_modules: run `npm ci` in clients/js"
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"required under CI: {reason}", pytrace=False)
        pytest.skip(reason)
    assert npm is not None
    return npm


def npm_run(*args: str, env: Mapping[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """``npm ARGS`` in clients/js, its output captured (text)."""
    return subprocess.run([need_node(), *args], cwd=PACKAGE, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, timeout=timeout, check=False)

"""clients/js (the JavaScript client) from the tests: where it is, and running Node.js and its npm
scripts there (Node.js and npm on PATH, its packages installed by `npm ci`). Without them the test
fails under CI and is skipped elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "js"


def need_node() -> None:
    """Fail under CI, skip elsewhere, unless Node.js, npm and clients/js's packages are there."""
    reason = None
    if shutil.which("npm") is None or shutil.which("node") is None:
        reason = "Node.js and npm are not on PATH (Node.js 20 or later)"
    elif not (PACKAGE / "node_modules").is_dir():
        reason = "clients/js has no node_modules: run `npm ci` in clients/js"
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"required under CI: {reason}", pytrace=False)
        pytest.skip(reason)


def in_package(program: str, *args: str, env: Mapping[str, str] | None = None,
               timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """``program ARGS`` (``npm`` or ``node``) in clients/js, its output captured (text)."""
    need_node()
    return subprocess.run([program, *args], cwd=PACKAGE, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, timeout=timeout, check=False)

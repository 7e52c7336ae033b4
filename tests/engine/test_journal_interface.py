"""The journal boundary: what every backend shares, apart from any one of them."""

from __future__ import annotations

import subprocess
import sys


def test_the_interface_imports_no_storage_library() -> None:
    code = "import sys, arena.journal; print(sorted(m for m in sys.modules if 'sqlite' in m))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"

"""The `arena-client` distribution stands alone: its wheel, installed into a fresh virtual
environment beside nothing but its declared dependencies, imports without the server (and without
anything outside the standard library and those dependencies), ships `py.typed`, and a user's
program type-checks against it under `mypy --strict --disallow-any-expr` (nothing is `Any`). The
server's package offers the same classes as ``arena.client``."""

from __future__ import annotations

import ast
import inspect
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

import arena.client
import arena_client

CLIENT = Path(__file__).resolve().parents[1]
PACKAGE = CLIENT / "arena_client"
PROJECT = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
DECLARED = {re.split(r"[<>=!~ \[]", d, maxsplit=1)[0] for d in PROJECT["dependencies"]}


def test_the_dependencies_are_websockets_and_orjson_only() -> None:
    assert DECLARED == {"websockets", "orjson"}


def _imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


def test_the_package_imports_only_the_standard_library_its_dependencies_and_itself() -> None:
    allowed = set(sys.stdlib_module_names) | DECLARED | {"arena_client"}
    offences = [f"{path.name} → {name}" for path in sorted(PACKAGE.glob("*.py")) for name in _imports(path)
                if name.split(".")[0] not in allowed]
    assert not offences, offences


def test_the_server_package_offers_the_same_classes() -> None:
    assert arena.client.__all__ == arena_client.__all__
    for name in arena_client.__all__:
        assert getattr(arena.client, name) is getattr(arena_client, name), name


def _run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{command[:3]}...:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment holding the client's wheel, built as pip builds it (an
    isolated build environment with the build backend from the package index) from a copy of
    clients/python, so the build leaves nothing in the tree, and its two dependencies, copied from
    this environment. Returns its python."""
    work = tmp_path_factory.mktemp("standalone")
    source = work / "source"
    shutil.copytree(CLIENT, source, ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info"))
    _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", work / "dist", source, cwd=work)
    [wheel] = (work / "dist").glob("arena_client-*.whl")
    _run(sys.executable, "-m", "venv", "--without-pip", work / "venv", cwd=work)
    python = work / "venv" / "bin" / "python"
    site = Path(_run(python, "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=work).strip())
    _run(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", site, wheel, cwd=work)
    for dependency in DECLARED:
        module = __import__(dependency)
        assert module.__file__ is not None
        shutil.copytree(Path(module.__file__).parent, site / dependency)
    return python


def test_the_wheel_imports_in_a_fresh_environment_without_the_server(installed: Path) -> None:
    check = f"""
import importlib.util, pathlib, sys
import arena_client, arena_client.backoff, arena_client.connection, arena_client.errors, arena_client.models
import arena_client.sync, arena_client.views
assert pathlib.Path(arena_client.__file__).parent.joinpath("py.typed").is_file()
for server_dependency in ("arena", "starlette", "uvicorn", "aiosqlite", "asyncpg", "prometheus_client", "sortedcontainers"):
    assert importlib.util.find_spec(server_dependency) is None, server_dependency
ours = set({sorted(DECLARED | {"arena_client", "__main__"})!r})
outside = sorted({{m.split(".")[0] for m in sys.modules}} - set(sys.stdlib_module_names) - ours)
assert not outside, outside
print(arena_client.new_idempotency_key())
"""
    out = _run(installed, "-I", "-c", check, cwd=installed.parent)
    assert out.strip()[14] == "7"  # a UUIDv7 made by the installed client


def test_a_users_program_type_checks_strictly_with_nothing_any(installed: Path, tmp_path: Path) -> None:
    program = tmp_path / "game_server.py"
    shutil.copy(Path(__file__).with_name("typed_usage.py"), program)
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    out = _run(sys.executable, "-m", "mypy", "--strict", "--disallow-any-expr", "--no-incremental",
               "--python-executable", installed, program, cwd=tmp_path, env=env)  # no config file in cwd
    assert "Success" in out


def test_the_sync_clients_options_are_the_async_clients_keywords() -> None:
    keywords = {name for name, p in inspect.signature(arena_client.ArenaClient).parameters.items() if p.kind is p.KEYWORD_ONLY}
    assert set(arena_client.ClientOptions.__annotations__) == keywords

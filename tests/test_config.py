"""config.toml's [journal] section: the backend, its URL (where `$ARENA_JOURNAL_URL` wins) and
schema; every bad value is one ConfigError line naming the key, and never prints the URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from arena.config import JournalSettings, load_config, parse_config
from arena.errors import ConfigError

URL = "postgresql://arena:s3cret@db.example:5432/arena"


def config(**journal: Any) -> dict[str, Any]:
    return {"journal": journal, "boards": {"b": {}}}


def test_the_journal_is_sqlite_by_default() -> None:
    assert parse_config({"boards": {"b": {}}}).journal == JournalSettings("sqlite", None, "arena")


def test_a_postgresql_journal_takes_its_url_and_schema() -> None:
    parsed = parse_config(config(backend="postgresql", url=URL, schema="arena_test_1"))
    assert parsed.journal == JournalSettings("postgresql", URL, "arena_test_1")


def test_the_url_from_the_environment_wins_over_the_file() -> None:
    other = "postgres://other@127.0.0.1/x"
    assert parse_config(config(backend="postgresql", url=URL), journal_url=other).journal.url == other
    assert parse_config(config(backend="postgresql"), journal_url=other).journal.url == other
    assert parse_config(config(backend="postgresql", url=URL), journal_url="").journal.url == URL


def test_load_config_passes_the_environment_url_through(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[journal]\nbackend = "postgresql"\n[boards.b]\n')
    assert load_config(path, journal_url=URL).journal.url == URL
    with pytest.raises(ConfigError, match="journal.url: missing"):
        load_config(path)


@pytest.mark.parametrize(("journal", "env", "message"), [
    ({"backend": "mysql"}, None, "journal.backend: must be one of sqlite, postgresql (got 'mysql')"),
    ({"backend": "postgresql"}, None, 'journal.url: missing: backend "postgresql" needs a URL (or $ARENA_JOURNAL_URL)'),
    ({"backend": "postgresql", "url": "mysql://arena:s3cret@db"}, None, "journal.url: must be a string starting with postgresql://"),
    ({"url": 5432}, None, "journal.url: must be a string starting with postgresql://"),
    ({"backend": "postgresql"}, "arena:s3cret@db", "ARENA_JOURNAL_URL: must start with postgresql://"),
    ({"schema": "Arena"}, None, "journal.schema: must be 1..63 lowercase letters, digits or '_', not starting with a digit (got 'Arena')"),
    ({"schema": "a-b"}, None, "journal.schema: must be 1..63 lowercase letters, digits or '_'"),
    ({"schema": "1a"}, None, "journal.schema: must be 1..63 lowercase letters"),
    ({"schema": "a" * 64}, None, "journal.schema: must be 1..63 lowercase letters"),
    ({"schema": ""}, None, "journal.schema: must be a non-empty string"),
    ({"password": "x"}, None, "journal.password: unknown key"),
], ids=["backend", "no-url", "scheme", "not-a-string", "env-scheme", "upper", "dash", "digit", "long", "empty", "unknown"])
def test_a_bad_journal_setting_is_one_line_naming_the_key_and_never_the_password(
    journal: dict[str, Any], env: str | None, message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(config(**journal), journal_url=env)
    text = str(raised.value)
    assert text.startswith(message) and "\n" not in text
    assert "s3cret" not in text

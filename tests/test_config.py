"""config.toml's [journal] section: the backend, its URL (where `$ARENA_JOURNAL_URL` wins) and
schema; and its [cluster] section, whose secret comes from `$ARENA_CLUSTER_SECRET`. Every bad value
is one ConfigError line naming the key, and never prints the URL or the secret."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from arena.config import ClusterSettings, JournalSettings, load_config, parse_config, require_cluster_secret
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


SECRET = "cluster-s3cret-value"


def clustered(**cluster: Any) -> dict[str, Any]:
    return {"server": {"host": "10.0.0.5", "port": 9000}, "journal": {"backend": "postgresql", "url": URL},
            "cluster": cluster, "boards": {"b": {}}}


def test_a_cluster_node_is_named_and_reached_by_its_address_by_default() -> None:
    parsed = parse_config(clustered(), cluster_secret=SECRET)
    assert parsed.cluster == ClusterSettings(secret=SECRET)
    assert parsed.node_id == f"{socket.gethostname()}:9000"
    assert parsed.advertise_url == "http://10.0.0.5:9000"
    assert parse_config(config()).cluster is None


def test_a_cluster_node_takes_its_settings() -> None:
    parsed = parse_config(clustered(node_id="node-a", advertise_url="https://a.internal:8443/", lease_seconds=2,
                                    standbys=2), cluster_secret=SECRET)
    assert (parsed.node_id, parsed.advertise_url) == ("node-a", "https://a.internal:8443")
    assert parsed.cluster is not None and (parsed.cluster.lease_seconds, parsed.cluster.standbys) == (2.0, 2)


@pytest.mark.parametrize(("data", "secret", "message"), [
    ({"cluster": {}, "boards": {"b": {}}}, SECRET,
     'cluster: needs [journal] backend = "postgresql" (the nodes share its journal)'),
    (clustered(advertise_url="10.0.0.5:9000"), SECRET, "cluster.advertise_url: must be an http(s) URL like"
     " http://10.0.0.5:8080 (how peers reach this node) (got '10.0.0.5:9000')"),
    (clustered(standbys=-1), SECRET, "cluster.standbys: must be between 0 and 16 (got -1)"),
    (clustered(lease_seconds=0), SECRET, "cluster.lease_seconds: must be a finite number >= 0.5 (got 0)"),
    (clustered(secret="x"), SECRET, "cluster.secret: unknown key"),
])
def test_a_bad_cluster_section_is_one_line(data: dict[str, Any], secret: str | None, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, cluster_secret=secret)
    assert str(caught.value) == message


@pytest.mark.parametrize("secret", [None, ""])
def test_only_serving_needs_the_cluster_secret(secret: str | None) -> None:
    parsed = parse_config(clustered(), cluster_secret=secret)  # enough for rebuild, verify, migrate
    assert parsed.cluster is not None and parsed.cluster.secret == ""
    with pytest.raises(ConfigError) as caught:
        require_cluster_secret(parsed)
    assert str(caught.value) == "cluster: $ARENA_CLUSTER_SECRET must be set: the nodes authenticate to each other with it"
    require_cluster_secret(parse_config(clustered(), cluster_secret=SECRET))
    require_cluster_secret(parse_config(config()))


def test_the_cluster_secret_is_never_printed(tmp_path: Path) -> None:
    parsed = parse_config(clustered(node_id="node-a"), cluster_secret=SECRET)
    assert SECRET not in repr(parsed)
    path = tmp_path / "config.toml"
    path.write_text(f'[journal]\nbackend = "postgresql"\nurl = "{URL}"\n[cluster]\nnode_id = 5\n[boards.b]\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, cluster_secret=SECRET)
    assert SECRET not in str(caught.value) and "cluster.node_id: must be a non-empty string" in str(caught.value)


def test_snapshots_are_taken_every_million_records_by_default_and_zero_turns_them_off() -> None:
    assert parse_config({"boards": {"b": {}}}).server.snapshot_every_events == 1_000_000
    assert parse_config({"server": {"snapshot_every_events": 0}, "boards": {"b": {}}}).server.snapshot_every_events == 0
    with pytest.raises(ConfigError, match="snapshot_every_events"):
        parse_config({"server": {"snapshot_every_events": -1}, "boards": {"b": {}}})


def test_a_node_drains_five_seconds_by_default_and_the_key_is_checked() -> None:
    assert parse_config({"boards": {"b": {}}}).server.drain_seconds == 5.0
    assert parse_config({"server": {"drain_seconds": 0}, "boards": {"b": {}}}).server.drain_seconds == 0.0
    for bad in (-1, "5", float("inf")):
        with pytest.raises(ConfigError) as caught:
            parse_config({"server": {"drain_seconds": bad}, "boards": {"b": {}}})
        assert str(caught.value).startswith("server.drain_seconds: must be a finite number >= 0")


def test_the_view_budgets_of_a_connection_default_to_ten_thousand_and_are_checked() -> None:
    server = parse_config({"boards": {"b": {}}}).server
    assert (server.max_view_members, server.max_view_entries) == (10_000, 10_000)
    tuned = parse_config({"server": {"max_view_members": 50, "max_view_entries": 0}, "boards": {"b": {}}}).server
    assert (tuned.max_view_members, tuned.max_view_entries) == (50, 0)
    for key, value, message in [("max_view_members", -1, "server.max_view_members: must be >= 0 (got -1)"),
                                ("max_view_entries", "many", "server.max_view_entries: must be an integer (got 'many')")]:
        with pytest.raises(ConfigError) as caught:
            parse_config({"server": {key: value}, "boards": {"b": {}}})
        assert str(caught.value) == message and "\n" not in str(caught.value)


def hooked(**hook: Any) -> dict[str, Any]:
    return {"webhooks": [{"id": "rewards", "url": "https://u:p@backend.example/arena", "secret_env": "SECRET", **hook}]}


def test_a_webhook_takes_its_settings_and_its_secrets_from_the_environment() -> None:
    from arena.config import Webhook, webhook_secrets

    parsed = parse_config(hooked(boards=["cup-*"], max_age_hours=0.5))
    assert parsed.webhooks == (Webhook("rewards", "https://u:p@backend.example/arena", "SECRET", ("cup-*",), 0.5),)
    hook = parsed.webhooks[0]
    assert hook.wants("cup-1") and not hook.wants("hs") and hook.shown_url == "https://backend.example/arena"
    assert parse_config(hooked()).webhooks[0].max_age_hours == 72 and parse_config(hooked()).webhooks[0].boards == ("*",)
    assert webhook_secrets(parsed, {"SECRET": "new,old"}) == {"rewards": ("new", "old")}
    for value in ("", "a,", "a,b,c"):
        with pytest.raises(ConfigError, match=r"webhooks\[0\].secret_env: \$SECRET must hold") as raised:
            webhook_secrets(parsed, {"SECRET": value})
        assert "a," not in str(raised.value)


@pytest.mark.parametrize(("hook", "message"), [
    ({"url": "ftp://x"}, "webhooks[0].url: must be an http"),
    ({"id": "a/b"}, "webhooks[0].id: must be 1..64"),
    ({"secret_env": "not a name"}, "webhooks[0].secret_env: must be the name of an environment variable"),
    ({"max_age_hours": 0}, "webhooks[0].max_age_hours: must be > 0"),
    ({"boards": ["a*b"]}, "webhooks[0].boards:"),
    ({"secret": "inline"}, "webhooks[0].secret: unknown key"),
])
def test_a_bad_webhook_is_one_line_naming_the_key(hook: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(hooked(**hook))
    assert str(raised.value).startswith(message)


def test_two_webhooks_may_not_share_an_id() -> None:
    twice = {"webhooks": hooked()["webhooks"] * 2}
    with pytest.raises(ConfigError, match="webhooks: id 'rewards' is defined twice"):
        parse_config(twice)

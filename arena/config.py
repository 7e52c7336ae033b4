"""config.toml -> frozen settings. Every bad key or value is one `ConfigError` line naming it."""

from __future__ import annotations

import builtins
import hashlib
import math
import re
import socket
import tomllib
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import date
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import orjson

from arena.engine.events import plain_text
from arena.engine.league import LeagueSpec
from arena.engine.periods import PeriodKind
from arena.engine.prizes import Prizes, PrizeTier
from arena.engine.schedule import CustomPeriod, EveryDays, EveryHours, OneOff
from arena.engine.scoring import Aggregation, Order, Tie
from arena.engine.spec import BoardSpec
from arena.engine.times import MAX_MS, parse_rfc3339_ms
from arena.errors import ConfigError

JSON_SAFE = 2**53 - 1
DEV_TOKEN = "arena-dev-token"
"""The token of the repository's default config.toml; a server using it logs a warning."""
DEV_TOKEN_SHA256 = hashlib.sha256(DEV_TOKEN.encode()).hexdigest()
DEV_ADMIN_TOKEN = "arena-dev-admin"
DEV_ADMIN_TOKEN_SHA256 = hashlib.sha256(DEV_ADMIN_TOKEN.encode()).hexdigest()

_BOARD_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_BOARD_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$|^[A-Za-z0-9_-]{0,63}\*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
"""A PostgreSQL identifier that needs no quoting: SQL may name it as it is."""
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


@dataclass(frozen=True, slots=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    data_dir: Path = Path("data")
    durability: str = "full"
    max_batch: int = 1000
    max_frame_bytes: int = 1_048_576
    max_in_flight_frames: int = 64
    mailbox_events: int = 100_000
    max_connections: int = 1000
    ping_interval_seconds: float = 20.0
    ping_timeout_seconds: float = 20.0
    max_restarts: int = 5
    restart_window_seconds: float = 60.0
    push_interval_ms: int = 100
    max_subscriptions: int = 100
    max_live_connections: int = 10_000
    max_view_members: int = 10_000
    """Members named by one connection's views together (`rank`, `percentile`, `around` a
    member: 1; `members`: its list)."""
    max_view_entries: int = 10_000
    """Entries asked by one connection's views together (`top`: its limit; `around`:
    2·radius+1; `members`: its list; the others 1)."""
    cors_origins: tuple[str, ...] = ()
    snapshot_every_events: int = 1_000_000
    """Journaled records between two snapshots of a board; 0: never."""
    idle_unload_seconds: float = 600.0
    """A board with no event, query or subscription for this long is snapshotted and unloaded
    (activated again on demand); 0: boards stay loaded, and a start loads every board."""
    max_active_boards: int = 1000
    """Boards loaded on this node at most: past it the least recently used one without
    subscriptions is unloaded."""
    max_boards: int = 10_000
    """Boards (config and API, retired ones not counted) a server or cluster holds at most."""
    drain_seconds: float = 5.0
    """After SIGTERM, how long /readyz answers 503 `draining` (everything else still served)
    before the node hands its boards off and stops: a load balancer's health checks move new
    work away meanwhile."""
    webhook_backoff_seconds: float = 1.0
    """The wait after a webhook delivery's first failed attempt; it doubles after each failure,
    up to `WEBHOOK_BACKOFF_CAP_SECONDS`."""
    webhook_timeout_seconds: float = 10.0
    """How long a webhook delivery waits for the receiver's answer before it counts as failed."""


WEBHOOK_BACKOFF_CAP_SECONDS = 600.0
DEFAULT_MAX_AGE_HOURS = 72.0


@dataclass(frozen=True, slots=True)
class JournalSettings:
    """``[journal]``: where the boards' journals are kept. ``url`` (PostgreSQL only) may hold a
    password: it is never printed, not even in a config error."""

    backend: str = "sqlite"
    url: str | None = None
    schema: str = "arena"


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """``[cluster]`` (backend postgresql only): this node among the nodes sharing the journal.
    ``secret`` (`$ARENA_CLUSTER_SECRET`) authenticates nodes to each other: never printed; only a
    node that serves needs it (`require_cluster_secret`), not the offline commands."""

    node_id: str | None = None
    """None: ``<hostname>:<port>``."""
    advertise_url: str | None = None
    """None: ``http://<host>:<port>``."""
    secret: str = field(default="", repr=False)
    lease_seconds: float = 3.0
    standbys: int = 1


@dataclass(frozen=True, slots=True)
class GameServer:
    """A game server allowed to stream events; ``boards`` holds names and patterns with one
    trailing "*" ("cup-*", "*"), matched when a board is written: boards created later match too."""

    id: str
    token_sha256: str
    boards: tuple[str, ...]

    def may_write(self, board: str) -> bool:
        return board_matches(self.boards, board)


def board_matches(patterns: tuple[str, ...], board: str) -> bool:
    """Whether ``board`` is one of ``patterns``: names, and patterns with one trailing "*"."""
    return any(board == p or (p.endswith("*") and board.startswith(p[:-1])) for p in patterns)


@dataclass(frozen=True, slots=True)
class Webhook:
    """``[[webhooks]]``: where the settlements of the boards matching ``boards`` are POSTed,
    signed with the secrets in the environment variable ``secret_env`` (`webhook_secrets`)."""

    id: str
    url: str
    secret_env: str
    boards: tuple[str, ...] = ("*",)
    max_age_hours: float = DEFAULT_MAX_AGE_HOURS
    """A delivery still failing this long after it was made is given up (marked failed)."""

    def wants(self, board: str) -> bool:
        return board_matches(self.boards, board)

    @property
    def shown_url(self) -> str:
        """The url without credentials (a user and password in it), as admin routes and logs show it."""
        scheme, _, rest = self.url.partition("://")
        host, slash, path = rest.partition("/")
        return f"{scheme}://{host.rpartition('@')[2]}{slash}{path}"


@dataclass(frozen=True, slots=True)
class Admin:
    id: str
    token_sha256: str


@dataclass(frozen=True, slots=True)
class Config:
    server: ServerSettings
    servers: tuple[GameServer, ...]
    admins: tuple[Admin, ...]
    boards: Mapping[str, BoardSpec] = field(default_factory=dict)
    journal: JournalSettings = JournalSettings()
    cluster: ClusterSettings | None = None
    """None: a single node (on postgresql, a cluster of one named after its address)."""
    webhooks: tuple[Webhook, ...] = ()

    @property
    def node_id(self) -> str:
        """This node's name in the journal's leases and ownership rows."""
        if self.cluster is not None and self.cluster.node_id is not None:
            return self.cluster.node_id
        return f"{socket.gethostname()}:{self.server.port}"

    @property
    def advertise_url(self) -> str:
        """How other nodes reach this one."""
        if self.cluster is not None and self.cluster.advertise_url is not None:
            return self.cluster.advertise_url
        return f"http://{self.server.host}:{self.server.port}"


def require_cluster_secret(config: Config) -> None:
    """A cluster node serves only with `$ARENA_CLUSTER_SECRET`: its peers authenticate with it.
    `arena rebuild`, `verify` and `migrate` talk to no peer and never need it."""
    if config.cluster is not None and not config.cluster.secret:  # no message that could quote it
        raise ConfigError("cluster: $ARENA_CLUSTER_SECRET must be set: the nodes authenticate to each other with it")


def webhook_secrets(config: Config, environ: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """Each webhook's signing secrets, from the environment variable its ``secret_env`` names: the
    secret, or two separated by a comma during a rotation (both sign). Raises ConfigError when one
    is missing or empty (naming the variable, never its value)."""
    secrets: dict[str, tuple[str, ...]] = {}
    for index, hook in enumerate(config.webhooks):
        value = environ.get(hook.secret_env, "")
        parts = tuple(part.strip() for part in value.split(","))
        if not value or not all(parts) or len(parts) > 2:
            raise ConfigError(f"webhooks[{index}].secret_env: ${hook.secret_env} must hold the signing secret, "
                              "or two secrets separated by a comma during a rotation")
        secrets[hook.id] = parts
    return secrets


def load_config(path: Path, *, journal_url: str | None = None, cluster_secret: str | None = None) -> Config:
    """Read and check a config file; ``journal_url`` (`$ARENA_JOURNAL_URL`) wins over
    ``[journal] url``; ``cluster_secret`` is `$ARENA_CLUSTER_SECRET`. Raises ConfigError (one
    line, names the key)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror}") from exc
    try:
        data = tomllib.loads(text, parse_float=Decimal)  # a float as written: top_percent is exact
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    try:
        config = parse_config(data, journal_url=journal_url, cluster_secret=cluster_secret)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    data_dir = config.server.data_dir
    if not data_dir.is_absolute():
        # data_dir is relative to the config file, so `arena serve` works from any directory
        config = replace(config, server=replace(config.server, data_dir=(path.parent / data_dir).resolve()))
    return config


_REQUIRED = object()


class _Section:
    """Typed access to one TOML table that remembers its dotted name and unused keys."""

    def __init__(self, name: str, data: object) -> None:
        if not isinstance(data, dict):
            raise ConfigError(f"{name}: must be a table")
        self.name = name
        self.data: dict[str, Any] = data
        self.used: set[str] = set()

    def _get(self, key: str, default: object) -> object:
        self.used.add(key)
        if key not in self.data:
            if default is _REQUIRED:
                raise ConfigError(f"{self.name}.{key}: missing")
            return default
        return self.data[key]

    def fail(self, key: str, message: str) -> ConfigError:
        value = self.data.get(key)
        return ConfigError(f"{self.name}.{key}: {message} (got {str(value) if isinstance(value, Decimal) else repr(value)})")

    def int(self, key: str, default: object = _REQUIRED, low: int | None = None, high: int | None = None) -> int:
        value = self._get(key, default)
        if type(value) is not int:
            raise self.fail(key, "must be an integer")
        if (low is not None and value < low) or (high is not None and value > high):
            raise self.fail(key, f"must be between {low} and {high}" if high is not None else f"must be >= {low}")
        return value

    def number(self, key: str, default: object, low: float) -> float:
        value = self._get(key, default)
        if type(value) is Decimal:  # as config.toml's floats are read
            value = float(value)
        if type(value) not in (int, float) or not math.isfinite(value) or value < low:  # type: ignore[arg-type, operator]
            raise self.fail(key, f"must be a finite number >= {low}")
        return float(value)  # type: ignore[arg-type]

    def str(self, key: str, default: object = _REQUIRED, choices: tuple[str, ...] = ()) -> str:
        value = self._get(key, default)
        if not isinstance(value, str) or not value:
            raise self.fail(key, "must be a non-empty string")
        if choices and value not in choices:
            raise self.fail(key, "must be one of " + ", ".join(choices))
        return value

    def flag(self, key: builtins.str, default: builtins.bool) -> builtins.bool:
        value = self._get(key, default)
        if not isinstance(value, builtins.bool):
            raise self.fail(key, "must be true or false")
        return value

    def str_list(self, key: builtins.str, default: object) -> list[builtins.str]:  # `str` is the method above
        value = self._get(key, default)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, "must be a list of strings")
        return value

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise ConfigError(f"{self.name}.{unknown[0]}: unknown key")


def parse_config(data: dict[str, Any], *, journal_url: str | None = None, cluster_secret: str | None = None) -> Config:
    """The settings of a parsed config.toml; ``journal_url`` (from the environment) wins over
    ``[journal] url``; ``cluster_secret`` is `$ARENA_CLUSTER_SECRET`. Raises ConfigError."""
    root = _Section("config", data)
    server = _server(_Section("server", root._get("server", {})))
    journal = _journal(_Section("journal", root._get("journal", {})), journal_url)
    cluster_table = root._get("cluster", None)
    cluster = None
    if cluster_table is not None:
        cluster = _cluster(_Section("cluster", cluster_table), journal, cluster_secret)
    boards_table = _Section("boards", root._get("boards", {}))
    boards = {name: parse_board(name, body) for name, body in boards_table.data.items()}
    for name in boards:
        check_board_name(name)
    if len(boards) > server.max_boards:
        raise ConfigError(f"boards: {len(boards)} boards, more than server.max_boards ({server.max_boards})")
    servers = tuple(_game_server(i, entry) for i, entry in enumerate(_entries(root, "servers")))
    admins = tuple(_admin(i, entry) for i, entry in enumerate(_entries(root, "admins")))
    webhooks = tuple(_webhook(i, entry) for i, entry in enumerate(_entries(root, "webhooks")))
    for kind, ids in (("servers", [s.id for s in servers]), ("admins", [a.id for a in admins]),
                      ("webhooks", [w.id for w in webhooks])):
        duplicate = next((i for i in ids if ids.count(i) > 1), None)
        if duplicate is not None:
            raise ConfigError(f"{kind}: id {duplicate!r} is defined twice")
    holders: dict[str, str] = {}  # a token names one server or admin, or `source` is ambiguous
    entries = [(f"servers[{i}]", s.token_sha256) for i, s in enumerate(servers)]
    for entry, token in entries + [(f"admins[{i}]", a.token_sha256) for i, a in enumerate(admins)]:
        if token in holders:
            raise ConfigError(f"{entry}.token_sha256: the same token as {holders[token]}; give each its own (`arena token`)")
        holders[token] = entry
    root.done()
    return Config(server=server, servers=servers, admins=admins, boards=boards, journal=journal, cluster=cluster,
                  webhooks=webhooks)


def _entries(root: _Section, key: str) -> list[object]:
    value = root._get(key, [])
    if not isinstance(value, list):
        raise ConfigError(f"{key}: must be an array of tables ([[{key}]])")
    return value


def _server(s: _Section) -> ServerSettings:
    d = ServerSettings()
    settings = ServerSettings(
        host=s.str("host", d.host),
        port=s.int("port", d.port, 0, 65535),
        data_dir=Path(s.str("data_dir", str(d.data_dir))),
        durability=s.str("durability", d.durability, ("full", "normal")),
        max_batch=s.int("max_batch", d.max_batch, 1, 100_000),
        max_frame_bytes=s.int("max_frame_bytes", d.max_frame_bytes, 1024),
        max_in_flight_frames=s.int("max_in_flight_frames", d.max_in_flight_frames, 1),
        mailbox_events=s.int("mailbox_events", d.mailbox_events, 1),
        max_connections=s.int("max_connections", d.max_connections, 1),
        ping_interval_seconds=s.number("ping_interval_seconds", d.ping_interval_seconds, 0.1),
        ping_timeout_seconds=s.number("ping_timeout_seconds", d.ping_timeout_seconds, 0.1),
        max_restarts=s.int("max_restarts", d.max_restarts, 0),
        restart_window_seconds=s.number("restart_window_seconds", d.restart_window_seconds, 0.1),
        push_interval_ms=s.int("push_interval_ms", d.push_interval_ms, 1, 60_000),
        max_subscriptions=s.int("max_subscriptions", d.max_subscriptions, 0),
        max_live_connections=s.int("max_live_connections", d.max_live_connections, 0),
        max_view_members=s.int("max_view_members", d.max_view_members, 0),
        max_view_entries=s.int("max_view_entries", d.max_view_entries, 0),
        cors_origins=_cors_origins(s),
        snapshot_every_events=s.int("snapshot_every_events", d.snapshot_every_events, 0),
        idle_unload_seconds=s.number("idle_unload_seconds", d.idle_unload_seconds, 0),
        max_active_boards=s.int("max_active_boards", d.max_active_boards, 1),
        drain_seconds=s.number("drain_seconds", d.drain_seconds, 0),
        max_boards=s.int("max_boards", d.max_boards, 1),
        webhook_backoff_seconds=s.number("webhook_backoff_seconds", d.webhook_backoff_seconds, 0.001),
        webhook_timeout_seconds=s.number("webhook_timeout_seconds", d.webhook_timeout_seconds, 0.001),
    )
    s.done()
    return settings


_ORIGIN = re.compile(r"^[a-z][a-z0-9+.-]*://[^/?#\s]+$")


def _cors_origins(s: _Section) -> tuple[str, ...]:
    """``[]``, ``["*"]`` or origins as a browser sends them: scheme://host[:port], no path."""
    origins = s.str_list("cors_origins", [])
    if "*" in origins and origins != ["*"]:
        raise s.fail("cors_origins", '"*" must be the only entry')
    for origin in origins:
        if origin != "*" and not _ORIGIN.match(origin):
            raise s.fail("cors_origins", f"{origin!r} is not an origin like https://game.example (scheme://host[:port], no path)")
    return tuple(origins)


def _journal(s: _Section, url_from_env: str | None) -> JournalSettings:
    d = JournalSettings()
    backend = s.str("backend", d.backend, ("sqlite", "postgresql"))
    schema = s.str("schema", d.schema)
    if not _SCHEMA_NAME.match(schema):
        raise s.fail("schema", "must be 1..63 lowercase letters, digits or '_', not starting with a digit")
    # never `s.fail` for the URL: it would print it, and its password with it
    url = s._get("url", None)
    if url is not None and not (isinstance(url, str) and url.startswith(_POSTGRES_SCHEMES)):
        raise ConfigError("journal.url: must be a string starting with postgresql://")
    if url_from_env:
        if not url_from_env.startswith(_POSTGRES_SCHEMES):
            raise ConfigError("ARENA_JOURNAL_URL: must start with postgresql://")
        url = url_from_env
    if backend == "postgresql" and url is None:
        raise ConfigError('journal.url: missing: backend "postgresql" needs a URL (or $ARENA_JOURNAL_URL)')
    s.done()
    return JournalSettings(backend, url, schema)


_URL = re.compile(r"^https?://[^/?#\s]+/?$")


def _cluster(s: _Section, journal: JournalSettings, secret: str | None) -> ClusterSettings:
    if journal.backend != "postgresql":
        raise ConfigError('cluster: needs [journal] backend = "postgresql" (the nodes share its journal)')
    d = ClusterSettings()
    settings = ClusterSettings(
        node_id=s.str("node_id") if "node_id" in s.data else None,
        advertise_url=s.str("advertise_url").rstrip("/") if "advertise_url" in s.data else None,
        secret=secret or "",
        lease_seconds=s.number("lease_seconds", d.lease_seconds, 0.5),
        standbys=s.int("standbys", d.standbys, 0, 16),
    )
    if settings.advertise_url is not None and not _URL.match(settings.advertise_url):
        raise s.fail("advertise_url", "must be an http(s) URL like http://10.0.0.5:8080 (how peers reach this node)")
    s.done()
    return settings


def check_board_name(name: str) -> None:
    """Raises ConfigError unless ``name`` may name a board (it names its journal's file too)."""
    if not _BOARD_NAME.match(name):
        raise ConfigError(f"boards.{name}: board names are 1..64 letters, digits, '_' or '-'")


MAX_METADATA_BYTES = 4096


def _metadata(s: _Section) -> str | None:
    """A board's ``metadata``: a JSON object of at most 4 KB, kept as compact JSON text."""
    value = s._get("metadata", None)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise s.fail("metadata", "must be a table (a JSON object)")
    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:  # a TOML date, an integer beyond 64 bits
        raise s.fail("metadata", "must hold JSON values only") from exc
    if len(text) > MAX_METADATA_BYTES:
        raise s.fail("metadata", f"must be at most {MAX_METADATA_BYTES} bytes as JSON")
    return text.decode()


def parse_board(name: str, table: object) -> BoardSpec:
    """One ``[boards.NAME]`` table as a BoardSpec. Raises ConfigError."""
    s = _Section(f"boards.{name}", table)
    d = BoardSpec(name)
    kinds = [k.value for k in PeriodKind]
    periods = s.str_list("periods", ["alltime"])
    custom = _custom_periods(_Section(f"boards.{name}.custom_periods", s._get("custom_periods", {})))
    if not periods and not custom:
        raise s.fail("periods", "must name at least one period (or the board must have custom_periods)")
    for period in periods:
        if period not in kinds:
            raise s.fail("periods", f"{period!r} is not one of " + ", ".join(kinds))
    if len(set(periods)) != len(periods):
        raise s.fail("periods", "lists a period twice")
    periods = sorted(periods, key=kinds.index)
    timezone = s.str("timezone", "UTC")
    try:
        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise s.fail("timezone", "is not an IANA timezone") from exc
    min_value = s.int("min_value", d.min_value, -JSON_SAFE, JSON_SAFE)
    max_value = s.int("max_value", d.max_value, -JSON_SAFE, JSON_SAFE)
    if min_value > max_value:
        raise s.fail("max_value", f"must be >= min_value ({min_value})")
    league = _league(s)
    spec = BoardSpec(
        name=name,
        aggregation=Aggregation(s.str("aggregation", "best", tuple(a.value for a in Aggregation))),
        order=Order(s.str("order", "desc", tuple(o.value for o in Order))),
        tie=Tie(s.str("tie", "earliest", tuple(t.value for t in Tie))),
        periods=tuple(PeriodKind(p) for p in periods),
        timezone=timezone,
        min_value=min_value,
        max_value=max_value,
        close_grace_ms=s.int("close_grace_seconds", 60, 0, 86_400 * 31) * 1000,
        max_future_skew_ms=s.int("max_future_skew_seconds", 30, 0, 86_400) * 1000,
        keep_closed=s.int("keep_closed", 3, 0, 10_000),
        custom_periods=custom,
        prizes=_prizes(s, [*periods, *(c.name for c in custom)], () if league is None else league.tiers),
        metadata=_metadata(s),
        regions=_regions(s),
        regional_prizes=s.flag("regional_prizes", False),
        league=league,
    )
    if spec.league is not None and spec.regions:
        raise s.fail("league", "a board has regions or a league, not both")
    if spec.league is not None and len([k for k in spec.kinds if k != PeriodKind.ALLTIME]) != 1:
        raise s.fail("league", "needs exactly one period besides alltime (the season)")
    s.done()
    return spec


_TIER_NAME = re.compile(r"^[a-z0-9_]{1,32}$")


def _league(s: _Section) -> LeagueSpec | None:
    """``league = {size, tiers, promote, relegate}``."""
    if s._get("league", None) is None:
        return None
    t = _Section(f"{s.name}.league", s._get("league", None))
    tiers = t.str_list("tiers", _REQUIRED)
    if not tiers:
        raise t.fail("tiers", "must name at least one tier")
    _distinct_names(t, "tiers", tiers, _TIER_NAME, "tier", "a-z, 0-9, '_'")
    league = LeagueSpec(t.int("size", _REQUIRED, 2, 100_000), tuple(tiers), t.int("promote", 0, 0, 100_000),
                        t.int("relegate", 0, 0, 100_000))
    t.done()
    return league


_REGION_NAME = re.compile(r"^[a-z0-9_-]{1,32}$")


def _regions(s: _Section) -> tuple[str, ...]:
    """``regions``: 0..64 distinct names of 1..32 of ``[a-z0-9_-]``, in the order they rank in
    the partitions route."""
    regions = s.str_list("regions", [])
    if len(regions) > 64:
        raise s.fail("regions", "names at most 64 regions")
    _distinct_names(s, "regions", regions, _REGION_NAME, "region", "a-z, 0-9, '_', '-'")
    return tuple(regions)


def _distinct_names(s: _Section, key: str, names: list[str], pattern: re.Pattern[str], what: str, chars: str) -> None:
    """``names`` (of ``key``) each of 1..32 of ``chars`` (``pattern``), none twice."""
    for name in names:
        if not pattern.match(name):
            raise s.fail(key, f"{name!r}: a {what} name is 1..32 of {chars}")
    if len(set(names)) != len(names):
        raise s.fail(key, f"lists a {what} twice")


_PERIOD_NAME = re.compile(r"^[a-z0-9_-]{1,32}$")
_ANCHOR_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_RULE_KEYS = ("every_days", "every_hours", "start")


def _custom_periods(s: _Section) -> tuple[CustomPeriod, ...]:
    """``[boards.NAME.custom_periods]``: each ``P`` a table (or JSON object) of one window rule."""
    periods = []
    for name in s.data:
        if not isinstance(name, str) or not _PERIOD_NAME.match(name):
            raise ConfigError(f"{s.name}.{name}: a period name is 1..32 of a-z, 0-9, '_', '-'")
        if name in [kind.value for kind in PeriodKind]:
            raise ConfigError(f"{s.name}.{name}: is a built-in period kind; name a custom period otherwise")
        periods.append(CustomPeriod(name, _window_rule(_Section(f"{s.name}.{name}", s._get(name, None)))))
    s.done()
    return tuple(periods)


def _window_rule(s: _Section) -> EveryDays | EveryHours | OneOff:
    rules = [key for key in _RULE_KEYS if key in s.data]
    if len(rules) != 1:
        raise ConfigError(f"{s.name}: give exactly one of every_days (+ anchor), every_hours (+ anchor), start (+ end)")
    rule: EveryDays | EveryHours | OneOff
    if rules[0] == "every_days":
        anchor = s.str("anchor")
        try:
            day = date.fromisoformat(anchor) if _ANCHOR_DATE.match(anchor) else None
        except ValueError:
            day = None
        if day is None or day.year < 1970:
            raise s.fail("anchor", 'must be a local date "YYYY-MM-DD" (1970 or later)')
        rule = EveryDays(s.int("every_days", low=1, high=366), day)
    elif rules[0] == "every_hours":
        rule = EveryHours(s.int("every_hours", low=1, high=8784), _instant(s, "anchor"))
    else:
        rule = OneOff(_instant(s, "start"), _instant(s, "end"))
        if rule.end_ms <= rule.start_ms:
            raise s.fail("end", "must be after start")
    s.done()
    return rule


def _instant(s: _Section, key: str) -> int:
    text = s.str(key)
    try:
        ms = parse_rfc3339_ms(text)
    except ValueError:
        ms = -1
    if not 0 <= ms < MAX_MS:
        raise s.fail(key, 'must be an RFC 3339 time with an offset, "YYYY-MM-DDTHH:MM:SS+01:00" (1970 or later)')
    return ms
MAX_TIERS = 100
MAX_REWARD_CHARS = 64
PERCENT_DIGITS = 15
"""Significant digits of a `top_percent`: up to 15, a double's shortest repr gives back the
decimal as written, so a JSON parser that reads numbers as doubles keeps it exact too."""
PERCENT_FLOOR = Decimal("1e-20")
_RULES = ("ranks", "top_percent", "score")


def _prizes(board: _Section, periods: list[str], league_tiers: tuple[str, ...]) -> Prizes:
    """``prizes``: tiers per period name of the board (not alltime, which never closes), in the
    board's period order; on a league board a tier may name the league ``tier`` it is for."""
    s = _Section(f"{board.name}.prizes", board._get("prizes", {}))
    for period, tiers in s.data.items():
        if period == PeriodKind.ALLTIME.value:
            raise ConfigError(f"{s.name}.{period}: alltime never closes, so it has no prizes")
        if period not in periods:
            raise ConfigError(f"{s.name}.{period}: not a period of this board (" + ", ".join(periods) + ")")
        if not isinstance(tiers, list) or not 1 <= len(tiers) <= MAX_TIERS:
            raise ConfigError(f"{s.name}.{period}: must be 1..{MAX_TIERS} tiers ([[{s.name}.{period}]] tables)")
    return tuple(
        (period, tuple(_prize_tier(f"{s.name}.{period}[{i}]", tier, league_tiers) for i, tier in enumerate(s.data[period])))
        for period in periods if period in s.data
    )


def _prize_tier(name: str, table: object, league_tiers: tuple[str, ...]) -> PrizeTier:
    s = _Section(name, table)
    reward = s.str("reward")
    if len(reward) > MAX_REWARD_CHARS or not plain_text(reward):
        raise s.fail("reward", f"must be 1..{MAX_REWARD_CHARS} characters without control characters")
    league_tier = s._get("tier", None)
    if league_tier is not None and not league_tiers:
        raise s.fail("tier", "names a league tier, and this board has no league")
    if league_tier is not None and league_tier not in league_tiers:
        raise s.fail("tier", "is not one of the league's tiers: " + ", ".join(league_tiers))
    rules = [key for key in _RULES if key in s.data]
    if len(rules) != 1:
        raise ConfigError(f"{name}: needs exactly one of ranks, top_percent or score" + (f" (got {', '.join(rules)})" if rules else ""))
    if rules == ["ranks"]:
        ranks = s._get("ranks", _REQUIRED)
        if not (isinstance(ranks, list) and len(ranks) == 2 and all(type(r) is int for r in ranks)
                and 1 <= ranks[0] <= ranks[1] <= JSON_SAFE):
            raise s.fail("ranks", "must be [A, B] with integers 1 <= A <= B")
        tier = PrizeTier(reward, ranks=(ranks[0], ranks[1]))
    elif rules == ["top_percent"]:
        tier = PrizeTier(reward, top_percent=_percent(s, "top_percent"))
    else:
        tier = PrizeTier(reward, score=s.int("score", _REQUIRED, -JSON_SAFE, JSON_SAFE))
    s.done()
    return tier if league_tier is None else replace(tier, tier=league_tier)


def _percent(s: _Section, key: str) -> Fraction:
    """A percentage exactly as written: config.toml's floats arrive as their `Decimal` text; a
    float (a JSON parser's double) is read as its shortest repr, which is the decimal written
    whenever that has at most `PERCENT_DIGITS` significant digits. More digits are refused: a
    double may have lost them already."""
    value = s._get(key, _REQUIRED)
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise s.fail(key, "must be a number")
    written = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if not written.is_finite() or not 0 < written <= 100:
        raise s.fail(key, "must be > 0 and <= 100")
    if written < PERCENT_FLOOR:
        raise s.fail(key, f"must be at least {PERCENT_FLOOR}")
    if len(written.normalize().as_tuple().digits) > PERCENT_DIGITS:
        raise s.fail(key, f"must be written with at most {PERCENT_DIGITS} significant digits")
    return Fraction(written)


def _token_hash(s: _Section) -> str:
    value = s.str("token_sha256")
    if not _SHA256.match(value):
        raise s.fail("token_sha256", "must be 64 lowercase hex digits (see `arena token`)")
    return value


def _board_patterns(s: _Section) -> tuple[str, ...]:
    allowed = s.str_list("boards", ["*"])
    for board in allowed:
        if not _BOARD_PATTERN.match(board):
            raise s.fail("boards", f"{board!r} is neither a board name nor a pattern with one trailing '*' (\"cup-*\")")
    return tuple(allowed)


def _game_server(index: int, entry: object) -> GameServer:
    s = _Section(f"servers[{index}]", entry)
    server_id = s.str("id")
    token = _token_hash(s)
    allowed = _board_patterns(s)
    s.done()
    return GameServer(server_id, token, allowed)


_WEBHOOK_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_WEBHOOK_URL = re.compile(r"^https?://[^/?#\s]+(/\S*)?$")


def _webhook(index: int, entry: object) -> Webhook:
    s = _Section(f"webhooks[{index}]", entry)
    hook_id = s.str("id")
    if not _WEBHOOK_ID.match(hook_id):
        raise s.fail("id", "must be 1..64 of A-Z a-z 0-9 _ - (it is part of the admin routes' paths)")
    url = s.str("url")
    if not _WEBHOOK_URL.match(url):
        raise s.fail("url", "must be an http:// or https:// url")
    secret_env = s.str("secret_env")
    if not _ENV_NAME.match(secret_env):
        raise s.fail("secret_env", "must be the name of an environment variable (the secret itself is never in the config)")
    boards = _board_patterns(s)
    max_age_hours = s.number("max_age_hours", DEFAULT_MAX_AGE_HOURS, 0)
    if max_age_hours <= 0:
        raise s.fail("max_age_hours", "must be > 0")
    s.done()
    return Webhook(hook_id, url, secret_env, boards, max_age_hours)


def _admin(index: int, entry: object) -> Admin:
    s = _Section(f"admins[{index}]", entry)
    admin = Admin(s.str("id"), _token_hash(s))
    s.done()
    return admin

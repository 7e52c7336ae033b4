"""config.toml text of a `arena.config.Config`: the one writer of the configs that the load tests
and the tests give a child `arena serve`, `arena rebuild` or `arena verify`. It is the inverse of
`arena.config.parse_config`: loading what it writes gives the same Config back."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from arena.config import Config, ServerSettings
from arena.engine.spec import BoardSpec


def toml_value(value: object) -> str:
    """A Python value as a TOML value (the types a config holds)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def _board_table(spec: BoardSpec) -> dict[str, object]:
    table: dict[str, object] = {
        "aggregation": spec.aggregation.value,
        "order": spec.order.value,
        "tie": spec.tie.value,
        "periods": [k.value for k in spec.periods],
        "timezone": spec.timezone,
        "min_value": spec.min_value,
        "max_value": spec.max_value,
        "close_grace_seconds": spec.close_grace_ms // 1000,
        "max_future_skew_seconds": spec.max_future_skew_ms // 1000,
        "keep_closed": spec.keep_closed,
    }
    if spec.regions:
        table["regions"] = list(spec.regions)
        table["regional_prizes"] = spec.regional_prizes
    return table


def config_toml(config: Config) -> str:
    """Every setting of ``config`` written out, defaults included (but the cluster's secret)."""

    def table(header: str, body: dict[str, object]) -> list[str]:
        return [header] + [f"{key} = {toml_value(value)}" for key, value in body.items()] + [""]

    server: ServerSettings = config.server
    lines = table("[server]", {f.name: getattr(server, f.name) for f in dataclasses.fields(server)})
    journal = {f.name: getattr(config.journal, f.name) for f in dataclasses.fields(config.journal)}
    lines += table("[journal]", {key: value for key, value in journal.items() if value is not None})
    if config.cluster is not None:  # its secret is $ARENA_CLUSTER_SECRET's, never the file's
        cluster = {f.name: getattr(config.cluster, f.name) for f in dataclasses.fields(config.cluster) if f.name != "secret"}
        lines += table("[cluster]", {key: value for key, value in cluster.items() if value is not None})
    for game_server in config.servers:
        lines += table("[[servers]]", {"id": game_server.id, "token_sha256": game_server.token_sha256,
                                       "boards": list(game_server.boards)})
    for admin in config.admins:
        lines += table("[[admins]]", {"id": admin.id, "token_sha256": admin.token_sha256})
    for hook in config.webhooks:
        lines += table("[[webhooks]]", {f.name: getattr(hook, f.name) for f in dataclasses.fields(hook)})
    for name, spec in config.boards.items():
        lines += table(f"[boards.{name}]", _board_table(spec))
        for custom in spec.custom_periods:
            lines += table(f"[boards.{name}.custom_periods.{custom.name}]", custom.definition())
        if spec.league is not None:
            lines += table(f"[boards.{name}.league]", spec.league.document())
        for period, tiers in spec.prizes:
            for tier in tiers:  # a float top_percent's repr is the decimal as written (arena.config)
                lines += table(f"[[boards.{name}.prizes.{period}]]", tier.as_json())
    return "\n".join(lines)


def write_config(config: Config, path: Path) -> Path:
    """Write ``config`` as ``path`` (replacing it); returns ``path``."""
    path.write_text(config_toml(config))
    return path

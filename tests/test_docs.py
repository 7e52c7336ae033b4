"""The documentation ships with the code and stands on its own: every link of README.md and
docs/*.md resolves to a file (and a heading, for an anchor) inside the repository, every key
that arena/config.py accepts is in docs/configuration.md, and every metric the server registers
is in docs/metrics.md. Keys and metrics are read from the code, so a new one fails here until
its page names it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
_CODE_SPAN = re.compile(r"`+[^`\n]*`+")
_LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=\"([^\"]+)\"", re.I)
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def _prose(text: str) -> str:
    """The text without fenced blocks and code spans, where brackets are not links."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def links(page: Path) -> list[str]:
    prose = _prose(page.read_text())
    return _LINK.findall(prose) + _HTML_LINK.findall(prose)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text())):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_link_resolves_inside_the_repository(page: Path) -> None:
    for target in links(page):
        assert not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I), f"{page.name}: {target} leaves the repository"
        assert not target.startswith("/"), f"{page.name}: {target} is absolute; link relative to the page"
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.is_relative_to(ROOT), f"{page.name}: {target} leaves the repository"
        assert resolved.exists(), f"{page.name}: {target} names no file"
        if anchor:
            assert resolved.suffix == ".md", f"{page.name}: {target}: an anchor into a file that is not Markdown"
            assert anchor in anchors(resolved), f"{page.name}: {target}: no such heading in {resolved.name}"


def test_the_readme_is_short_and_links_every_docs_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    linked = {target.partition("#")[0] for target in links(ROOT / "README.md")}
    for page in (ROOT / "docs").glob("*.md"):
        assert f"docs/{page.name}" in linked, f"README.md does not link docs/{page.name}"


def test_the_link_checker_sees_links_and_headings() -> None:
    page = "[a](docs/x.md#b) `[not](a-link)` ![img](y.png)\n```\n[nor](this)\n```\n<img src=\"z.png\">"
    assert _LINK.findall(_prose(page)) + _HTML_LINK.findall(_prose(page)) == ["docs/x.md#b", "y.png", "z.png"]
    assert slug("Upgrades and `arena migrate`") == "upgrades-and-arena-migrate"
    assert slug("Public readers: what one connection can cost") == "public-readers-what-one-connection-can-cost"


_SECTION_READERS = {"int", "str", "number", "str_list", "_get"}


def config_keys() -> set[str]:
    """Every key arena/config.py reads: the first argument of each typed read of a TOML table
    (`_Section.int`, `.str`, …) and of each array of tables (`_entries`)."""
    tree = ast.parse((ROOT / "arena" / "config.py").read_text())
    keys = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        args = node.args
        if isinstance(func, ast.Attribute) and func.attr in _SECTION_READERS and args:
            first = args[0]
        elif isinstance(func, ast.Name) and func.id == "_entries" and len(args) == 2:
            first = args[1]
        else:
            continue
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            keys.add(first.value)
    return keys


def test_every_config_key_is_documented() -> None:
    keys = config_keys()
    assert {"host", "snapshot_every_events", "keep_closed", "schema", "standbys", "servers", "token_sha256"} <= keys
    page = (ROOT / "docs" / "configuration.md").read_text()
    missing = sorted(k for k in keys if not re.search(rf"(`|\[){re.escape(k)}(`|\])", page))
    assert not missing, f"docs/configuration.md does not name {missing}"


_METRIC_TYPES = {"Counter": "_total", "CounterMetricFamily": "_total",
                 "Gauge": "", "GaugeMetricFamily": "", "Histogram": "", "Summary": "", "Info": "_info",
                 "Latencies": ""}  # arena.metrics' histogram counted in plain lists


def metric_names() -> set[str]:
    """Every series name the server registers: the first argument of each prometheus_client
    metric (or metric family of a custom collector) built in arena/, as /metrics shows it (a
    counter's name ends in _total)."""
    names = set()
    for source in (ROOT / "arena").rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _METRIC_TYPES):
                continue
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                name = node.args[0].value
                if name.startswith("arena_"):
                    names.add(name + _METRIC_TYPES[node.func.id])
    return names


def test_every_metric_is_documented() -> None:
    names = metric_names()
    assert {"arena_events_total", "arena_board_ready", "arena_takeover_seconds", "arena_journal_wal_bytes"} <= names
    page = (ROOT / "docs" / "metrics.md").read_text()
    missing = sorted(n for n in names if f"`{n}`" not in page)
    assert not missing, f"docs/metrics.md does not name {missing}"


def test_the_metrics_page_names_each_series_once_in_its_tables() -> None:
    rows = re.findall(r"^\| `(arena_\w+)` \|", (ROOT / "docs" / "metrics.md").read_text(), re.M)
    assert len(rows) == len(set(rows))
    assert set(rows) == metric_names(), "a row of docs/metrics.md names no registered metric"

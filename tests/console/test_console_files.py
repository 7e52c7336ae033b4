"""`GET /console` and its files over HTTP, and what the files may not contain: the page loads
nothing from another host, runs no inline script or handler, and never parses text as HTML."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import httpx
import pytest

from arena.api.console import FILES

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "arena" / "console"
SVG_NAMESPACE = "http://www.w3.org/2000/svg"


pytestmark = pytest.mark.server({"b": {}}, fault_injection=False)  # for the `http` fixture


async def test_the_page_and_its_files_carry_a_self_only_content_security_policy(http: httpx.AsyncClient) -> None:
    page = await http.get("/console")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = dict(part.strip().split(" ", 1) for part in page.headers["content-security-policy"].split(";"))
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == "'self'" and policy["connect-src"] == "'self'"
    for name in re.findall(r'(?:src|href)="/console/([^"]+)"', page.text):
        asset = await http.get(f"/console/{name}")
        assert asset.status_code == 200, name
        assert asset.headers["content-security-policy"] == page.headers["content-security-policy"]


async def test_an_unknown_file_is_a_json_404(http: httpx.AsyncClient) -> None:
    answer = await http.get("/console/nope.js")
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"


def test_no_inline_script_or_handler_and_no_other_host() -> None:
    html = (SOURCES / "index.html").read_text()
    assert not re.search(r"\son[a-z]+\s*=", html, re.I), "an inline event handler"
    assert all("src=" in tag for tag in re.findall(r"<script[^>]*>", html)), "an inline script"
    for path in SOURCES.iterdir():
        if path.suffix in (".html", ".js", ".css", ".svg"):
            text = path.read_text().replace(SVG_NAMESPACE, "")
            assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text.replace("://${location.host}", "")), path.name


def test_no_text_is_ever_parsed_as_html() -> None:
    for path in SOURCES.glob("*.js"):
        text = path.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert sink not in text, f"{path.name} uses {sink}"


def test_every_console_file_is_package_data() -> None:
    """A non-editable install ships what the route serves."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["arena.console"]
    assert set(FILES) == {p.name for p in SOURCES.iterdir() if p.is_file() and p.suffix != ".py"}
    assert all(any(fnmatch(name, pattern) for pattern in patterns) for name in FILES)

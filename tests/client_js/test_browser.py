"""The browser build of clients/js in a real headless Chromium: a page served by a second HTTP
server (another origin) imports the built ESM and shows a live top 10 and "my rank", through CORS
(`cors_origins` lists the page's origin) over `/v1/live`, HTTP queries and server-sent events."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from playwright.async_api import expect

from support.browser import Watched, chromium
from support.node import PACKAGE, in_package
from support.server import Client, InProcessServer, event, make_config, now_ms, token_for

BOARDS = {"high_score": {"periods": ["alltime"]}}
WAIT_MS = 15_000

PAGE = """<!doctype html>
<meta charset="utf-8">
<title>arena-client in a page</title>
<link rel="icon" href="data:,">
<ol id="top"></ol>
<p id="my-rank">…</p>
<p id="asked">…</p>
<p id="streamed">…</p>
<script type="module">
import { ArenaClient, subscribeEvents } from "./arena-client/index.js";
const server = new URLSearchParams(location.search).get("server");
const client = new ArenaClient({ urls: [server] });
client.subscribe({ op: "top", board: "high_score", period: "alltime", limit: 10 }, (update) => {
  document.getElementById("top").replaceChildren(...update.entries.map((e) => {
    const li = document.createElement("li");
    li.textContent = `${e.member} ${e.score}`;
    return li;
  }));
});
client.subscribe({ op: "rank", board: "high_score", period: "alltime", member: "me" }, (update) => {
  document.getElementById("my-rank").textContent = update.entry ? `rank ${update.entry.rank} of ${update.size}` : "not ranked";
});
const asked = await client.rank("high_score", "alltime", "nobody");
const top = await client.top("high_score", "alltime", { limit: 1 });
document.getElementById("asked").textContent = `${asked.entry === null ? "absent" : "present"}, leader ${top.entries[0].member}`;
subscribeEvents(server, { op: "rank", board: "high_score", period: "alltime", member: "me" }, (update) => {
  document.getElementById("streamed").textContent = update.entry ? `streamed rank ${update.entry.rank}` : "streamed absent";
});
</script>
"""


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def page_server(root: Path) -> Iterator[str]:
    """A static HTTP server of ``root`` on a free loopback port (the page's origin); its URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


async def test_a_page_from_another_origin_shows_a_live_top_10_and_my_rank(tmp_path: Path) -> None:
    build = in_package("npm", "run", "build")
    assert build.returncode == 0, build.stdout + build.stderr
    root = tmp_path / "site"
    shutil.copytree(PACKAGE / "dist", root / "arena-client")
    (root / "index.html").write_text(PAGE)
    now = now_ms()
    with page_server(root) as origin:
        config = make_config(tmp_path / "data", BOARDS, cors_origins=(origin,))
        async with InProcessServer(config) as server, chromium() as browser:
            client = await Client.connect(server.ws_url, token_for("gs"))
            try:
                await client.submit([event("high_score", f"p{i:02d}", 10 * i, now, f"p{i}") for i in range(1, 13)])
                watched = await Watched.open(browser, f"{origin}/index.html?server={server.url}")
                page = watched.page
                await expect(page.locator("#top li")).to_have_count(10, timeout=WAIT_MS)
                await expect(page.locator("#top li").first).to_have_text("p12 120", timeout=WAIT_MS)
                await expect(page.locator("#my-rank")).to_have_text("not ranked", timeout=WAIT_MS)
                await expect(page.locator("#asked")).to_have_text("absent, leader p12", timeout=WAIT_MS)
                await expect(page.locator("#streamed")).to_have_text("streamed absent", timeout=WAIT_MS)

                await client.submit([event("high_score", "me", 1000, now, "me-1")])
                await expect(page.locator("#top li").first).to_have_text("me 1000", timeout=WAIT_MS)
                await expect(page.locator("#my-rank")).to_have_text("rank 1 of 13", timeout=WAIT_MS)
                await expect(page.locator("#streamed")).to_have_text("streamed rank 1", timeout=WAIT_MS)
                assert watched.errors == [], watched.errors
                assert {r.split("/")[2] for r in watched.requests} == {origin.split("/")[2], server.url.split("/")[2]}
            finally:
                await client.close()

"""A browser page holding many live views (clients/js over `/v1/live`, from another origin) while
events change them: the page's CPU and the updates it receives.

    (cd clients/js && npm ci && npm run build) && python -m loadtest.browser_views --views 1000 --seconds 10

One `arena serve` (the `bench` board, `max_subscriptions` raised to ``--views``, the page's origin
in `cors_origins`), a headless Chromium (the system's, through Playwright) on a page that
subscribes ``--views`` rank views (members m0…), and a Python writer sending ``--rate`` events/s
to those members. The page's CPU is Chromium's own account (`Performance.getMetrics`:
TaskDuration, ScriptDuration) over the measured seconds, as a fraction of one core.
Exit code 0, or 2 when Chromium, Node.js's build or Playwright is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
import shutil
import sys
import tempfile
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from arena.client import ArenaClient, EventFields
from loadtest.arena_client import ArenaServer
from loadtest.stats import fmt_int, progress

ROOT = Path(__file__).resolve().parents[1]
DIST = ROOT / "clients" / "js" / "dist"

PAGE = """<!doctype html>
<meta charset="utf-8"><link rel="icon" href="data:,">
<script type="module">
import { ArenaClient } from "./arena-client/index.js";
const query = new URLSearchParams(location.search);
const client = new ArenaClient({ urls: [query.get("server")] });
window.updates = 0;
window.answered = new Set();
for (let i = 0; i < Number(query.get("views")); i += 1) {
  const el = document.body.appendChild(document.createElement("p"));
  client.subscribe({ op: "rank", board: query.get("board"), period: "alltime", member: `m${i}` }, (u) => {
    window.updates += 1;
    window.answered.add(i);
    el.textContent = u.entry ? `m${i}: #${u.entry.rank} (${u.entry.score})` : `m${i}: not ranked`;
  });
}
</script>
"""


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


async def write(base_url: str, token: str, board: str, views: int, rate: int, seconds: float) -> int:
    """Send ``rate`` events/s to members m0..m{views-1} for ``seconds``; the events sent."""
    sent = 0
    async with ArenaClient(base_url, token) as client:
        start = time.monotonic()
        tick = 0
        while time.monotonic() - start < seconds:
            tick += 1
            events: list[EventFields] = [{"board": board, "member": f"m{random.randrange(views)}", "value": random.randrange(1_000_000_000)}
                      for _ in range(max(1, rate // 10))]
            await client.submit_many(events)
            sent += len(events)
            await asyncio.sleep(max(0.0, start + tick / 10 - time.monotonic()))
    return sent


async def measure(a: argparse.Namespace, chromium: str) -> int:
    from playwright.async_api import async_playwright

    with tempfile.TemporaryDirectory(prefix="arena-browser-views-") as tmp:
        site = Path(tmp) / "site"
        shutil.copytree(DIST, site / "arena-client")
        (site / "index.html").write_text(PAGE)
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(site)))
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        origin = f"http://127.0.0.1:{httpd.server_address[1]}"
        server = ArenaServer()
        settings = dataclasses.replace(server.config.server, max_subscriptions=a.views, cors_origins=(origin,))
        server.config = dataclasses.replace(server.config, server=settings)
        try:
            target = server.start()
            progress(f"arena serving on {target.base_url}; page on {origin}")
            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(executable_path=chromium, headless=True)
                page = await browser.new_page()
                cdp = await page.context.new_cdp_session(page)
                await cdp.send("Performance.enable")
                await page.goto(f"{origin}/index.html?server={target.base_url}&views={a.views}&board={target.board}")
                await page.wait_for_function(f"window.answered && window.answered.size === {a.views}", timeout=120_000)
                progress(f"{a.views} views answered; writing {a.rate} events/s for {a.seconds:g} s")

                async def metrics() -> dict[str, float]:
                    answer = await cdp.send("Performance.getMetrics")
                    return {m["name"]: float(m["value"]) for m in answer["metrics"]}

                before, updates_before, wall = await metrics(), await page.evaluate("window.updates"), time.monotonic()
                sent = await write(target.base_url, target.token, target.board, a.views, a.rate, a.seconds)
                after, updates_after, elapsed = await metrics(), await page.evaluate("window.updates"), time.monotonic() - wall
                await browser.close()
        finally:
            server.stop()
            server.cleanup()
            httpd.shutdown()
            httpd.server_close()
    task = (after["TaskDuration"] - before["TaskDuration"]) / elapsed
    script = (after["ScriptDuration"] - before["ScriptDuration"]) / elapsed
    print(f"views {a.views}, events sent {fmt_int(sent)} in {elapsed:.1f} s ({fmt_int(sent / elapsed)}/s)")
    print(f"updates received {fmt_int(updates_after - updates_before)} ({fmt_int((updates_after - updates_before) / elapsed)}/s)")
    print(f"page CPU (cores): all tasks {task:.3f}, script {script:.3f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.browser_views", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--views", type=int, default=1000, help="live views in the page (default 1000)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds (default 10)")
    parser.add_argument("--rate", type=int, default=2000, help="events/s to the views' members (default 2000)")
    a = parser.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None or not (DIST / "index.js").exists():
        print("error: needs a system Chromium and the built client (cd clients/js && npm ci && npm run build)", file=sys.stderr)
        return 2
    return asyncio.run(measure(a, chromium))


if __name__ == "__main__":
    sys.exit(main())

"""The operator console in a real headless Chromium, against a real server on a pinned clock.

Every test ends by checking what the page did (the `console` fixture): no error or warning in
the browser console, no uncaught exception, no dialog, and no request to any host but the
server's. Screenshots go to `$ARENA_SCREENSHOTS` (default: the test's tmp_path/screenshots);
with `ARENA_DOCS_SCREENSHOTS=1` the layout test writes docs/console*.png (shown in README.md and docs/operations.md).
"""

from __future__ import annotations

import calendar
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, ViewportSize, expect

from arena.config import ClusterSettings, JournalSettings
from support.browser import PHONE, Watched, chromium
from support.server import ADMIN_TOKEN, Client, InProcessServer, event, make_config, token_for

NOW = calendar.timegm((2026, 12, 2, 12, 0, 0)) * 1000
DAY = 86_400_000
XSS = "<img src=x onerror=alert(1)>"
BOARDS: dict[str, dict[str, Any]] = {
    "high_score": {"periods": ["alltime", "daily"]},
    "coins": {"aggregation": "sum", "periods": ["alltime", "weekly"]},
    "speedrun": {"order": "asc"},
    "league": {"periods": ["daily"], "league": {"size": 2, "tiers": ["bronze", "silver"]}},
}
DOCS = Path(__file__).resolve().parents[2] / "docs"
NARROW_PHONE = ViewportSize(width=375, height=812)
WAIT_MS = 10_000

expect.set_options(timeout=WAIT_MS)


@dataclass
class Console:
    server: InProcessServer
    browser: Browser
    client: Client
    http: httpx.AsyncClient
    screenshots: Path
    pages: list[Watched] = field(default_factory=list)

    async def open(self, **viewport: Any) -> Page:
        watched = await Watched.open(self.browser, f"{self.server.url}/console", **viewport)
        self.pages.append(watched)
        await expect(watched.page.locator("#live-state")).to_have_text("live")
        return watched.page

    async def players(self, n: int, day: int = NOW, prefix: str = "p") -> None:
        """Members p00..p{n-1} with p{i} scoring 10*i on high_score."""
        await self.client.submit([event("high_score", f"{prefix}{i:02d}", 10 * i, day, f"{prefix}{day}-{i}") for i in range(n)])

    async def clock(self, now: int) -> None:
        assert (await self.http.post("/v1/_test/clock", json={"now_ms": now})).status_code == 200


@pytest.fixture
async def console(tmp_path: Path) -> AsyncIterator[Console]:
    # every board loaded at start: the overview lists each one's tables
    async with chromium() as browser, InProcessServer(make_config(tmp_path / "data", BOARDS, idle_unload_seconds=0)) as server:
        async with httpx.AsyncClient(base_url=server.url) as http:
            client = await Client.connect(server.ws_url, token_for("gs"))
            shots = Path(os.environ.get("ARENA_SCREENSHOTS", tmp_path / "screenshots"))
            rig = Console(server, browser, client, http, shots)
            await rig.clock(NOW)
            try:
                yield rig
            finally:
                await client.close()
            for watched in rig.pages:
                await watched.page.close()
    for watched in rig.pages:
        assert watched.errors == [], "errors in the browser console"
        assert watched.dialogs == [], "a dialog opened"
        strangers = [url for url in watched.requests if not url.startswith((server.url + "/", server.ws_url.rsplit("/v1", 1)[0] + "/"))]
        assert strangers == [], "requests left the server"


def standings(page: Page) -> Any:
    return page.locator("#st-table tbody tr")


async def test_the_overview_shows_every_board_with_its_tables(console: Console) -> None:
    await console.players(3)
    page = await console.open()
    for board in BOARDS:
        await expect(page.locator(f'#boards-table tr[data-board="{board}"]').first).to_contain_text("ready")
    rows = page.locator('#boards-table tr[data-board="high_score"]')
    await expect(rows).to_have_count(2)
    await expect(rows.nth(0)).to_contain_text("best, desc, ties: earliest")
    await expect(rows.nth(1)).to_contain_text("2026-12-02")
    await expect(rows.nth(1).locator("td.num").first).to_have_text("3")
    await expect(page.locator('#boards-table tr[data-board="coins"]').nth(1)).to_contain_text("2026-W49")
    await expect(page.locator("#boards-table .owner")).to_have_count(0)  # sqlite: no cluster, no owner
    await expect(page.locator("#charts-scope")).to_have_text("This server's figures (a single node).")


async def test_on_postgresql_the_overview_names_each_boards_owner_node(tmp_path: Path, pg_journal: JournalSettings) -> None:
    cluster = ClusterSettings(node_id="solo", secret="a-cluster-secret-for-tests")
    async with chromium() as browser, InProcessServer(make_config(tmp_path, BOARDS, journal=pg_journal, cluster=cluster)) as server:
        async with httpx.AsyncClient(base_url=server.url) as http:
            node = (await http.get("/v1/cluster")).json()["node"]
        assert node is not None  # a cluster of one
        watched = await Watched.open(browser, f"{server.url}/console")
        for board in BOARDS:
            await expect(watched.page.locator(f'#boards-table tr[data-board="{board}"] th')).to_contain_text(f"owner: {node}")
        await expect(watched.page.locator("#charts-scope")).to_contain_text(f"The whole cluster: 1 node ({node})")
        one = await Watched.open(browser, f"{server.url}/console?node={node}")
        await expect(one.page.locator("#charts-scope")).to_contain_text(f"Node {node} only")
        await expect(one.page.locator("#legend-events li").first).to_have_text("accepted: 0")
        for page in (watched.page, one.page):
            await page.close()
    assert watched.errors == one.errors == [] and watched.dialogs == one.dialogs == []


async def test_a_submit_over_the_websocket_appears_in_the_open_standings_without_a_reload(console: Console) -> None:
    await console.players(3)
    page = await console.open()
    await expect(standings(page)).to_have_count(3)
    await page.evaluate("window.notReloaded = true")
    await console.client.submit([event("high_score", "newcomer", 1000, NOW, "new")])
    await expect(standings(page).first).to_contain_text("newcomer")
    await expect(page.locator("#st-caption")).to_contain_text("4 members")
    assert await page.evaluate("window.notReloaded") is True


async def test_paging_and_the_period_id_picker_show_the_right_rows(console: Console) -> None:
    await console.players(25)
    await console.clock(NOW + DAY)  # 2026-12-02 is closed and retained; 2026-12-03 is open
    await console.players(2, NOW + DAY, prefix="q")
    page = await console.open()
    await page.select_option("#st-period", "daily")
    await expect(page.locator("#st-caption")).to_contain_text("2026-12-03")
    await expect(standings(page)).to_have_count(2)
    await page.select_option("#st-period-id", "2026-12-02")
    await expect(page.locator("#st-caption")).to_contain_text("high_score / daily / 2026-12-02: closed, 25 members")
    await page.get_by_role("button", name="Next page").click()
    await expect(page.locator("#st-caption")).to_contain_text("ranks 11–20")
    expected = (await console.http.get("/v1/boards/high_score/daily/top?period_id=2026-12-02&limit=10&offset=10")).json()
    members = [e["member"] for e in expected["entries"]]
    await expect(standings(page).locator("td.member")).to_have_text(members)
    await page.get_by_role("button", name="Next page").click()
    await expect(standings(page)).to_have_count(5)
    await expect(page.get_by_role("button", name="Next page")).to_be_disabled()
    await expect(page.locator("#st-page")).to_have_text("page 3 of 3")


async def test_the_partition_picker_shows_a_divisions_standings_and_search_a_members_division(console: Console) -> None:
    await console.client.submit([event("league", m, v, NOW, f"l-{m}") for m, v in (("ann", 5), ("bob", 9), ("cid", 7))])
    page = await console.open()
    await page.select_option("#st-board", "league")
    await expect(page.locator("#st-caption")).to_contain_text("league / daily / 2026-12-02: open, 3 members")
    await expect(page.locator("#st-partition option")).to_have_text(["global", "bronze-1 (2)", "bronze-2 (1)"])
    await page.select_option("#st-partition", "bronze-1")
    await expect(page.locator("#st-caption")).to_contain_text("league / daily / 2026-12-02 / bronze-1: open, 2 members")
    await expect(standings(page).locator("td.member")).to_have_text(["bob", "ann"])
    await page.select_option("#st-partition", "")
    await expect(standings(page)).to_have_count(3)
    await page.select_option("#se-board", "league")
    await page.select_option("#se-period", "daily")
    await page.fill("#se-member", "ci")  # as typed: the matches show each one's division
    await expect(page.locator("#se-match-list li")).to_have_count(1)
    await expect(page.locator("#se-match-list li .division")).to_have_text(["bronze-2"])
    await page.fill("#se-member", "ann")
    await page.get_by_role("button", name="Search").click()
    await expect(page.locator("#se-division")).to_have_text("bronze-1")
    await page.select_option("#se-board", "high_score")
    await page.get_by_role("button", name="Search").click()
    await expect(page.locator("#se-result")).to_contain_text("Not in high_score")
    await expect(page.locator("#se-division")).to_have_count(0)  # a board without a league: no division


async def test_search_finds_a_members_rank_neighbours_percentile_and_every_table(console: Console) -> None:
    await console.players(25)
    page = await console.open()
    await page.fill("#se-member", "p20")
    await page.get_by_role("button", name="Search").click()
    await expect(page.locator("#se-rank")).to_have_text("5 of 25")
    await expect(page.locator("#se-better")).to_have_text("better than 80.0 % of the 25 members")  # rank 5 of 25
    await expect(page.locator("#se-around tbody tr")).to_have_count(10)  # ranks 1..10: clipped at the top
    await expect(page.locator("#se-around tr.me")).to_contain_text("p20")
    tables = page.locator("#se-tables tbody tr")  # the open and retained tables of each period
    listed = (await console.http.get("/v1/boards/high_score/daily/periods")).json()["periods"]
    await expect(tables).to_have_count(1 + len(listed))
    await expect(tables.filter(has_text="alltime")).to_contain_text("5 of 25")
    await expect(tables.filter(has_text="2026-12-02")).to_contain_text("5 of 25")
    await expect(tables.filter(has_text="2026-12-01 (closed)")).to_contain_text("not in table")
    await page.fill("#se-member", "nobody")
    await page.get_by_role("button", name="Search").click()
    await expect(page.locator("#se-result")).to_contain_text("Not in high_score / alltime / alltime: nobody")


async def test_the_charts_show_the_events_just_sent(console: Console) -> None:
    page = await console.open()
    await console.players(7)
    await console.client.submit([event("high_score", "p00", 0, NOW, f"p{NOW}-0"), event("high_score", "p01", 10, NOW, f"p{NOW}-1"),
                                 event("high_score", "x", -1, NOW, "negative")])
    legend = page.locator("#legend-events li")
    await expect(legend.filter(has_text="accepted")).to_have_text("accepted: 7")
    await expect(legend.filter(has_text="duplicate")).to_have_text("duplicate: 2")
    await expect(legend.filter(has_text="rejected")).to_have_text("rejected value_out_of_range: 1")
    await expect(page.locator('#chart-events path[data-series="accepted"]')).to_have_count(1)
    await expect(page.locator("#legend-lag li").first).to_contain_text("over 2")  # two batches became visible


async def use_token(page: Page) -> None:
    await page.fill("#ad-token", ADMIN_TOKEN)
    await page.get_by_role("button", name="Use token").click()
    await expect(page.locator("#ad-state")).to_contain_text("Admin token of ops set")


async def audit(page: Page, member: str) -> None:
    await page.select_option("#ad-board", "high_score")
    await page.fill("#ad-member", member)
    await page.get_by_role("button", name="Show audit trail").click()
    await expect(page.locator("#ad-message")).to_contain_text(f"of {member} on high_score")


async def test_a_void_through_the_page_changes_the_standings_and_the_audit_shows_it_voided(console: Console) -> None:
    await console.players(5)
    await console.client.submit([event("high_score", "p04", 15, NOW, "p04-low")])
    page = await console.open()
    await expect(standings(page).first).to_contain_text("p04")
    await use_token(page)
    await audit(page, "p04")
    voided = page.locator(f'#audit-table tr[data-key="p{NOW}-4"]')
    await voided.get_by_role("button", name="Void…").click()
    await expect(page.locator("#void-what")).to_contain_text(f"Void event p{NOW}-4 on high_score?")
    await page.fill("#void-reason", "cheating")
    await page.get_by_role("button", name="Confirm void").click()
    await expect(voided).to_contain_text("voided")
    await expect(voided.locator(".voided-by")).to_contain_text("by ops at 2026-12-02 12:00:00Z")
    await expect(voided.locator(".voided-by")).to_contain_text(": cheating")
    await expect(voided.get_by_role("button", name="Void…")).to_be_disabled()
    await expect(standings(page).first).to_contain_text("p03")  # p04 fell from 40 to its other event, 15
    await expect(standings(page).filter(has_text="p04")).to_contain_text("15")


async def test_a_ban_through_the_page_removes_the_member_after_a_typed_confirmation(console: Console) -> None:
    await console.players(5)
    page = await console.open()
    await use_token(page)
    await page.select_option("#ban-board", "high_score")
    await page.fill("#ban-member", "p03")
    await page.fill("#ban-reason", "bot")
    await page.fill("#ban-confirm", "p3")
    await page.get_by_role("button", name="Ban member").click()
    await expect(page.locator("#ad-message")).to_have_text("The confirmation must be the member's name exactly.")
    await expect(standings(page)).to_have_count(5)
    await page.fill("#ban-confirm", "p03")
    await page.get_by_role("button", name="Ban member").click()
    await expect(page.locator("#ad-message")).to_have_text("Banned p03 on high_score: 1 events voided.")
    await expect(standings(page)).to_have_count(4)
    await expect(standings(page).filter(has_text="p03")).to_have_count(0)


async def test_an_api_board_is_created_edited_and_retired_through_the_page(console: Console) -> None:
    page = await console.open()
    await use_token(page)
    await page.fill("#def-board", "cup-1")
    await page.fill("#def-json", '{"aggregation": "sum", "periods": ["alltime"], "max_value": 10, "metadata": {"category": "cup"}}')
    await page.get_by_role("button", name="Save definition").click()
    await expect(page.locator("#def-message")).to_have_text("Created cup-1.")
    await expect(page.locator("#def-version")).to_have_text("API board, version 1")
    await expect(page.locator('#boards-table tr[data-board="cup-1"]').first).to_contain_text("sum, desc")
    await console.client.submit([event("cup-1", "ann", 7, NOW, "c1")])
    await page.fill("#def-json", '{"aggregation": "sum", "periods": ["alltime"], "max_value": 100}')
    await page.get_by_role("button", name="Save definition").click()
    await expect(page.locator("#def-message")).to_have_text("Saved cup-1 (version 2).")
    await page.get_by_role("button", name="Retire board").click()
    await expect(page.locator("#def-message")).to_have_text("Type the board's name to confirm.")
    await page.fill("#def-confirm", "cup-1")
    await page.get_by_role("button", name="Retire board").click()
    await expect(page.locator("#def-message")).to_have_text("Retired cup-1: it takes no more events.")
    await expect(page.locator('#boards-table tr[data-board="cup-1"]').first).to_contain_text("retired")
    assert (await console.client.submit([event("cup-1", "bob", 7, NOW, "c2")]))[0]["reason"] == "board_retired"
    await page.fill("#def-board", "high_score")
    await page.get_by_role("button", name="Load definition").click()
    await expect(page.locator("#def-version")).to_have_text("Managed by config.toml, version 0")


async def test_the_admin_token_stays_in_session_storage_and_a_header(console: Console) -> None:
    await console.players(1)
    page = await console.open()
    await use_token(page)
    await audit(page, "p00")
    await expect(page.locator("#ad-token")).to_have_value("")
    assert await page.evaluate("sessionStorage.getItem('arena.adminToken')") == ADMIN_TOKEN
    assert await page.evaluate("localStorage.length") == 0
    assert await page.context.cookies() == []
    assert ADMIN_TOKEN not in page.url
    assert all(ADMIN_TOKEN not in url for url in console.pages[0].requests)
    await page.get_by_role("button", name="Forget token").click()
    assert await page.evaluate("sessionStorage.length") == 0


async def test_a_member_named_like_markup_is_shown_as_text_and_runs_nothing(console: Console) -> None:
    await console.client.submit([event("high_score", XSS, 500, NOW, "xss")])
    page = await console.open()
    await expect(standings(page).locator("td.member")).to_have_text([XSS])
    await page.fill("#se-member", XSS)
    await page.get_by_role("button", name="Search").click()
    await expect(page.locator("#se-around td.member")).to_have_text([XSS])
    await use_token(page)
    await audit(page, XSS)
    await expect(page.locator("#ad-message")).to_have_text(f"1 events of {XSS} on high_score")
    assert await page.locator("main img").count() == 0
    # console.pages[0].dialogs is checked empty by the fixture: no alert ran


async def test_the_page_is_usable_by_keyboard(console: Console) -> None:
    await console.players(25)
    page = await console.open()
    for _ in range(80):  # a deadline: the search field is well within 80 stops
        await page.keyboard.press("Tab")
        if await page.evaluate("document.activeElement.id") == "se-member":
            break
    else:
        raise AssertionError("Tab never reached the member search field")
    await page.keyboard.type("p10")
    await page.keyboard.press("Enter")
    await expect(page.locator("#se-rank")).to_have_text("15 of 25")
    await page.keyboard.press("Shift+Tab")  # back to the Period select, then Board
    assert await page.evaluate("document.activeElement.id") == "se-period"


async def test_readable_at_1280x800_and_at_a_phone_width_without_horizontal_overflow(console: Console) -> None:
    await console.players(25)
    await console.client.submit([event("coins", "p01", 120, NOW, "c1"), event("high_score", "x", -1, NOW, "negative")])
    for name, viewport in [("console", None), ("console-phone", PHONE)]:
        page = await console.open(**({"viewport": viewport} if viewport else {}))
        await expect(standings(page)).to_have_count(10)
        await expect(page.locator("#legend-events li").first).to_have_text("accepted: 26")
        await page.fill("#se-member", "p20")
        await page.get_by_role("button", name="Search").click()
        await expect(page.locator("#se-tables")).to_be_visible()
        overflow = await page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{name}: {overflow}px of horizontal overflow"
        await console.pages[-1].screenshot(console.screenshots, name)
        if os.environ.get("ARENA_DOCS_SCREENSHOTS") == "1":
            await console.pages[-1].screenshot(DOCS, name)


async def test_the_live_standings_come_back_by_themselves_after_a_server_restart(console: Console) -> None:
    await console.players(3)
    page = await console.open()
    await expect(standings(page)).to_have_count(3)
    server = console.server
    await console.client.close()
    await server.stop()
    await expect(page.locator("#live-state")).to_have_text("disconnected, retrying")
    await server.start(server.port)
    await expect(page.locator("#live-state")).to_have_text("live")
    console.client = await Client.connect(server.ws_url, token_for("gs"))
    await console.client.submit([event("high_score", "after", 1000, NOW, "after")])
    await expect(standings(page).first).to_contain_text("after")
    watched = console.pages[0]
    # while the server was down, the browser said so (failed connections); nothing else
    watched.errors = [e for e in watched.errors if "ERR_CONNECTION_REFUSED" not in e and "WebSocket connection" not in e]


async def test_a_wrong_admin_token_is_refused_at_once_and_not_kept(console: Console) -> None:
    page = await console.open()
    for wrong in ("not-a-token", token_for("gs")):  # a game server's token is not an admin's either
        await page.fill("#ad-token", wrong)
        await page.get_by_role("button", name="Use token").click()
        await expect(page.locator("#ad-state")).to_contain_text("not an admin token")
        await expect(page.locator("#ad-state")).to_have_class("caption error")
        assert await page.evaluate("sessionStorage.length") == 0
    await use_token(page)
    watched = console.pages[0]
    # the browser reports each refused check (a 401) in its console; nothing else
    watched.errors = [e for e in watched.errors if "status of 401" not in e]


async def test_a_prefix_lists_the_matching_members_and_a_name_opens_its_audit(console: Console) -> None:
    await console.players(25)
    await console.client.submit([event("high_score", "P1", 1, NOW, "upper")])
    page = await console.open()
    await use_token(page)
    await page.fill("#se-member", "p1")  # as typed: no Search click
    matches = page.locator("#se-match-list button")
    await expect(matches).to_have_text([f"p{i}" for i in range(10, 20)])  # code point order; "P1" is another case
    await expect(page.locator("#se-matches")).to_contain_text("10 members starting with “p1”")
    await expect(page.locator("#se-match-list li").nth(2)).to_contain_text("#13")  # p12 scores 120: rank 13 of 26
    await matches.nth(2).click()
    await expect(page.locator("#se-rank")).to_have_text("13 of 26")
    await page.locator("#se-facts a.member-link").click()
    await expect(page.locator("#ad-member")).to_have_value("p12")
    await expect(page.locator("#ad-message")).to_have_text("1 events of p12 on high_score")
    await expect(page.locator("#audit-table tbody tr")).to_have_count(1)
    await standings(page).first.locator("a.member-link").click()  # a name in the standings too
    await expect(page.locator("#ad-message")).to_have_text("1 events of p24 on high_score")
    await page.fill("#se-member", "zz")
    await expect(page.locator("#se-matches")).to_contain_text("No member of high_score / alltime starts with “zz”.")


async def test_at_375_px_every_control_is_within_the_screen_and_a_void_goes_through(console: Console) -> None:
    await console.players(5)
    page = await console.open(viewport=NARROW_PHONE)
    await use_token(page)
    await audit(page, "p04")
    await page.fill("#se-member", "p0")
    await expect(page.locator("#se-match-list button")).to_have_count(5)
    controls = page.locator("main button:visible, main input:visible, main select:visible, main a:visible")
    assert await controls.count() > 20
    for i in range(await controls.count()):
        control = controls.nth(i)
        await control.scroll_into_view_if_needed()
        box = await control.bounding_box()
        assert box is not None
        label = await control.evaluate("c => c.id || c.textContent")
        assert 0 <= box["x"] and box["x"] + box["width"] <= NARROW_PHONE["width"], f"{label!r} is off-screen: {box}"
    overflow = await page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"{overflow}px of horizontal overflow"
    row = page.locator(f'#audit-table tr[data-key="p{NOW}-4"]')
    await row.get_by_role("button", name="Void…").click()
    await page.fill("#void-reason", "phone")
    await page.get_by_role("button", name="Confirm void").click()
    await expect(row.locator(".voided-by")).to_contain_text(": phone")
    await console.pages[-1].screenshot(console.screenshots, "console-375")

"""The console's settlements in a real headless Chromium, against a real server on a pinned clock,
on both journal backends: a kind with prizes offers its tables' settlements (a kind without none),
an open table its preview; a closed table shows its journaled revision 0 (sha256, awards paged as
the route pages them); a void after the close brings revision 1 with what to grant and revoke,
and revision 0 stays pickable; a member's search shows what it won; at a phone's width the
section fits the screen; in a cluster, the node that does not own the board shows its owner's
settlement. Beside a settlement, with an admin token, its deliveries to real receivers: one
delivered, one failed with its last error and a Retry button that gets it delivered.

Every test ends as in test_console.py: no error in the browser console, no dialog, no request
to another host.
"""

from __future__ import annotations

import calendar
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, ViewportSize, expect

from arena.client import ArenaClient, ScoreEvent
from arena.config import Config, JournalSettings, Webhook
from arena.engine.times import format_ms
from support.browser import Watched, chromium
from support.cluster import NodeFactory, owner_urls, start_cluster
from support.prized import journaled_settlement
from support.receiver import Receiver
from support.server import ADMIN_TOKEN, InProcessServer, event, make_config, now_ms, submit, token_for, until

NOW = calendar.timegm((2027, 1, 5, 12, 0, 0)) * 1000  # after the wall clock: its table is current
DAY = 86_400_000
TIERS: list[dict[str, Any]] = [{"reward": "gold", "ranks": [1, 1]}, {"reward": "silver", "ranks": [2, 3]},
                               {"reward": "bronze", "top_percent": 50}]
BOARDS: dict[str, dict[str, Any]] = {
    "cup": {"periods": ["alltime", "daily"], "prizes": {"daily": TIERS}},
    "plain": {"periods": ["daily"]},
}
SETTLEMENT = "/v1/boards/cup/daily/settlement"
NARROW_PHONE = ViewportSize(width=375, height=812)

expect.set_options(timeout=15_000)  # a little more than the overview's 5 s refresh, twice


@dataclass
class Rig:
    server: InProcessServer
    browser: Browser
    http: httpx.AsyncClient
    pages: list[Watched] = field(default_factory=list)

    async def open(self, viewport: ViewportSize | None = None) -> Page:
        watched = await Watched.open(self.browser, f"{self.server.url}/console", **({"viewport": viewport} if viewport else {}))
        self.pages.append(watched)
        await expect(watched.page.locator("#live-state")).to_have_text("live")
        return watched.page

    async def clock(self, now: int) -> None:
        assert (await self.http.post("/v1/_test/clock", json={"now_ms": now})).status_code == 200

    async def settled(self, period_id: str, revision: int) -> dict[str, Any]:
        return await journaled_settlement(self.http, SETTLEMENT, period_id, revision, limit=1000)


@asynccontextmanager
async def rigged(config: Config) -> AsyncIterator[Rig]:
    async with chromium() as browser, InProcessServer(config, now_ms=NOW) as server, httpx.AsyncClient(base_url=server.url) as http:
        made = Rig(server, browser, http)
        yield made
        for watched in made.pages:
            await watched.page.close()
    for watched in made.pages:
        assert watched.errors == [], "errors in the browser console"
        assert watched.dialogs == [], "a dialog opened"
        assert all(url.startswith((server.url + "/", server.ws_url.rsplit("/v1", 1)[0] + "/")) for url in watched.requests)


@pytest.fixture
async def rig(tmp_path: Any, served_journal: JournalSettings) -> AsyncIterator[Rig]:
    async with rigged(make_config(tmp_path / "data", BOARDS, journal=served_journal, idle_unload_seconds=0)) as made:
        yield made


def awards(page: Page) -> Any:
    return page.locator("#sl-awards tbody tr")


async def test_a_tables_preview_settlement_and_revisions_through_the_page(rig: Rig) -> None:
    # p00..p24 scoring 0..240: gold p24, silver p23 p22, bronze ranks 4..13 (50 % of 25, rounded up)
    await submit(rig.server, [event("cup", f"p{i:02d}", 10 * i, NOW, f"cup-{i}") for i in range(25)])
    page = await rig.open()
    cup = page.locator('#boards-table tr[data-board="cup"]')
    await expect(cup.filter(has_text="alltime").get_by_role("button", name="Settlement")).to_have_count(0)
    await expect(page.locator('#boards-table tr[data-board="plain"]').get_by_role("button", name="Settlement")).to_have_count(0)
    await expect(page.locator("#sl-board option")).to_have_text(["cup"])  # plain has no prizes
    await cup.filter(has_text="daily").get_by_role("button", name="Settlement").click()
    await expect(page.locator("#sl-period-id")).to_have_value("2027-01-05")  # no closed table has members: the open one
    await expect(page.locator("#sl-caption")).to_contain_text("cup / daily / 2027-01-05: open. It settles at its close")
    await page.get_by_role("button", name="Preview: if it closed now").click()
    await expect(page.locator("#sl-caption")).to_contain_text("If it closed now")
    await expect(page.locator("#sl-rev")).to_have_text("preview")
    await expect(page.locator("#sl-total")).to_have_text("13")
    await expect(awards(page).first).to_contain_text("p24")
    await expect(awards(page).first).to_contain_text("gold")
    await expect(page.locator("#sl-deliveries")).to_be_hidden()  # a preview is never delivered

    await rig.clock(NOW + DAY)
    first = await rig.settled("2027-01-05", 0)
    await page.select_option("#sl-period-id", "2027-01-05")
    await expect(page.locator("#sl-caption")).to_have_text("cup / daily / 2027-01-05: settled, revision 0 at the close.")
    await expect(page.locator("#sl-sha")).to_have_text(first["sha256"])
    await expect(page.locator("#sl-total")).to_have_text("13")
    await expect(awards(page).locator("td.member")).to_have_text([a["member"] for a in first["awards"][:10]])
    await page.get_by_role("button", name="Next awards").click()
    await expect(awards(page).locator("td.member")).to_have_text([a["member"] for a in first["awards"][10:]])
    await expect(page.get_by_role("button", name="Next awards")).to_be_disabled()
    await expect(page.locator("#sl-page")).to_have_text("page 2 of 2")
    await expect(page.locator("#sl-changes")).to_be_hidden()
    await expect(page.locator("#sl-deliveries-caption")).to_have_text(
        "Type an admin token (Admin section) to see this table's webhook deliveries.")

    # a void of the gold winner after the close: revision 1 tells what to grant and what to revoke
    voided = await rig.http.post("/v1/boards/cup/void", json={"idempotency_key": "cup-24", "reason": "cheat"},
                                 headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert voided.status_code == 200, voided.text
    second = await rig.settled("2027-01-05", 1)
    await expect(page.locator("#sl-caption")).to_have_text("cup / daily / 2027-01-05: settled, revision 1 after disputes.")
    await expect(page.locator("#sl-revision option")).to_have_text(["latest (1)", "revision 1", "revision 0"])
    await expect(page.locator("#sl-period-id option:checked")).to_have_text("2027-01-05 (settled, revision 1, 24 members)")
    await expect(page.locator("#sl-sha")).to_have_text(second["sha256"])
    changes = page.locator("#sl-changes-table tbody tr")
    await expect(changes.locator("td.member")).to_have_text([c["member"] for c in second["changes"]])
    await expect(changes.filter(has_text="p24")).to_contain_text("revoke")
    await expect(changes.filter(has_text="p23")).to_contain_text("replace")
    await expect(page.locator("#sl-changes-h")).to_have_text(f"What revision 1 changed: {len(second['changes'])} members")
    await page.select_option("#sl-revision", "0")
    await expect(page.locator("#sl-sha")).to_have_text(first["sha256"])
    await expect(page.locator("#sl-changes")).to_be_hidden()

    # what a member won, in every table of its board
    await page.select_option("#se-board", "cup")
    await page.fill("#se-member", "p23")
    await page.get_by_role("button", name="Search").click()
    tables = page.locator("#se-tables tbody tr")
    await expect(tables.filter(has_text="2027-01-05 (closed)")).to_contain_text("gold (revision 1)")
    await expect(tables.filter(has_text="2027-01-06").locator("td").last).to_have_text("—")  # open, and not in it
    await expect(tables.filter(has_text="alltime")).to_contain_text("no prizes")


async def test_at_a_phone_width_the_settlement_fits_the_screen(rig: Rig) -> None:
    await submit(rig.server, [event("cup", f"a-member-with-a-long-name-{i:02d}", 10 * i, NOW, f"cup-{i}") for i in range(5)])
    await rig.clock(NOW + DAY)
    await rig.settled("2027-01-05", 0)
    voided = await rig.http.post("/v1/boards/cup/void", json={"idempotency_key": "cup-4", "reason": "cheat"},
                                 headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert voided.status_code == 200, voided.text
    await rig.settled("2027-01-05", 1)
    page = await rig.open(NARROW_PHONE)
    await page.locator('#boards-table tr[data-board="cup"]').filter(has_text="daily").get_by_role("button", name="Settlement").click()
    await expect(page.locator("#sl-caption")).to_contain_text("settled, revision 1")
    # gold, silver, silver of 5 and then of 4: -04 loses gold, -03 goes from silver to gold, -01 wins silver
    await expect(page.locator("#sl-changes-table tbody tr")).to_have_count(3)
    controls = page.locator("#settlements button:visible, #settlements select:visible, #settlements a:visible")
    for i in range(await controls.count()):
        control = controls.nth(i)
        await control.scroll_into_view_if_needed()
        box = await control.bounding_box()
        assert box is not None
        assert 0 <= box["x"] and box["x"] + box["width"] <= NARROW_PHONE["width"], await control.evaluate("c => c.id || c.textContent")
    overflow = await page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"{overflow}px of horizontal overflow"


async def test_in_a_cluster_the_other_node_shows_the_owners_settlement(cluster_nodes: NodeFactory) -> None:
    """A tournament ending 20 s from now on the wall clock (two nodes to start first), settled by
    its owner; the console of the other node lists its prizes and shows the settlement
    (forwarded queries)."""
    start = now_ms()
    end = start - start % 1000 + 20_000
    boards = {"final": {"periods": [], "close_grace_seconds": 0,
                        "custom_periods": {"finals": {"start": format_ms(start - DAY), "end": format_ms(end)}},
                        "prizes": {"finals": [{"reward": "cup", "ranks": [1, 1]}, {"reward": "pin", "top_percent": 50}]}}}
    nodes = await start_cluster(cluster_nodes, ["a", "b"], boards)
    async with httpx.AsyncClient() as http:
        owner = (await owner_urls(http, nodes))["final"]
        async with ArenaClient(owner, token_for("gs")) as client:
            answers = await client.submit_many([ScoreEvent("final", f"m{i}", i, start - i) for i in range(6)])
            assert all(r.recorded for r in answers), answers
        other = next(node.url for node in nodes if node.url != owner)
        path = f"{other}/v1/boards/final/finals/settlement"
        period_id = (await http.get(f"{owner}/v1/boards/final/finals/top")).json()["period_id"]

        async def ready() -> bool:
            return (await http.get(path, params={"period_id": period_id})).status_code == 200

        await until(ready, "the tournament to settle", timeout=60)
        settled = (await http.get(path, params={"period_id": period_id})).json()
    async with chromium() as browser:
        watched = await Watched.open(browser, f"{other}/console")
        page = watched.page
        await page.locator('#boards-table tr[data-board="final"]').get_by_role("button", name="Settlement").click()
        await expect(page.locator("#sl-caption")).to_have_text(f"final / finals / {period_id}: settled, revision 0 at the close.")
        await expect(page.locator("#sl-sha")).to_have_text(settled["sha256"])
        await expect(awards(page).locator("td.member")).to_have_text(["m5", "m4", "m3"])
        await page.close()
    assert watched.errors == [] and watched.dialogs == []


async def test_a_settlements_deliveries_by_state_and_a_failed_one_retried(
    tmp_path: Any, served_journal: JournalSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two webhooks of the board: one receiver answers 200 (delivered), the other 500 until its
    delivery is given up (failed, past a max age of a second); after a Retry through the page
    it answers 200 and the delivery shows delivered."""
    monkeypatch.setenv("ARENA_TEST_WEBHOOK_SECRET", "s3cret")
    up, down = await Receiver().start(), await Receiver(answer=500).start()
    hooks = [Webhook("rewards", up.url, "ARENA_TEST_WEBHOOK_SECRET", ("cup",)),
             Webhook("ledger", down.url, "ARENA_TEST_WEBHOOK_SECRET", ("cup",), max_age_hours=1 / 3600)]
    config = make_config(tmp_path / "data", BOARDS, journal=served_journal, idle_unload_seconds=0, webhooks=hooks,
                         webhook_backoff_seconds=0.05, webhook_timeout_seconds=5)
    delivery = "cup/daily/2027-01-05/*/0"
    try:
        async with rigged(config) as rig:
            await submit(rig.server, [event("cup", f"p{i}", 10 * i, NOW, f"cup-{i}") for i in range(3)])
            await rig.clock(NOW + DAY)
            await rig.settled("2027-01-05", 0)

            async def states() -> dict[str, str]:
                listed: dict[str, str] = {}
                for hook in ("rewards", "ledger"):
                    answer = await rig.http.get(f"/v1/webhooks/{hook}/deliveries", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
                    listed.update((hook, d["state"]) for d in answer.json()["deliveries"] if d["delivery"] == delivery)
                return listed

            async def given_up() -> bool:
                return await states() == {"rewards": "delivered", "ledger": "failed"}

            await until(given_up, "one delivery delivered, the other failed")
            page = await rig.open()
            await page.fill("#ad-token", ADMIN_TOKEN)
            await page.get_by_role("button", name="Use token").click()
            await expect(page.locator("#ad-state")).to_contain_text("Admin token of ops set")
            cup = page.locator('#boards-table tr[data-board="cup"]').filter(has_text="daily")
            await cup.get_by_role("button", name="Settlement").click()
            await expect(page.locator("#sl-caption")).to_have_text("cup / daily / 2027-01-05: settled, revision 0 at the close.")
            await expect(page.locator("#sl-deliveries-caption")).to_have_text(
                "2 deliveries of this table to 2 webhooks: 0 pending, 1 failed, 1 delivered.")
            delivered = page.locator('#sl-deliveries-table tr[data-webhook="rewards"]')
            failed = page.locator('#sl-deliveries-table tr[data-webhook="ledger"]')
            await expect(delivered).to_contain_text(delivery)
            await expect(delivered.locator("td.delivery-delivered")).to_have_text("delivered")
            await expect(delivered.get_by_role("button", name="Retry")).to_be_hidden()
            await expect(failed.locator("td.delivery-failed")).to_have_text("failed")
            await expect(failed.locator("td.error")).to_have_text("HTTP 500: no")

            await page.set_viewport_size(NARROW_PHONE)  # one card a delivery, its Retry button on screen
            retry = failed.get_by_role("button", name="Retry")
            await retry.scroll_into_view_if_needed()
            box = await retry.bounding_box()
            assert box is not None and 0 <= box["x"] and box["x"] + box["width"] <= NARROW_PHONE["width"], box
            overflow = await page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 0, f"{overflow}px of horizontal overflow"

            down.answer = 200
            await retry.click()
            await expect(page.locator("#sl-message")).to_have_text(f"Retrying {delivery} to ledger.")
            await expect(failed.locator("td.delivery-delivered")).to_have_text("delivered")  # at a refresh
            await expect(page.locator("#sl-deliveries-caption")).to_have_text(
                "2 deliveries of this table to 2 webhooks: 0 pending, 0 failed, 2 delivered.")
            assert delivery in down.delivered()
    finally:
        await up.stop()
        await down.stop()

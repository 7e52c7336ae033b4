"""A real headless Chromium for the console tests: Playwright for Python driving the system's
Chromium (`executable_path`; Playwright never downloads a browser here).

No browser: under CI (``$CI`` set) the test fails, elsewhere it is skipped with
how to install one. `Watched` records what a page did that a test must check: console errors,
uncaught exceptions, dialogs (an `alert` from an injected handler) and every request's URL.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest
from playwright.async_api import Browser, ConsoleMessage, Dialog, Page, Request, ViewportSize, async_playwright

INSTALL = "install Chromium (Debian: apt-get install chromium) or name it in $ARENA_CHROMIUM"
DESKTOP = ViewportSize(width=1280, height=800)
PHONE = ViewportSize(width=390, height=844)


def unavailable(reason: str) -> NoReturn:
    """No browser for this test: fail under CI, skip elsewhere. Never returns."""
    if os.environ.get("CI"):
        pytest.fail(f"a browser is required under CI: {reason}", pytrace=False)
    pytest.skip(f"{reason}; {INSTALL}")


def chromium_path() -> str:
    """$ARENA_CHROMIUM, else the first Chromium on PATH."""
    named = os.environ.get("ARENA_CHROMIUM")
    found = shutil.which(named) if named else shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        unavailable(f"$ARENA_CHROMIUM ({named}) is not an executable" if named else "no chromium on PATH")
    return found


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """A headless system Chromium for one test."""
    path = chromium_path()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=path, headless=True)
        try:
            yield browser
        finally:
            await browser.close()


@dataclass
class Watched:
    """A page and what it did: console errors, page errors, dialogs and requests."""

    page: Page
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    @classmethod
    async def open(cls, browser: Browser, url: str, viewport: ViewportSize = DESKTOP) -> Watched:
        page = await browser.new_page(viewport=viewport)
        watched = cls(page)
        page.on("console", watched._console)
        page.on("pageerror", lambda exc: watched.errors.append(f"uncaught: {exc}"))
        page.on("dialog", watched._dialog)
        page.on("request", watched._request)
        await page.goto(url)
        return watched

    def _console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            self.errors.append(f"console {message.type}: {message.text}")

    async def _dialog(self, dialog: Dialog) -> None:
        self.dialogs.append(dialog.message)
        await dialog.dismiss()

    def _request(self, request: Request) -> None:
        self.requests.append(request.url)

    async def screenshot(self, folder: Path, name: str) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{name}.png"
        await self.page.screenshot(path=str(target), full_page=True)
        return target

"""Headless Chromium (Debian's ``/usr/bin/chromium``) driven by Playwright over the DevTools protocol,
the network off: pages load from ``file://``, every request to anything else is aborted, the browser
context is offline and hosts resolve nowhere. Playwright's own browsers are never downloaded."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--host-resolver-rules=MAP * ~NOTFOUND"]


def _playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    return sync_playwright


needs_chromium = pytest.mark.skipif(not (Path(CHROMIUM).exists() and shutil.which("chromium") and _playwright()),
                                    reason="needs Debian's chromium and the playwright package (dev extras)")


@dataclass
class Loaded:
    console: list[str] = field(default_factory=list)  # console messages of type error or warning
    errors: list[str] = field(default_factory=list)  # uncaught page errors
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    title: str = ""
    text: str = ""
    dom: dict = field(default_factory=dict)


def load(page_path: Path, screenshot: Path, user_data: Path, query: str = "") -> Loaded:
    """Load ``page_path`` at 1280x800 with the network off, screenshot the first screen into
    ``screenshot``; ``query``: a JavaScript expression evaluated in the page (its value in ``dom``)."""
    sync_playwright = _playwright()
    got = Loaded()
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(user_data), executable_path=CHROMIUM, headless=True, args=FLAGS, offline=True,
            viewport={"width": 1280, "height": 800}, java_script_enabled=True)
        try:
            page = context.new_page()
            page.on("console", lambda m: got.console.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: got.errors.append(str(e)))
            page.on("request", lambda r: got.requests.append(r.url))
            context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://")
                          else route.abort())
            page.goto(page_path.resolve().as_uri(), wait_until="load")
            page.screenshot(path=str(screenshot))
            got.title = page.title()
            got.text = page.inner_text("body")
            if query:
                got.dom = page.evaluate(query)
        finally:
            context.close()
    return got

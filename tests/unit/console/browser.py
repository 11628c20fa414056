"""Debian's Chromium driven by Playwright for the console's browser tests, and axe-core run in a page.

Playwright's own browser build is never downloaded (these machines cannot reach it): the tests drive the
system's ``chromium`` (``/usr/bin/chromium``, or ``PARTNER_REPO_CHROMIUM``), and fail with one line saying
how to install it when it is missing, never skip. ``.ci/run`` installs it where it is missing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = "PARTNER_REPO_CONSOLE_SCREENSHOTS"
"""A directory to keep the screenshots the tests take in (docs/images to refresh docs/console.md's)."""


def chromium() -> str:
    """The Chromium the tests drive, or the test fails saying how to get one."""
    named = os.environ.get("PARTNER_REPO_CHROMIUM")
    for candidate in (named, "/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and Path(candidate).exists():
            return candidate
    pytest.fail(
        "the console's browser tests need Chromium: apt-get install -y chromium (or set "
        "PARTNER_REPO_CHROMIUM to a Chromium binary); Playwright's own browser download is not used",
        pytrace=False,
    )


def screenshot_path(tmp: Path, name: str) -> Path:
    kept = os.environ.get(SCREENSHOTS)
    directory = Path(kept) if kept else tmp
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"console-{name}.png"


async def serious_violations(page: Any) -> list[str]:
    """axe-core's serious and critical violations of the page as it is, one line each."""
    from axe_playwright_python.async_playwright import Axe

    results = await Axe().run(page)
    found = results.response["violations"]
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in found
        if v.get("impact") in ("serious", "critical")
    ]


KEYBOARD_SCRIPT = """
() => {
  const controls = [...document.querySelectorAll(
    'a[href], button:not([disabled]), input:not([type=hidden]):not([disabled]), select, textarea')];
  controls.forEach((element, index) => element.setAttribute('data-control', String(index)));
  return controls.length;
}
"""
FOCUSED_SCRIPT = "() => document.activeElement && document.activeElement.getAttribute('data-control')"

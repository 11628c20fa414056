"""The console in a real browser: Debian's Chromium driven by Playwright, on one console per backend (in
memory, and on the server of ``MONGODB_URI`` with the integration marker), one browser for the module. What an
operator does: sign in with the token, open every page (each checked by axe-core: no serious or critical
violation), open a slice from the timeline and read its raw messages, run a recall, follow a listener group to
its dead letters, forget a core with its id typed (and not without the flag), reach every control by keyboard
alone; and what an attacker tries: a page without the token, a ``<script>`` in a message. The screenshots of
the main pages are taken here (kept where ``PARTNER_REPO_CONSOLE_SCREENSHOTS`` says: docs/images for
docs/console.md)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import Browser, BrowserContext, Page, async_playwright

from partner_repo import MemoryCoreRepository, close_database, in_memory_database, init_repository
from partner_repo.console import ConsoleOptions
from tests.conftest import real_database
from tests.unit.console.browser import (
    ARGS,
    FOCUSED_SCRIPT,
    KEYBOARD_SCRIPT,
    chromium,
    screenshot_path,
    serious_violations,
)
from tests.unit.console.support import FAILING, GAPPY_CORE, GROUP, SCRIPT, TOKEN, Seeded, Served, seed, served

pytestmark = pytest.mark.asyncio(loop_scope="module")

PAGES = {
    "cores": "/cores",
    "core": "/core?id=alice",
    "gaps": f"/core?id={GAPPY_CORE}",
    "unsummarized": "/core?id=carol",
    "recall": "/recall?core=alice&q=where+does+my+sister+live",
    "listeners": "/listeners",
    "group": f"/listener?group={GROUP}",
    "check": "/check?run=1",
    "forget": "/forget?core=bob",
}


@pytest_asyncio.fixture(
    scope="module",
    loop_scope="module",
    params=["memory", pytest.param("mongodb", marks=pytest.mark.integration)],
)
async def world(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Any, Seeded]]:
    """A seeded database on each backend the machine has."""
    if request.param == "memory":
        database = await init_repository(in_memory_database(f"console_{uuid.uuid4().hex[:8]}"))
        yield database, await seed(database)
        return
    database = await real_database()
    await init_repository(database)
    try:
        yield database, await seed(database)
    finally:
        await database.client.drop_database(database.name)
        await close_database(database)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def console(world: tuple[Any, Seeded]) -> AsyncIterator[Served]:
    """The console with a token and writes allowed, as ``partner-repo console --allow-writes`` serves it."""
    options = ConsoleOptions(token=TOKEN, allow_writes=True, lag_sample_s=0.2, database_name="partner")
    async with served(world[0], options) as running:
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    executable = chromium()
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=executable, args=ARGS)
        yield launched
        await launched.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def operator(browser: Browser, console: Served) -> AsyncIterator[BrowserContext]:
    """A browser context signed in with the token, as an operator's browser after signing in once."""
    context = await browser.new_context(base_url=console.url, viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    await page.goto("/cores")
    await page.get_by_label("Token").fill(TOKEN)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url("**/cores")
    await page.close()
    yield context
    await context.close()


@pytest_asyncio.fixture(loop_scope="module")
async def page(operator: BrowserContext) -> AsyncIterator[Page]:
    opened = await operator.new_page()
    yield opened
    await opened.close()


async def test_a_page_without_the_token_shows_only_the_sign_in_form(
    browser: Browser, console: Served
) -> None:
    context = await browser.new_context(base_url=console.url)
    stranger = await context.new_page()
    answer = await stranger.goto("/core?id=alice")

    assert answer is not None and answer.status == 401
    assert await stranger.get_by_label("Token").is_visible()
    assert "Lyon" not in await stranger.content()
    await context.close()


@pytest.mark.parametrize("name", list(PAGES))
async def test_every_page_opens_with_no_serious_accessibility_violation(
    page: Page, name: str, tmp_path: Path
) -> None:
    answer = await page.goto(PAGES[name])

    assert answer is not None and answer.status == 200, await page.content()
    assert await page.locator("h1").count() == 1
    assert await serious_violations(page) == []
    await page.screenshot(path=screenshot_path(tmp_path, name), full_page=True)


async def test_a_slice_opened_from_the_timeline_shows_its_raw_messages(page: Page) -> None:
    await page.goto("/core?id=alice")
    await page.locator('svg a[aria-label*="Lyon"]').first.click()

    await page.wait_for_url("**/slice?id=*")
    messages = page.locator("ol.messages li")
    assert await messages.nth(0).inner_text() == "user (Alice) My sister Mia lives in Lyon."
    assert await messages.count() == 4
    assert "rolling_size" in await page.locator("dl.facts").inner_text()


async def test_the_timeline_shows_a_gap_and_an_overlap(page: Page) -> None:
    await page.goto(f"/core?id={GAPPY_CORE}")

    problems = await page.get_by_role("alert").inner_text()
    assert "gap: 1 message in no slice (2 to 3)" in problems
    assert "overlap: 1 message in two slices (4 to 5)" in problems
    assert (
        await page.locator("svg rect.gap").count() == 1
        and await page.locator("svg rect.overlap").count() == 1
    )


async def test_a_recall_shows_each_slice_why_it_was_found_and_its_raw_messages(page: Page) -> None:
    await page.goto("/recall")
    await page.get_by_label("Core id").fill("alice")
    await page.get_by_label("Query", exact=True).fill("where does my sister live?")
    await page.get_by_label("Slices at most").fill("2")
    await page.get_by_role("button", name="Recall").click()

    first = page.locator("article.recalled").first
    assert "found by" in await first.locator("h3").inner_text()
    parts = await first.locator("table.why tbody th").all_inner_texts()
    assert "text" in parts
    assert "My sister Mia lives in Lyon." in await first.locator("ol.messages").inner_text()
    assert await page.locator("article.recalled").count() <= 2


async def test_a_listener_group_leads_to_its_dead_letters_and_their_errors(page: Page) -> None:
    await page.goto("/listeners")
    await page.get_by_role("link", name=GROUP, exact=True).click()

    await page.wait_for_url(f"**/listener?group={GROUP}")
    letters = page.locator("#dead-letters ~ table").first
    errors = await letters.locator("pre.error").all_inner_texts()
    assert errors and all(error.startswith("RuntimeError: smtp down while mailing") for error in errors)
    assert errors[0].endswith("<b>bold?</b>")  # an error's markup is text too
    assert FAILING in await page.locator("#consumers ~ table").first.inner_text()


async def test_a_script_in_a_message_is_shown_as_text_and_never_runs(
    page: Page, world: tuple[Any, Seeded]
) -> None:
    script_slice = world[1].slice_with("<script>")
    await page.goto("/core?id=alice")
    await page.goto(f"/slice?id={script_slice.slice_id}")

    assert SCRIPT in await page.locator("ol.messages").inner_text()
    assert await page.evaluate("() => window.pwned === undefined")
    assert await page.locator("ol.messages script, ol.messages img").count() == 0


async def test_forgetting_a_core_needs_its_id_typed_then_the_core_is_gone(
    page: Page, world: tuple[Any, Seeded]
) -> None:
    await page.goto("/forget?core=bob")
    button = page.get_by_role("button", name="Forget core bob")
    assert "1 unit(s)" in await page.locator("#preview ~ ul").inner_text()
    await page.get_by_label("Type the core id").fill("bo")
    assert await button.is_disabled()
    await page.get_by_label("Type the core id").fill("bob")
    await button.click()

    assert "Forgot core bob" in await page.locator("h1").inner_text()
    await page.goto("/cores")
    assert await page.get_by_role("link", name="bob", exact=True).count() == 0
    assert await MemoryCoreRepository(world[0]).get("bob") is None


async def test_a_console_without_allow_writes_offers_no_forget_and_refuses_one(
    browser: Browser, world: tuple[Any, Seeded]
) -> None:
    async with served(world[0], ConsoleOptions(lag_sample_s=0)) as read_only:
        context = await browser.new_context(base_url=read_only.url)
        visitor = await context.new_page()
        await visitor.goto("/forget?core=alice")
        offered = await visitor.locator("form[action='/forget']").count()
        refused = await context.request.post("/forget", form={"core": "alice", "confirm": "alice"})
        await context.close()

    assert offered == 0 and refused.status == 403
    assert await MemoryCoreRepository(world[0]).get("alice") is not None


@pytest.mark.parametrize("name", ["cores", "core", "recall", "group", "forget"])
async def test_the_keyboard_alone_reaches_every_control(page: Page, name: str) -> None:
    await page.goto(PAGES[name].replace("bob", "alice"))
    controls = await page.evaluate(KEYBOARD_SCRIPT)
    if name == "forget":
        await page.get_by_label("Type the core id").fill("alice")  # its button is enabled once typed
    reached: set[str] = set()
    for _ in range(controls + 5):
        await page.keyboard.press("Tab")
        focused = await page.evaluate(FOCUSED_SCRIPT)
        if focused is not None:
            reached.add(focused)

    assert reached == {str(index) for index in range(controls)}

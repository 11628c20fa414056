"""Who reaches the console and what it lets through: the token exchanged once for a session cookie, the
cookie's flags, the CSRF token every write needs, the Host and Origin checks, writes off unless asked, and no
secret in any page. Driven through the app itself (httpx's ASGI transport), on one seeded in-memory
database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from partner_repo import MemoryCoreRepository
from partner_repo.console import ConsoleOptions, console_app
from partner_repo.errors import ConnectionFailed
from tests.unit.console.support import TOKEN, Seeded

pytestmark = pytest.mark.asyncio(loop_scope="module")

PAGES = [
    "/cores",
    "/core?id=alice",
    "/core?id=gappy",
    "/recall?core=alice&q=Lyon",
    "/listeners",
    "/listener?group=recall",
    "/check?run=1",
    "/forget?core=bob",
    "/login",
]


def client(
    database: Any, options: ConsoleOptions, *, base: str = "http://127.0.0.1:8080"
) -> httpx.AsyncClient:
    app = console_app(database, options)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base)


@pytest_asyncio.fixture(loop_scope="module")
async def guarded(seeded_memory: tuple[Any, Seeded]) -> AsyncIterator[httpx.AsyncClient]:
    """A console with a token and writes allowed, not signed in."""
    async with client(seeded_memory[0], ConsoleOptions(token=TOKEN, allow_writes=True)) as http:
        yield http


async def signed_in(http: httpx.AsyncClient) -> httpx.Response:
    return await http.post("/login", data={"token": TOKEN, "next": "/core?id=alice"})


def csrf_of(html: str) -> str:
    marker = 'name="csrf" value="'
    start = html.index(marker) + len(marker)
    return html[start : html.index('"', start)]


async def test_a_page_without_a_session_is_refused_with_the_sign_in_page(guarded: httpx.AsyncClient) -> None:
    answer = await guarded.get("/core?id=alice")

    assert answer.status_code == 401
    assert 'action="/login"' in answer.text and "Lyon" not in answer.text
    assert "set-cookie" not in answer.headers


async def test_the_token_is_exchanged_once_for_an_http_only_same_site_strict_cookie(
    guarded: httpx.AsyncClient,
) -> None:
    answer = await signed_in(guarded)

    assert answer.status_code == 303 and answer.headers["location"] == "/core?id=alice"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("partner_repo_console=") and TOKEN not in cookie
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie  # plain HTTP on loopback: a Secure cookie would never come back
    assert (await guarded.get("/core?id=alice")).status_code == 200


async def test_the_cookie_is_secure_when_the_console_is_reached_over_https(
    seeded_memory: tuple[Any, Seeded],
) -> None:
    options = ConsoleOptions(token=TOKEN, allowed_hosts=("console.example.com",))
    async with client(seeded_memory[0], options, base="https://console.example.com") as http:
        answer = await signed_in(http)

    assert "; Secure" in answer.headers["set-cookie"]


async def test_a_wrong_token_gets_no_session(guarded: httpx.AsyncClient) -> None:
    answer = await guarded.post("/login", data={"token": "not-the-token-but-long-enough", "next": "/cores"})

    assert answer.status_code == 401 and "set-cookie" not in answer.headers
    assert "not this console's token" in answer.text


async def test_a_forged_or_edited_session_cookie_is_no_session(guarded: httpx.AsyncClient) -> None:
    await signed_in(guarded)
    real = guarded.cookies["partner_repo_console"]
    guarded.cookies.clear()
    issued, nonce, signature = real.split(".")
    for forged in (f"{int(issued) + 1}.{nonce}.{signature}", f"{issued}.{nonce}x.{signature}", "1.2.3"):
        guarded.cookies.set("partner_repo_console", forged)
        assert (await guarded.get("/cores")).status_code == 401
        guarded.cookies.clear()


async def test_a_sign_in_never_sends_the_browser_to_another_site(guarded: httpx.AsyncClient) -> None:
    for elsewhere in ("https://evil.example/", "//evil.example/", "/\\evil.example"):
        answer = await guarded.post("/login", data={"token": TOKEN, "next": elsewhere})
        assert answer.headers["location"] == "/cores"


async def test_a_write_without_the_csrf_token_is_refused_and_writes_nothing(
    guarded: httpx.AsyncClient,
) -> None:
    await signed_in(guarded)
    missing = await guarded.post("/forget", data={"core": "bob", "confirm": "bob"})
    wrong = await guarded.post("/forget", data={"core": "bob", "confirm": "bob", "csrf": "x" * 43})

    assert [missing.status_code, wrong.status_code] == [403, 403]
    assert "CSRF" in missing.text
    assert (await guarded.get("/core?id=bob")).status_code == 200  # bob is still there


async def test_a_forget_whose_confirmation_is_not_the_core_id_erases_nothing(
    guarded: httpx.AsyncClient, seeded_memory: tuple[Any, Seeded]
) -> None:
    await signed_in(guarded)
    csrf = csrf_of((await guarded.get("/forget?core=bob")).text)

    answer = await guarded.post("/forget", data={"core": "bob", "confirm": "bo", "csrf": csrf})

    assert answer.status_code == 400 and "nothing was erased" in answer.text
    assert await MemoryCoreRepository(seeded_memory[0]).get("bob") is not None


async def test_a_read_only_console_refuses_every_write_even_with_a_valid_form(
    seeded_memory: tuple[Any, Seeded],
) -> None:
    async with client(seeded_memory[0], ConsoleOptions(token=TOKEN)) as http:
        await signed_in(http)
        page = (await http.get("/core?id=carol")).text
        csrf = csrf_of(page)  # the sign-out form's: the session's own token
        answers = [
            await http.post(path, data={**form, "csrf": csrf})
            for path, form in [
                ("/forget", {"core": "bob", "confirm": "bob"}),
                ("/resummarize", {"core": "carol"}),
                ("/dead-letters/retry", {"group": "recall", "consumer": "mailer"}),
            ]
        ]

    assert [answer.status_code for answer in answers] == [403, 403, 403]
    assert all("writes are off" in answer.text for answer in answers)
    assert 'action="/forget"' not in page and 'action="/resummarize"' not in page
    assert await MemoryCoreRepository(seeded_memory[0]).get("bob") is not None


async def test_a_host_name_the_console_does_not_answer_is_refused(guarded: httpx.AsyncClient) -> None:
    rebound = await guarded.get("/login", headers={"host": "attacker.example:8080"})

    assert rebound.status_code == 421


async def test_a_request_from_another_sites_page_is_refused(guarded: httpx.AsyncClient) -> None:
    foreign = await guarded.post(
        "/login", data={"token": TOKEN}, headers={"origin": "https://attacker.example"}
    )
    opaque = await guarded.post("/login", data={"token": TOKEN}, headers={"origin": "null"})
    own = await guarded.post("/login", data={"token": TOKEN}, headers={"origin": "http://127.0.0.1:8080"})

    assert [foreign.status_code, opaque.status_code, own.status_code] == [403, 403, 303]
    assert "set-cookie" not in foreign.headers


async def test_every_answer_forbids_framing_sniffing_caching_and_scripts_of_other_origins(
    guarded: httpx.AsyncClient,
) -> None:
    answer = await guarded.get("/login")

    policy = answer.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy and "unsafe" not in policy
    assert answer.headers["x-frame-options"] == "DENY" and answer.headers["cache-control"] == "no-store"
    assert answer.headers["x-content-type-options"] == "nosniff"


async def test_no_page_shows_the_token(guarded: httpx.AsyncClient) -> None:
    await signed_in(guarded)

    for path in PAGES:
        answer = await guarded.get(path)
        assert answer.status_code in (200, 401), path  # /login shows its form (401) even when signed in
        assert TOKEN not in answer.text and TOKEN not in str(answer.headers), path


async def test_an_error_naming_a_uri_shows_it_without_its_password(
    seeded_memory: tuple[Any, Seeded], monkeypatch: pytest.MonkeyPatch
) -> None:
    from partner_repo.console import ConsoleReads

    async def unreachable(self: Any, prefix: str | None, after: str | None) -> Any:
        raise ConnectionFailed("cannot reach mongodb://partner:s3cret-password@db.internal:27017/partner")

    monkeypatch.setattr(ConsoleReads, "cores", unreachable)
    async with client(seeded_memory[0], ConsoleOptions()) as http:
        answer = await http.get("/cores")

    assert answer.status_code == 503
    assert "s3cret-password" not in answer.text and "mongodb://partner:***@db.internal" in answer.text

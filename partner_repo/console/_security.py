"""The console's guard: an ASGI middleware every request passes before any page sees it.

In order: the ``Host`` header must be one the console answers (421 otherwise: DNS rebinding) and the
``Origin`` header, when a browser sent one, the console's own or one it was told to answer (403 otherwise: a
cross-site request), both by the rules of :mod:`partner_repo.serving` the MCP server has too. Then the session
(:mod:`._sessions`): with a token, a request without a valid session cookie is answered 401 with the sign-in
page (only it and the static files are served without one); without a token (loopback only) a browser is
given a session on its first request, since every form that writes still carries its CSRF token. Every answer
carries headers that keep pages from being framed, sniffed, cached, or from running any script but the
console's own (``Content-Security-Policy``). The session cookie is ``HttpOnly`` and ``SameSite=Strict``, and
``Secure`` when the request came over HTTPS (as uvicorn reports it: behind a proxy, from its
``X-Forwarded-Proto``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from http.cookies import SimpleCookie

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from partner_repo.console._sessions import COOKIE, SESSION_SECONDS, Session, SessionKeys
from partner_repo.serving import HeaderRules

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",  # not no-referrer: under it a browser sends "Origin: null" with a form
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}
OPEN_PATHS = ("/login", "/static/")
"""What a request without a session reaches on a console with a token: the sign-in page and its styles."""

SignIn = Callable[[Scope, Receive, Send], Awaitable[None]]


def session_of(scope: Scope) -> Session:
    """The session the guard verified or issued for this request."""
    session: Session = scope["state"]["session"]
    return session


def cookie_header(session: Session | None, *, secure: bool) -> str:
    """The ``Set-Cookie`` value that gives ``session`` (None: ends the session)."""
    value, age = ("", 0) if session is None else (session.value, SESSION_SECONDS)
    flags = "; Secure" if secure else ""
    return f"{COOKIE}={value}; Max-Age={age}; Path=/; HttpOnly; SameSite=Strict{flags}"


class Guard:
    """The checks above, around ``app``; ``sign_in`` answers a request that needs a session it lacks."""

    def __init__(self, app: ASGIApp, *, keys: SessionKeys, rules: HeaderRules, sign_in: SignIn) -> None:
        self._app = app
        self._keys = keys
        self._rules = rules
        self._sign_in = sign_in

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the lifespan events pass
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        send = _with_headers(send, {})
        host = headers.get("host")
        if not self._rules.host_allowed(host):
            await _refused(421, "this console does not answer that host name", scope, receive, send)
            return
        if not self._rules.origin_allowed(headers.get("origin"), host):
            await _refused(
                403, "this console does not answer requests from other sites", scope, receive, send
            )
            return
        session = self._keys.verify(_cookie(headers))
        path: str = scope.get("path", "/")
        if session is None and self._keys.token_required:
            if path.startswith(OPEN_PATHS):
                scope.setdefault("state", {})["session"] = None
                await self._app(scope, receive, send)
            else:
                await self._sign_in(scope, receive, send)
            return
        if session is None:
            session = self._keys.issue()
        scope.setdefault("state", {})["session"] = session
        if session.fresh:
            secure = scope.get("scheme") == "https"
            send = _with_headers(send, {"set-cookie": cookie_header(session, secure=secure)})
        await self._app(scope, receive, send)


def _cookie(headers: Headers) -> str | None:
    raw = headers.get("cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # a malformed Cookie header is no session
        return None
    morsel = jar.get(COOKIE)
    return None if morsel is None else morsel.value


def _with_headers(send: Send, extra: dict[str, str]) -> Send:
    """``send`` adding the security headers (and ``extra``) to the answer's start."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            for name, value in {**SECURITY_HEADERS, **extra}.items():
                if name == "set-cookie":
                    headers.append(name, value)
                elif name not in headers:
                    headers[name] = value
        await send(message)

    return sending


async def _refused(status: int, text: str, scope: Scope, receive: Receive, send: Send) -> None:
    response: Response = PlainTextResponse(text, status_code=status)
    await response(scope, receive, send)


__all__ = ["OPEN_PATHS", "SECURITY_HEADERS", "Guard", "cookie_header", "session_of"]

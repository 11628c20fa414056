"""The console's routes: one handler per page, each reading through :class:`ConsoleReads` and rendering a
template, and one per write, each checking the session's CSRF token before :class:`ConsoleWrites` runs it.

Every identifier travels in the query string (``/core?id=...``), so a core id holding ``/``, ``?`` or any
other character reaches the page as it is. Templates escape everything they are given (Jinja2's autoescape:
a message holding ``<script>`` shows as text), and nothing a page shows names the connection but the
database's name. A library error is a page of one line (its class and message, secrets scrubbed) with the
status it deserves; anything else is logged with its traceback and shown as ``internal error (Type)``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from partner_repo.console._history import CHART_HEIGHT, CHART_WIDTH, LagHistory
from partner_repo.console._options import ConsoleOptions
from partner_repo.console._reads import ConsoleReads
from partner_repo.console._security import Guard, cookie_header, session_of
from partner_repo.console._sessions import Session, SessionKeys
from partner_repo.console._timeline import ROW_HEIGHT, WIDTH
from partner_repo.console._writes import ConsoleWrites, LetterKey, WritesOff
from partner_repo.errors import ConnectionFailed, InvalidInput, NotFound, PartnerRepoError
from partner_repo.listener import AfterRollingRegistry
from partner_repo.mongo import MongoDatabase, library_logger, scrub
from partner_repo.recall import MAX_LIMIT, MAX_MESSAGES
from partner_repo.rolling import RollingService
from partner_repo.serving import HeaderRules

logger = library_logger("partner_repo.console")

STATIC = Path(__file__).with_name("static")
RECALL_LIMIT, RECALL_MESSAGES = 5, 20
"""A recall's default budget on the page (the MCP tool's)."""
MAX_FORM_FIELDS = 20


class CsrfRefused(PartnerRepoError):
    """A write whose form lacks the session's CSRF token."""


def console_app(
    database: MongoDatabase,
    options: ConsoleOptions,
    *,
    reads: MongoDatabase | None = None,
    rolling: RollingService | None = None,
    consumers: AfterRollingRegistry | None = None,
) -> Guard:
    """The console as an ASGI app over ``database`` (writes and an erasure's preview; ``reads`` for every
    page, default the same), behind its guard. ``rolling`` resummarizes and ``consumers`` are the consumers
    whose dead letters it may deliver again (both only used with ``options.allow_writes``)."""
    console = _Console(database, reads or database, options, rolling, consumers)
    app = Starlette(routes=console.routes(), lifespan=console.lifespan)
    rules = HeaderRules.for_host(options.host, hosts=options.allowed_hosts, origins=options.allowed_origins)
    return Guard(app, keys=console.keys, rules=rules, sign_in=console.sign_in)


class _Console:
    def __init__(
        self,
        database: MongoDatabase,
        reads: MongoDatabase,
        options: ConsoleOptions,
        rolling: RollingService | None,
        consumers: AfterRollingRegistry | None,
    ) -> None:
        self.options = options
        self.keys = SessionKeys(options.token)
        self.reads = ConsoleReads(
            reads,
            database,
            history=LagHistory(options.lag_samples),
            page_size=options.page_size,
            timeline_slices=options.timeline_slices,
            topic_nodes=options.topic_nodes,
            letters_shown=options.letters_shown,
        )
        self.writes = ConsoleWrites(
            database, allowed=options.allow_writes, rolling=rolling, consumers=consumers
        )
        self.templates = Environment(
            loader=PackageLoader("partner_repo.console", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.globals.update(
            link=link,
            database_name=options.database_name,
            writes=options.allow_writes,
            token_required=self.keys.token_required,
            timeline_width=WIDTH,
            row_height=ROW_HEIGHT,
            chart_width=CHART_WIDTH,
            chart_height=CHART_HEIGHT,
            max_limit=MAX_LIMIT,
            max_messages=MAX_MESSAGES,
        )
        self.templates.filters.update(when=when, ago=ago, compact=compact)

    def routes(self) -> list[Route | Mount]:
        page = self._page
        return [
            Route("/", lambda request: RedirectResponse("/cores", 303)),
            Route("/cores", page(self.cores_page)),
            Route("/core", page(self.core_page)),
            Route("/slice", page(self.slice_page)),
            Route("/recall", page(self.recall_page)),
            Route("/listeners", page(self.listeners_page)),
            Route("/listener", page(self.group_page)),
            Route("/check", page(self.check_page)),
            Route("/forget", page(self.forget_page)),
            Route("/forget", page(self.forget), methods=["POST"]),
            Route("/resummarize", page(self.resummarize), methods=["POST"]),
            Route("/dead-letters/retry", page(self.retry), methods=["POST"]),
            Route("/dead-letters/discard", page(self.discard), methods=["POST"]),
            Route("/login", self.login_page),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", page(self.logout), methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """Sample the listener groups' lag every ``lag_sample_s`` seconds while the console runs."""
        sampler = None
        if self.options.lag_sample_s > 0:
            sampler = asyncio.create_task(self._sample_lag(self.options.lag_sample_s))
        try:
            yield
        finally:
            if sampler is not None:
                sampler.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sampler

    async def _sample_lag(self, every: float) -> None:
        while True:
            try:
                await self.reads.groups()
            except Exception as exc:  # the next sample tries again; a page shows the error itself
                logger.warning(
                    "sampling the listener groups' lag failed: %s", scrub(f"{type(exc).__name__}: {exc}")
                )
            await asyncio.sleep(every)

    # -- rendering -------------------------------------------------------------------------------------------

    def render(self, request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        session: Session | None = request.scope.get("state", {}).get("session")
        html = self.templates.get_template(template).render(
            csrf="" if session is None else session.csrf,
            signed_in=session is not None and self.keys.token_required,
            here=request.url.path,
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def _page(
        self, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """``handler``, with a library error as a page of one line and anything else as an internal error."""

        async def answered(request: Request) -> Response:
            try:
                return await handler(request)
            except PartnerRepoError as exc:
                return self.render(request, "error.html", _status(exc), error=_one_line(exc))
            except Exception as exc:
                logger.exception("%s %s failed", request.method, request.url.path)
                return self.render(
                    request,
                    "error.html",
                    500,
                    error=f"internal error ({type(exc).__name__}); the console logged it",
                )

        return answered

    async def sign_in(self, scope: Scope, receive: Receive, send: Send) -> None:
        """What a request without a session gets on a console with a token: the sign-in page (401)."""
        request = Request(scope, receive)
        if request.method != "GET":
            await PlainTextResponse("sign in first: this console needs its token", 401)(scope, receive, send)
            return
        wanted = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        response = self.render(request, "login.html", 401, next=wanted, failed=False)
        await response(scope, receive, send)

    async def form(self, request: Request) -> FormData:
        """The form a write posted, once its CSRF token is the session's (:class:`CsrfRefused` otherwise)."""
        form = await request.form(max_files=0, max_fields=MAX_FORM_FIELDS)
        presented = form.get("csrf")
        if not isinstance(presented, str) or not self.keys.csrf_matches(session_of(request.scope), presented):
            raise CsrfRefused(
                "the form's CSRF token is missing or wrong: nothing was changed (reload the page)"
            )
        return form

    # -- pages -----------------------------------------------------------------------------------------------

    async def cores_page(self, request: Request) -> Response:
        prefix, after = request.query_params.get("q", "").strip(), request.query_params.get("after")
        page = await self.reads.cores(prefix, after)
        return self.render(request, "cores.html", page=page, prefix=prefix, after=after)

    async def core_page(self, request: Request) -> Response:
        core_id = _required(request, "id", "core id")
        picture = await self.reads.core(
            core_id,
            before=request.query_params.get("before"),
            topics_after=request.query_params.get("topics_after"),
        )
        return self.render(request, "core.html", picture=picture)

    async def slice_page(self, request: Request) -> Response:
        detail = await self.reads.slice(_required(request, "id", "slice id"))
        return self.render(request, "slice.html", piece=detail)

    async def recall_page(self, request: Request) -> Response:
        core_id, query = request.query_params.get("core", "").strip(), request.query_params.get("q", "")
        limit = _int(request, "limit", RECALL_LIMIT, 1, MAX_LIMIT)
        max_messages = _int(request, "max_messages", RECALL_MESSAGES, 1, MAX_MESSAGES)
        recalled = None
        if core_id and query.strip():
            recalled = await self.reads.recall(core_id, query, limit=limit, max_messages=max_messages)
        return self.render(
            request,
            "recall.html",
            core_id=core_id,
            query=query,
            limit=limit,
            max_messages=max_messages,
            recalled=recalled,
        )

    async def listeners_page(self, request: Request) -> Response:
        groups = await self.reads.groups()
        charts = {group.group: self.reads.history.chart(group.group) for group in groups}
        return self.render(request, "listeners.html", groups=groups, charts=charts, now=_now())

    async def group_page(self, request: Request) -> Response:
        page = await self.reads.group(_required(request, "group", "group"))
        retry = {consumer.name: self.writes.can_retry(consumer.name) for consumer in page.status.consumers}
        chart = self.reads.history.chart(page.status.group)
        return self.render(request, "group.html", page=page, chart=chart, retry=retry, now=_now())

    async def check_page(self, request: Request) -> Response:
        core_id = request.query_params.get("core", "").strip()
        report = await self.reads.check(core_id or None) if request.query_params.get("run") else None
        return self.render(request, "check.html", core_id=core_id, report=report)

    async def forget_page(self, request: Request) -> Response:
        core_id = _required(request, "core", "core id")
        preview = await self.reads.forget_preview(core_id)
        return self.render(request, "forget.html", preview=preview)

    # -- writes ----------------------------------------------------------------------------------------------

    async def forget(self, request: Request) -> Response:
        form = await self.form(request)
        core_id = _field(form, "core")
        try:
            report = await self.writes.forget(core_id, _field(form, "confirm", required=False))
        except InvalidInput as exc:
            preview = await self.reads.forget_preview(core_id)
            return self.render(request, "forget.html", 400, preview=preview, refused=_one_line(exc))
        return self.render(request, "forgotten.html", report=report)

    async def resummarize(self, request: Request) -> Response:
        form = await self.form(request)
        core_id = _field(form, "core")
        report = await self.writes.resummarize(core_id)
        return self.render(request, "resummarized.html", core_id=core_id, report=report)

    async def retry(self, request: Request) -> Response:
        form = await self.form(request)
        group, consumer = _field(form, "group"), _field(form, "consumer")
        report = await self.writes.retry(group, consumer)
        return self.render(request, "retried.html", group=group, consumer=consumer, report=report)

    async def discard(self, request: Request) -> Response:
        form = await self.form(request)
        group = _field(form, "group")
        sequence = _field(form, "erasure_seq", required=False)
        key = LetterKey(
            group=group,
            consumer=_field(form, "consumer"),
            unit_id=_field(form, "unit", required=False),
            slice_id=_field(form, "slice", required=False),
            revision=_number(_field(form, "revision", required=False) or "0", "revision"),
            erasure_seq=_number(sequence, "erasure_seq") if sequence else None,
        )
        await self.writes.discard(key)
        return RedirectResponse(link("/listener", group=group) + "#dead-letters", 303)

    # -- sessions --------------------------------------------------------------------------------------------

    async def login_page(self, request: Request) -> Response:
        if not self.keys.token_required:
            return RedirectResponse("/cores", 303)
        return self.render(
            request, "login.html", 401, next=_local(request.query_params.get("next")), failed=False
        )

    async def login(self, request: Request) -> Response:
        """The token exchanged for a session: a new session cookie and back to the page asked for."""
        if not self.keys.token_required:
            return RedirectResponse("/cores", 303)
        form = await request.form(max_files=0, max_fields=MAX_FORM_FIELDS)
        token, wanted = form.get("token"), _local(_text(form.get("next")))
        if not isinstance(token, str) or not self.keys.token_matches(token):
            logger.warning("a sign-in with a wrong token was refused")
            return self.render(request, "login.html", 401, next=wanted, failed=True)
        response = RedirectResponse(wanted, 303)
        secure = request.url.scheme == "https"
        response.headers.append("set-cookie", cookie_header(self.keys.issue(), secure=secure))
        return response

    async def logout(self, request: Request) -> Response:
        await self.form(request)
        response = RedirectResponse("/login" if self.keys.token_required else "/cores", 303)
        response.headers.append("set-cookie", cookie_header(None, secure=request.url.scheme == "https"))
        return response


# -- helpers shared by the templates -------------------------------------------------------------------------


def link(path: str, fragment: str = "", **params: Any) -> str:
    """A URL of the console: ``path`` with ``params`` in its query string (None left out), quoted."""
    query = urlencode({name: value for name, value in params.items() if value is not None and value != ""})
    return path + (f"?{query}" if query else "") + (f"#{quote(fragment)}" if fragment else "")


def when(moment: datetime | None) -> str:
    return "-" if moment is None else f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def ago(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if abs(seconds) >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def compact(value: float) -> str:
    return f"{value:.3f}"


def _now() -> datetime:
    from partner_repo.clock import utc_now

    return utc_now()


def _status(exc: PartnerRepoError) -> int:
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, WritesOff | CsrfRefused):
        return 403
    if isinstance(exc, ConnectionFailed):
        return 503
    if isinstance(exc, InvalidInput):
        return 400
    return 409


def _one_line(exc: BaseException) -> str:
    return " ".join(scrub(f"{type(exc).__name__}: {exc}").split())


def _required(request: Request, name: str, what: str) -> str:
    value = request.query_params.get(name, "")
    if not value.strip():
        raise InvalidInput(f"give the {what} (?{name}=...)")
    return value.strip()


def _int(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return default
    number = _number(raw, name)
    if not low <= number <= high:
        raise InvalidInput(f"{name} must be from {low} to {high}, got {number}")
    return number


def _number(raw: str, name: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be a whole number, got {raw[:40]!r}") from None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _field(form: FormData, name: str, *, required: bool = True) -> str:
    value = _text(form.get(name)).strip()
    if required and not value:
        raise InvalidInput(f"the form has no {name}")
    return value


def _local(wanted: str | None) -> str:
    """Where to go after signing in: a path of this console, never another site (``//host``, a scheme)."""
    if not wanted or not wanted.startswith("/") or wanted.startswith("//") or "\\" in wanted:
        return "/cores"
    return wanted


__all__ = ["CsrfRefused", "console_app", "link"]

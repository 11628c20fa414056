"""``partner-repo console``: the operator's console, web pages over the database
(:mod:`partner_repo.console`, docs/console.md).

The one command that imports :mod:`partner_repo.console`, and only when it runs: without the ``console`` extra
every other command works, and this one says in one line what to install (exit 2). Everything that can be
refused is refused before the database is opened: a console reachable from other machines (a host that is
not loopback, or a name a proxy reaches it by) without a token, a weak token, a consumer that cannot be
loaded. Read-only unless ``--allow-writes``; it runs until SIGINT or SIGTERM, like ``listen``.
"""

from __future__ import annotations

import asyncio

import click

from partner_repo.cli._consumers import consumer_option, consumer_registry, recall_option, with_recall
from partner_repo.cli._roll_idle import load_summarizer, summarizer_option
from partner_repo.cli._runtime import connection, fail, run_async
from partner_repo.cli._signals import stop_on_signals
from partner_repo.console import (
    DEFAULT_LAG_SAMPLE_SECONDS,
    DEFAULT_PORT,
    TOKEN_VARIABLE,
    ConsoleOptions,
    ConsoleUnavailable,
    http_problem,
    require_extra,
)
from partner_repo.mongo import library_logger
from partner_repo.rolling import RollingService, extractive_summarizer
from partner_repo.settings import admin_database, load_settings

log = library_logger("partner_repo.cli.console")


@click.command("console")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; any but loopback needs a token.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="Port to listen on (0: any free port, logged).",
)
@click.option(
    "--token",
    default=None,
    envvar=TOKEN_VARIABLE,
    metavar="TOKEN",
    help=f"The token a browser signs in with once; prefer {TOKEN_VARIABLE} in the environment (a command "
    "line is visible to other users of the machine).",
)
@click.option(
    "--allow-writes",
    is_flag=True,
    help="Offer resummarize, dead-letter retry and discard, and forget (with its preview and the core id "
    "typed to confirm) [default: read-only].",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="Another Host name to answer, such as a reverse proxy's (repeatable; one other machines use needs "
    "a token).",
)
@click.option(
    "--allowed-origin",
    "allowed_origins",
    multiple=True,
    metavar="ORIGIN",
    help="Another origin whose pages may post forms, such as https://console.example.com behind a proxy "
    "that rewrites Host (repeatable).",
)
@summarizer_option
@consumer_option(
    "A consumer whose dead letters the console may deliver again (as for listen; repeatable; with "
    "--allow-writes)."
)
@recall_option
@click.option(
    "--lag-sample-interval",
    type=click.FloatRange(min=0),
    default=DEFAULT_LAG_SAMPLE_SECONDS,
    show_default=True,
    metavar="SECONDS",
    help="How often every listener group's lag is sampled for the charts (0: only when a page is served).",
)
@click.pass_context
def console_command(
    ctx: click.Context,
    host: str,
    port: int,
    token: str | None,
    allow_writes: bool,
    allowed_hosts: tuple[str, ...],
    allowed_origins: tuple[str, ...],
    summarizer_path: str | None,
    consumer_paths: tuple[str, ...],
    recall: bool,
    lag_sample_interval: float,
) -> None:
    """Serve the operator's console: cores, a core's timeline, recall, listener groups and the check, in a
    browser (needs the console extra).

    Loopback only unless given a token (PARTNER_REPO_CONSOLE_TOKEN); read-only unless --allow-writes. Runs
    until SIGINT or SIGTERM. See docs/console.md.
    """
    token = (token or "").strip() or None  # an empty PARTNER_REPO_CONSOLE_TOKEN counts as unset
    if (problem := http_problem(host, token, (*allowed_hosts, *allowed_origins))) is not None:
        fail(problem)
    try:
        require_extra()
    except ConsoleUnavailable as exc:
        fail(str(exc))
    registry = consumer_registry(consumer_paths, recall=recall) if consumer_paths or recall else None
    summarizer = load_summarizer(summarizer_path) if summarizer_path else extractive_summarizer
    target = connection(ctx, "daemon")
    settings = load_settings()
    options = ConsoleOptions(
        host=host,
        token=token,
        allow_writes=allow_writes,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        database_name=target.db_name,
        lag_sample_s=lag_sample_interval,
    )

    async def work() -> None:
        from partner_repo.console import console_app, serve_console

        database = await target.open()
        consumers = None if registry is None else with_recall(registry, database, recall)
        rolling = RollingService(database, summarizer, settings.rolling_config())
        app = console_app(
            database, options, reads=admin_database(database, settings), rolling=rolling, consumers=consumers
        )
        describe = ("writes allowed" if allow_writes else "read-only") + (
            ", token required" if token else ", no token: loopback only"
        )
        stop = asyncio.Event()
        with stop_on_signals(stop):
            await serve_console(app, stop, host=host, port=port, describe=describe)
        log.info("stopped")

    run_async(work)

"""``partner-repo roll-idle``: run the idle scheduler as a process of its own (or one pass with ``--once``).

Runs until SIGINT/SIGTERM, finishing the roll in progress; any number of these (and of service processes
rolling by count) may share a database, the rolling lease gives each core to one roller at a time.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import click

from partner_repo.cli._output import Duration, echo_wrapped, short
from partner_repo.cli._plugins import load_callable
from partner_repo.cli._runtime import EXIT_NOT_FOUND, Connection, connection, note_interruption, run_async
from partner_repo.cli._signals import (
    STOP_GRACE_S,
    Received,
    exit_now,
    opened_or_exit,
    stop_on_signals,
    until_stopped,
)
from partner_repo.events import RollingResult
from partner_repo.mongo import library_logger, scrub
from partner_repo.rolling import RollingConfig, RollingService, Summarizer, extractive_summarizer
from partner_repo.settings import load_settings

ROLLED_SUMMARY_WIDTH = 100
"""How much of a rolled summary its line shows (``slices show`` shows it whole)."""

log = library_logger("partner_repo.cli.roll_idle")  # its 0.4 name, which operators filter on
"""The scheduler's own lines (started, stopped) are log records, like those of ``listen``."""

summarizer_option = click.option(
    "--summarizer",
    "summarizer_path",
    default=None,
    metavar="MODULE:NAME",
    help="A callable (messages) -> str, async or sync [default: the offline extractive summarizer].",
)
"""``--summarizer MODULE:NAME``, as every command that rolls or summarizes takes it (see
:func:`load_summarizer`)."""


@click.command("roll-idle")
@click.option("--once", is_flag=True, help="Do one pass over the idle cores and exit.")
@click.option(
    "--idle-after",
    type=Duration(),
    default=None,
    help="How long without interaction before a window is rolled: seconds, PT30M or HH:MM:SS "
    "[default: PARTNER_REPO_ROLLING_IDLE_AFTER].",
)
@click.option(
    "--check-interval",
    type=Duration(positive=True),
    default=None,
    help="How long between passes, in the same forms [default: PARTNER_REPO_ROLLING_CHECK_INTERVAL].",
)
@click.option(
    "--retain-divisor",
    type=click.IntRange(min=0),
    default=None,
    help="The window keeps 1/N of what was rolled [default: PARTNER_REPO_ROLLING_RETAIN_DIVISOR].",
)
@summarizer_option
@click.pass_context
def roll_idle(
    ctx: click.Context,
    once: bool,
    idle_after: timedelta | None,
    check_interval: timedelta | None,
    retain_divisor: int | None,
    summarizer_path: str | None,
) -> None:
    """Roll every idle chat window into memory (and start a new memory session for it)."""
    target = connection(ctx, "write" if once else "daemon")
    summarizer = load_summarizer(summarizer_path) if summarizer_path else extractive_summarizer
    config = load_settings().rolling_config()  # PARTNER_REPO_ROLLING_* from the environment; options win
    if idle_after is not None:
        config = replace(config, idle_after=idle_after)
    if check_interval is not None:
        config = replace(config, check_interval=check_interval)
    if retain_divisor is not None:
        config = replace(config, retain_divisor=retain_divisor)

    async def work() -> int:
        if not once:
            return await _schedule(target, summarizer, config)
        service = RollingService(await target.open(), summarizer, config)
        rolled: list[RollingResult] = []

        def echo(result: RollingResult) -> None:
            rolled.append(result)
            _echo(result)

        note_interruption(
            lambda: (
                f"{len(rolled)} idle core(s) rolled, each in full; run it again to roll the cores "
                "still idle (a roll cut short is taken up again once its lease expires)"
            )
        )
        failed: list[tuple[str, Exception]] = []
        results = await service.roll_idle(on_rolled=echo, on_failed=lambda *f: failed.append(f))
        click.echo(f"{len(results)} idle core(s) rolled", err=True)
        if failed:  # one line, and a failure's exit code: a pass that left cores unrolled did not succeed
            first, error = failed[0]
            said = f"{len(failed)} idle core(s) could not be rolled; core {first!r}: {scrub(str(error))}"
            click.echo(f"error: {said}", err=True)
            raise SystemExit(EXIT_NOT_FOUND)
        return 0

    code = run_async(work)
    if code:
        raise SystemExit(code)


async def _schedule(target: Connection, summarizer: Summarizer, config: RollingConfig) -> int:
    """The scheduler until SIGINT/SIGTERM (answered while connecting too); a roll in progress then gets
    :data:`STOP_GRACE_S` to finish, else it is cut short (its messages stay in the window, its lease lapses
    and the next pass rolls them). The exit code."""
    stop = asyncio.Event()
    with stop_on_signals(stop) as signalled:
        received = signalled or Received()
        database = await opened_or_exit(stop, target.open(), received, log)
        service = RollingService(database, summarizer, config)
        log.info(
            "rolling idle cores every %gs; stop with Ctrl-C or SIGTERM", config.check_interval.total_seconds()
        )
        scheduler = asyncio.ensure_future(service.run_idle_scheduler(stop, on_rolled=_echo))
        await until_stopped(stop, asyncio.shield(scheduler))
        try:
            await asyncio.wait_for(scheduler, STOP_GRACE_S)
        except TimeoutError:
            log.warning("stopped: the roll in progress was cut short; the next pass rolls its core")
            exit_now(received.exit_code)  # what the driver still waits for on the server is not waited for
    log.info("stopped")
    return received.exit_code


def _echo(result: RollingResult) -> None:
    piece, unit = result.memory_slice, result.memory_unit
    echo_wrapped(
        f"rolled core {unit.core_id}: slice {piece.id} [{piece.start_index}, {piece.end_index}) "
        f"of unit {unit.id}: {short(result.summary, ROLLED_SUMMARY_WIDTH)}"
    )


def load_summarizer(path: str) -> Summarizer:
    """The summarizer ``--summarizer`` names (a module of the working directory too); a usage error when it
    cannot be loaded or is not callable."""
    summarizer: Summarizer = load_callable(path, what="summarizer", option="--summarizer")
    return summarizer

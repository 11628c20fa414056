"""``partner-repo listen``: run a RollingListener with consumers loaded from import paths.

Runs until SIGINT/SIGTERM, then stops cleanly: in-flight deliveries finish (up to the drain timeout) and the
group's checkpoint is saved, so the next ``listen`` of the group resumes where this one stopped. A signal is
answered at every moment (:mod:`partner_repo.cli._signals`): while connecting or starting, and when the
database went away (the stop then gives up on its last writes after a second, or the drain timeout when
deliveries were in flight: those are delivered again at the next start). Exit 130 after SIGINT, 0 after
SIGTERM. With
``--metrics-port`` it also serves Prometheus metrics (the ``metrics`` extra).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import click

from partner_repo.cli._consumers import (
    consumer_option,
    consumer_registry,
    recall_embedder,
    recall_option,
    with_recall,
)
from partner_repo.cli._output import Seconds
from partner_repo.cli._plugins import embedder_option
from partner_repo.cli._runtime import Connection, connection, fail, run_async
from partner_repo.cli._signals import (
    STOP_GRACE_S,
    Received,
    exit_now,
    opened_or_exit,
    stop_on_signals,
    until_stopped,
)
from partner_repo.listener import DEFAULT_POLL_INTERVAL, RollingListener
from partner_repo.listener.delivery import AfterRollingRegistry
from partner_repo.listener.observing import (
    ListenerMetrics,
    MetricsUnavailable,
    require_prometheus,
    serve_metrics,
)
from partner_repo.mongo import library_logger
from partner_repo.recall import Embedder
from partner_repo.settings import load_settings

log = library_logger("partner_repo.cli.listen")
"""The command's own lines (started, stopping, stopped) are log records, so ``--log-format json`` keeps
stderr all JSON for a log shipper."""


@click.command("listen")
@consumer_option("An AfterRolling consumer (an object, or a class built without arguments); repeatable.")
@recall_option
@embedder_option("The embedder of --recall's index: each slice's vectors too (see docs/recall.md).")
@click.option("--group", default="default", show_default=True, help="Listener group (its own checkpoint).")
@click.option(
    "--start-from",
    type=click.Choice(["beginning", "now"]),
    default="beginning",
    show_default=True,
    help="For a new group: deliver the stored history first, or only what is appended from now on.",
)
@click.option(
    "--poll-interval",
    type=Seconds(positive=True),
    default=DEFAULT_POLL_INTERVAL,
    show_default=True,
    help="Seconds between polls where change streams are unavailable.",
)
@click.option(
    "--source",
    type=click.Choice(["auto", "polling"]),
    default="auto",
    show_default=True,
    help="auto: the change stream on a replica set, polling elsewhere.",
)
@click.option(
    "--max-attempts",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Attempts per delivery before a dead letter is written.",
)
@click.option(
    "--drain-timeout",
    type=Seconds(),
    default=30.0,
    show_default=True,
    help="Seconds stop waits for in-flight deliveries.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1, max=1024),
    default=None,
    help="Slices of different units each consumer is handed at once; a unit's go one at a time, in order "
    "[default: PARTNER_REPO_LISTENER_CONCURRENCY, 1].",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(min=0, max=65535),
    default=None,
    help="Serve Prometheus metrics at http://0.0.0.0:PORT/metrics (needs the metrics extra).",
)
@click.pass_context
def listen(
    ctx: click.Context,
    consumer_paths: tuple[str, ...],
    recall: bool,
    embedder_path: str | None,
    group: str,
    start_from: str,
    poll_interval: float,
    source: str,
    max_attempts: int,
    drain_timeout: float,
    concurrency: int | None,
    metrics_port: int | None,
) -> None:
    """Deliver every roll to the given consumers until SIGINT/SIGTERM.

    Backfill the recall index of every slice already stored with a group of its own from the beginning:
    partner-repo listen --group recall --start-from beginning --recall.
    """
    # (a click command keeps its options in its signature: the work is in the named steps below)
    target = connection(ctx, "daemon")
    registry = consumer_registry(consumer_paths, recall=recall)
    embedder = recall_embedder(recall, embedder_path)
    if metrics_port is not None:
        try:
            require_prometheus()  # before connecting: the option cannot work as the install stands
        except MetricsUnavailable as exc:
            fail(f"--metrics-port: {exc}")
    options = ListenOptions(
        group=group,
        start_from=start_from,
        poll_interval=poll_interval,
        source=source,
        max_attempts=max_attempts,
        drain_timeout=drain_timeout,
        concurrency=concurrency,
        metrics_port=metrics_port,
    )
    code = run_async(lambda: _listen(target, registry, (recall, embedder), options))
    if code:
        raise SystemExit(code)


@dataclass(frozen=True)
class ListenOptions:
    group: str
    start_from: str
    poll_interval: float
    source: str
    max_attempts: int
    drain_timeout: float
    concurrency: int | None
    metrics_port: int | None


async def _listen(
    target: Connection,
    registry: AfterRollingRegistry,
    recall: tuple[bool, Embedder | None],
    options: ListenOptions,
) -> int:
    """Connect, start, deliver until a signal, stop within bounds; the exit code. The signal handlers are in
    place from the start, so a signal is answered while connecting and starting too."""
    stop = asyncio.Event()
    with stop_on_signals(stop) as signalled:
        received = signalled or Received()
        database = await opened_or_exit(stop, target.open(), received, log)
        metrics = ListenerMetrics() if options.metrics_port is not None else None
        listener = _listener(database, with_recall(registry, database, *recall), options, metrics)
        server = (
            None
            if metrics is None or options.metrics_port is None
            else serve_metrics(metrics, options.metrics_port)
        )
        try:
            if await until_stopped(stop, _start(listener, registry, options.group, server)):
                await stop.wait()
            log.info("stopping: finishing in-flight deliveries")
        finally:
            drained = await _stop_within(listener, options.drain_timeout)
            if server is not None:
                server.close()
    lag = listener.lag()
    if drained is None:
        log.warning(
            "stopped: %d delivered, %d dead-lettered; the database did not answer in time: unfinished "
            "deliveries are delivered again at the next start",
            lag.delivered,
            lag.dead_lettered,
        )
        exit_now(received.exit_code)  # a driver's calls still waiting on the server are not waited for
    state = "checkpoint saved" if drained else "unfinished deliveries are delivered again at the next start"
    log.info("stopped: %d delivered, %d dead-lettered; %s", lag.delivered, lag.dead_lettered, state)
    return received.exit_code


def _listener(
    database: Any, registry: AfterRollingRegistry, options: ListenOptions, metrics: ListenerMetrics | None
) -> RollingListener:
    return RollingListener(
        database,
        registry,
        group=options.group,
        poll_interval=options.poll_interval,
        start_from=options.start_from,  # type: ignore[arg-type]
        source=options.source,  # type: ignore[arg-type]
        max_attempts=options.max_attempts,
        drain_timeout=options.drain_timeout,
        concurrency=options.concurrency or load_settings().listener_concurrency,
        observer=metrics,
    )


async def _start(listener: RollingListener, registry: AfterRollingRegistry, group: str, server: Any) -> bool:
    await listener.start()
    names = ", ".join(c.name for c in registry.consumers())
    log.info("listening as group %r for %s; stop with Ctrl-C or SIGTERM", group, names)
    if server is not None:
        log.info("metrics at http://0.0.0.0:%s/metrics", server.port)
    return True


async def _stop_within(listener: RollingListener, drain_timeout: float) -> bool | None:
    """``listener.stop()``, bounded: the drain timeout (and a little) while deliveries are in flight, else
    :data:`STOP_GRACE_S`. Whether it drained; None when it did not end in time (the database is away)."""
    in_flight = sum(listener.lag().in_flight_by_consumer.values())
    bound = drain_timeout + STOP_GRACE_S if in_flight else STOP_GRACE_S
    try:
        return await asyncio.wait_for(listener.stop(drain_timeout=drain_timeout), bound)
    except TimeoutError:
        return None

"""Where a listener group's slices come from while it holds the lease: a change stream, else polling.

A source that breaks is logged and started again with backoff; once change streams turn out unavailable (a
standalone server, a permission missing) the group polls from then on. The sources read and the pipeline
delivers: this module only chooses and restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from partner_repo.errors import ChangeStreamUnavailable
from partner_repo.listener.delivery import Backoff, DeliveryPipeline
from partner_repo.listener.state import ListenerCheckpoints, describe
from partner_repo.listener.stream._change_stream import ChangeStreamSource
from partner_repo.listener.stream._polling import PollingSource, UnitScanner
from partner_repo.listener.stream._unreadable import UnreadableUnits
from partner_repo.mongo import library_logger, scrub
from partner_repo.units import MemoryUnitRepository

logger = library_logger("partner_repo.listener")


class GroupSources:
    """Runs one group's source; ``ready`` is set once it follows the feed, ``polling`` is the polling source
    while one runs (so a flush can ask it for a pass)."""

    def __init__(
        self,
        group: str,
        units: MemoryUnitRepository,
        checkpoints: ListenerCheckpoints,
        unreadable: UnreadableUnits,
        *,
        poll_interval: float,
        backoff: Backoff,
        report: Callable[[], Awaitable[None]],
    ) -> None:
        self._group = group
        self._units = units
        self._checkpoints = checkpoints
        self._unreadable = unreadable
        self._poll_interval = poll_interval
        self._backoff = backoff
        self._report = report
        self.ready = asyncio.Event()
        self.polling: PollingSource | None = None

    async def run(self, pipeline: DeliveryPipeline, stopping: asyncio.Event, use_stream: bool) -> bool:
        """Run a source until ``stopping``; a source that breaks is logged and started again. Returns whether
        change streams are still worth trying."""
        scanner = UnitScanner(self._units, self._checkpoints, pipeline, self._unreadable)
        failures = 0
        while not stopping.is_set():
            source: ChangeStreamSource | PollingSource
            if use_stream:
                source = ChangeStreamSource(
                    self._units,
                    self._checkpoints,
                    pipeline,
                    scanner,
                    max_await_seconds=self._poll_interval,
                    following=self.ready,
                    backoff=self._backoff,
                )
            else:
                source = self.polling = PollingSource(scanner, self._poll_interval, backoff=self._backoff)
                self.ready.set()
            pipeline.source = source.name
            await pipeline.barrier(self._report)  # status shows the source now, not at the next beat
            try:
                await source.run(stopping)
            except ChangeStreamUnavailable as exc:
                logger.info(  # the reason in words: an expected fallback, not an error (no class name)
                    "listener group %r: %s; polling every %.2fs instead",
                    self._group,
                    scrub(str(exc)),
                    self._poll_interval,
                )
                use_stream = False
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures = 1 if source.got_going else failures + 1  # a source that got going starts afresh
                delay = self._backoff.delay(failures)
                logger.exception(
                    "listener group %r: source failed (%s); restarting it in %.1fs",
                    self._group,
                    describe(exc),
                    delay,
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), delay)
            finally:
                self.ready.clear()  # until the next source follows the feed (a flush waits for it)
        return use_stream


__all__ = ["GroupSources"]

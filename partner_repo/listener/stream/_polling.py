"""Polling: find new slices by comparing every unit with what the group has delivered of it.

Why this is correct without clocks: every write to a unit changes its fingerprint (``version`` at least;
see :data:`partner_repo.units.UnitFingerprint`), and a single-document read is atomic. A pass reads every
unit's fingerprint (from an index alone), reads the slices (not the messages) of each unit whose fingerprint
differs from the one last seen, and offers the slices whose ids the group has not delivered. A write that
commits late, or carries an old ``created_at``, changes the fingerprint whenever it lands, so the next pass
sees it; nothing depends on the order in which writers' clocks or commits happened, across units or within
one.

Between passes a constant-size probe (the count and sums of the fingerprints, computed by the server)
answers "did anything change?", so an idle pass costs one small aggregate. Every
:data:`FULL_SCAN_INTERVAL` a pass skips the probe, so the one way to fool it (a unit deleted and another
created with exactly compensating sums between two probes) is healed within minutes, not never.

An erased unit's tombstone (``{_id, erased_at}``) is listed by the fingerprint scan like any id, with no
fingerprint. It is no unit: a pass that meets an id without a fingerprint asks which such ids are tombstones
(one query per page), remembers them, and never reads or offers them; the probe counts them as it counts
units, so an idle pass still stops at the probe. When the TTL index removes a tombstone, the next full pass
forgets it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import datetime
from typing import Any

from partner_repo.clock import utc_now
from partner_repo.errors import UnreadableUnit
from partner_repo.listener.delivery import Backoff, DeliveryPipeline
from partner_repo.listener.state import CommitAction, ListenerCheckpoints, describe, fingerprint_commit
from partner_repo.listener.stream._unreadable import UnitKey, UnreadableUnits, unit_key
from partner_repo.mongo import library_logger
from partner_repo.units import MemoryUnitRepository, UnitFingerprint, UnitOutline

logger = library_logger("partner_repo.listener")

FULL_SCAN_INTERVAL = 300.0
"""Seconds between polling passes that compare every fingerprint even when the probe says nothing changed."""

SCAN_PAGE = 256
"""Changed units read (outlined) per page of a pass; within a page, units whose slices are older go first."""

DEFAULT_BACKOFF = Backoff(initial=0.5, multiplier=2.0, maximum=30.0)


class UnitScanner:
    """One pass over every unit: polling's each pass and the change stream's catch-up scan.

    A unit that cannot be read as a unit is skipped (see :mod:`partner_repo.listener.stream._unreadable`):
    passes that stop at the probe never read it again, and a full pass tries it again (it may have been
    repaired in place) without logging it again while it stays as it was.
    """

    def __init__(
        self,
        units: MemoryUnitRepository,
        checkpoints: ListenerCheckpoints,
        pipeline: DeliveryPipeline,
        unreadable: UnreadableUnits | None = None,
    ) -> None:
        self._units = units
        self._checkpoints = checkpoints
        self._pipeline = pipeline
        self._known: dict[str, UnitFingerprint] | None = None
        self._erased: dict[UnitKey, UnitFingerprint] = {}
        """Erasure tombstones met (no unit: never read, never offered), with their empty fingerprint."""
        self.unreadable = unreadable or UnreadableUnits(checkpoints.group_name)

    async def scan(self, *, probe: bool = True) -> int:
        """Offer every slice the group has not delivered; returns how many deliveries were started.

        With ``probe``, a pass whose fingerprint totals match what was last seen stops after the probe.
        """
        if self._known is None:
            self._known = await self._checkpoints.fingerprints()
        known, unreadable = self._known, self.unreadable
        if probe and await self._units.fingerprint_totals() == _totals(
            [*known.values(), *unreadable.fingerprints(), *self._erased.values()]
        ):
            return 0
        present: set[UnitKey] = set()
        changed: list[tuple[object, UnitFingerprint]] = []
        async for unit_id, fingerprint in self._units.fingerprints():
            key = unit_key(unit_id)
            present.add(key)
            if key in unreadable:
                if not probe or unreadable.fingerprint(key) != fingerprint:
                    changed.append((unit_id, fingerprint))
            elif self._erased.get(key) == fingerprint:
                continue  # a tombstone met before: still one
            elif not isinstance(unit_id, str) or known.get(unit_id) != fingerprint:
                changed.append((unit_id, fingerprint))
        for unit_id in [u for u in known if u not in present]:
            del known[unit_id]  # deleted: a unit created again under its id is read afresh
        for key in [k for k in unreadable.known() if k not in present]:
            unreadable.readable(key)
        for key in [k for k in self._erased if k not in present]:
            del self._erased[key]  # removed by the TTL index
        started = 0
        for first in range(0, len(changed), SCAN_PAGE):
            page = await self._units_of(changed[first : first + SCAN_PAGE])
            outlines = [o for u, f in page if (o := await self._outline(u, f))]
            outlines.sort(key=_oldest_first)
            for outline in outlines:
                started += await self._offer(outline)
                known[outline.id] = outline.fingerprint
        return started

    async def after_delivery(self, action: CommitAction) -> None:
        """Run ``action`` once everything offered so far is delivered (coalesced with the next one)."""
        await self._pipeline.barrier(action, commit_key=self)

    async def _units_of(
        self, page: list[tuple[object, UnitFingerprint]]
    ) -> list[tuple[object, UnitFingerprint]]:
        """The page without the erasure tombstones in it (remembered): only an id without a fingerprint can
        be one, so a page of units is not asked about."""
        bare = [unit_id for unit_id, fingerprint in page if not any(v is not None for v in fingerprint)]
        erased = {unit_key(unit_id) for unit_id in await self._units.erased(bare)} if bare else set()
        for unit_id, fingerprint in page:
            if unit_key(unit_id) in erased:
                self._erased[unit_key(unit_id)] = fingerprint
                self.unreadable.readable(unit_key(unit_id))  # an unreadable unit erased: nothing to skip
                if isinstance(unit_id, str) and self._known is not None:
                    self._known.pop(unit_id, None)
        return [(unit_id, fingerprint) for unit_id, fingerprint in page if unit_key(unit_id) not in erased]

    async def _outline(self, unit_id: object, fingerprint: UnitFingerprint) -> UnitOutline | None:
        try:
            outline = await self._units.outline(unit_id)
        except UnreadableUnit as exc:
            self.unreadable.skip(exc, fingerprint)
            if isinstance(unit_id, str) and self._known is not None:
                self._known.pop(unit_id, None)
            return None
        self.unreadable.readable(unit_key(unit_id))
        return outline

    async def _offer(self, outline: UnitOutline) -> int:
        progress = await self._pipeline.progress(outline.id)
        commit = fingerprint_commit(self._checkpoints, progress, outline.fingerprint)
        return await self._pipeline.offer(outline.id, outline.core_id, outline.slices, on_commit=commit)


async def take_history_as_delivered(
    units: MemoryUnitRepository, checkpoints: ListenerCheckpoints, unreadable: UnreadableUnits
) -> None:
    """First start of a ``start_from="now"`` group: every slice stored now counts as delivered."""
    count = 0
    async for unit_id, fingerprint in units.fingerprints():
        try:
            outline = await units.outline(unit_id)
        except UnreadableUnit as exc:  # nothing of it can be delivered: once repaired, it counts as new
            unreadable.skip(exc, fingerprint)
            continue
        if outline is None:
            continue
        ids = [s.id for s in outline.slices if s.id is not None]
        revisions = {s.id: s.revision for s in outline.slices if s.id is not None and s.revision > 0}
        await checkpoints.mark_baseline(outline.id, outline.core_id, ids, outline.fingerprint, revisions)
        count += len(ids)
    await checkpoints.finish_baseline()
    logger.info(
        "listener group %r starts from now: %d stored slice(s) taken as delivered",
        checkpoints.group_name,
        count,
    )


class SourceStopped(Exception):
    """The polling source stopped before the pass a caller waited for: its term ended (the group's lease was
    lost, or the listener is stopping), or it failed and the group started another. Never a
    ``CancelledError``: the caller who waited was not cancelled."""


class PollingSource:
    """Runs a :class:`UnitScanner` pass every ``interval`` seconds until stopped."""

    name = "polling"

    def __init__(
        self,
        scanner: UnitScanner,
        interval: float,
        *,
        full_scan_interval: float = FULL_SCAN_INTERVAL,
        backoff: Backoff = DEFAULT_BACKOFF,
    ):
        self._scanner = scanner
        self._interval = interval
        self._full_scan_interval = full_scan_interval
        self._backoff = backoff
        self._wake = asyncio.Event()
        self._waiting: list[asyncio.Future[None]] = []
        self._stopped = False
        self.got_going = False
        """Whether a pass ever completed (so a failure afterwards starts backoff afresh)."""
        self.position_at: datetime | None = None
        """When the newest pass whose finds are all delivered started: what a restart would resume from."""

    def request_scan(self) -> asyncio.Future[None]:
        """A future resolved when a full pass that started after this call has offered what it found; failed
        with :class:`SourceStopped` when this source stops first (or has stopped)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._stopped:
            future.set_exception(SourceStopped())
            return future
        self._waiting.append(future)
        self._wake.set()
        return future

    async def run(self, stopping: asyncio.Event) -> None:
        try:
            await self._passes(stopping)
        finally:  # however it ends (stopped, failed, cancelled): nobody waits for a pass that will not run
            self._stopped = True
            waiting, self._waiting = self._waiting, []
            for future in waiting:
                if not future.done():
                    future.set_exception(SourceStopped())

    async def _passes(self, stopping: asyncio.Event) -> None:
        last_full = time.monotonic()
        failures = 0
        while not stopping.is_set():
            waiting, self._waiting = self._waiting, []
            full = bool(waiting) or time.monotonic() - last_full >= self._full_scan_interval
            started_at = utc_now()
            try:
                await self._scanner.scan(probe=not full)
            except asyncio.CancelledError:
                self._waiting.extend(waiting)
                raise
            except Exception as exc:
                failures += 1
                delay = self._backoff.delay(failures)
                logger.warning("listener: polling pass failed (%s); next pass in %.1fs", describe(exc), delay)
                self._waiting.extend(waiting)
                await _sleep_until(stopping, self._wake, delay)
                continue
            failures = 0
            self.got_going = True
            await self._scanner.after_delivery(self._position_reached(started_at))
            if full:
                last_full = time.monotonic()
            for future in waiting:
                if not future.done():
                    future.set_result(None)
            await _sleep_until(stopping, self._wake, self._interval)

    def _position_reached(self, at: datetime) -> CommitAction:
        async def advance() -> None:
            self.position_at = at

        return advance


async def _sleep_until(stopping: asyncio.Event, wake: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less when stopping or woken."""
    waiters = [asyncio.create_task(stopping.wait()), asyncio.create_task(wake.wait())]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiter
    wake.clear()


def _totals(fingerprints: list[UnitFingerprint]) -> tuple[int, ...]:
    sums = [0, 0, 0, 0]
    for fingerprint in fingerprints:
        for index, value in enumerate(fingerprint[:4]):
            sums[index] += _as_int(value)
    return (len(fingerprints), *sums)


def _as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _oldest_first(outline: UnitOutline) -> tuple[Any, ...]:
    times = [s.created_at for s in outline.slices if s.created_at is not None]
    return (max(times) if times else None) is None, max(times) if times else 0, outline.id


__all__: list[str] = []  # internal to the listener: nothing here is public API

"""MemoryEraser: forget a core (its window and every unit), its units before a date, or only its window.

An erasure is resumable because of its order (``docs/erasure.md`` says what each step guarantees):

1. a *request* is recorded (``pending``), naming the core, the scope and the lease owner it will hold;
2. the core's rolling lease is taken (waiting for a roll in progress) and kept for as long as the erasure
   runs (``hold``, 24 h by default, so a run cut short keeps rolls off the core until it is run again);
3. the ids of every unit it erases, with their slice ids, are recorded as *targets*;
4. the units are deleted, each leaving a tombstone under its id (below),
   with every listener group's progress on them (a tombstone per group too), their dead letters, their
   slice-id claims and what the recall index holds of them (:mod:`partner_repo.recall._store`, not left for
   ``on_erased``); for a whole core, the ids its next roll would write (its session's unit, and the unit
   that one continues) get a tombstone as well, whether a unit exists under them or not, and the core
   document (the live window, the session, the lease) goes last; the request is ``erased``;
5. the ids are appended to the erasure log, which listener groups follow to tell their consumers
   (``on_erased``), and the request is ``done``.

A run cut short anywhere leaves the request unfinished; the next ``forget`` of the core (or
:meth:`MemoryEraser.finish_pending`) continues it from step 2: it lists the core's units again (adding what
appeared meanwhile), deletes what is left, and logs the parts not logged yet. Every step is idempotent, so
running it twice, or a finished erasure again, removes nothing more.

What an erased unit leaves under its id in ``memory_units`` is a tombstone, ``{_id, erased_at}``
(:func:`tombstone_units`). A roller that took its lease and snapshot before an erasure, then stalled past its
lease while the eraser took the lease over, still holds an increment of the erased window. Its append is
fenced on the unit (``units/_append.py``), and the tombstone is what that fence meets: a push finds no unit,
and the insert that would create the unit again fails on the duplicate ``_id`` (:class:`StaleIncrement`).
The roller then checks its lease, which the eraser took, and stops. A TTL index removes tombstones after
``TOMBSTONE_RETENTION`` (``docs/erasure.md`` says what remains after that). A batch is erased in two commands,
both idempotent: the core's units among the ids are deleted, then a tombstone is inserted for every id (one
unordered ``insert``; an id already taken is left as it is: a tombstone of an earlier run, a clear's
reservation, which becomes an erased unit's tombstone, or a unit of another core). A unit of the core that a
stalled roller inserted in between is found by the ids the insert could not take; it is deleted in turn (and
reported, so the erasure announces it too), until every id of the core holds a tombstone.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from partner_repo.clock import utc_now
from partner_repo.cores import CoreHold, MemoryCoreRepository
from partner_repo.erasure._preview import ErasurePreview, preview_erasure
from partner_repo.erasure._requests import ErasureRequest, ErasureRequests
from partner_repo.errors import ConflictError, InvalidInput
from partner_repo.events import ErasureScope
from partner_repo.listener.state import DeadLetterRepository, ErasureLog, remove_unit_progress
from partner_repo.models import MemoryCore
from partner_repo.mongo import CORES, ERASED_AT, UNITS, MongoDatabase, driver, insert_new, library_logger
from partner_repo.recall import RecallStore
from partner_repo.units import MemoryUnitRepository, SliceIdClaims
from partner_repo.validation import optional_datetime, require_id

ATTEMPTS = 10
"""How often a batch deletes again the units stalled rollers inserted under its ids meanwhile."""


@dataclass
class Tombstoned:
    """What erasing one batch of ids did: the units of the core it deleted, and those among them that were
    inserted after the erasure had listed its targets (with their slice ids)."""

    deleted: int = 0
    late: list[tuple[Any, list[Any]]] = field(default_factory=list)


async def tombstone_units(
    units: Any,
    core_id: str,
    unit_ids: Sequence[Any],
    at: datetime,
    slice_ids: Callable[[dict[str, Any]], list[Any]],
) -> Tombstoned:
    """Delete the core's units among ``unit_ids`` and leave a tombstone under every one of the ids, existing
    or not (a session's unit not written yet is fenced the same way); see the module docstring."""
    done = Tombstoned()
    pending = list(unit_ids)
    for _ in range(ATTEMPTS):
        result = await units.delete_many({"_id": {"$in": pending}, "core_id": core_id})
        done.deleted += int(result.deleted_count)
        taken = await insert_new(units, [{"_id": unit_id, ERASED_AT: at} for unit_id in pending])
        if not taken:
            return done
        await _erase_reservations(units, taken, at)
        cursor = units.find({"_id": {"$in": taken}, "core_id": core_id}, {"slice_ids": 1, "slices.id": 1})
        inserted = [(document["_id"], slice_ids(document)) async for document in cursor]
        if not inserted:
            return done  # every id taken holds a tombstone (or another core's unit)
        done.late += inserted  # written after the delete above: by a roller stalled past its lease
        pending = [unit_id for unit_id, _ in inserted]
    raise ConflictError(
        f"core {core_id!r}: units kept being written under the ids being erased; run the erasure again"
    )


async def _erase_reservations(units: Any, unit_ids: Sequence[Any], at: datetime) -> None:
    """A clear's reservation under one of the ids (a session whose unit does not exist yet; every id an
    erasure names is the core's) is a unit for the erasure: it becomes an erased unit's tombstone, so no
    stalled roller turns it into a unit holding the erased text (its mark would admit text recorded after
    the clear). One update, idempotent."""
    await units.update_many(
        {"_id": {"$in": list(unit_ids)}, "core_id": {"$exists": False}, "taken_until": {"$exists": True}},
        {"$set": {ERASED_AT: at}, "$unset": {"taken_until": "", "taken_count": "", "trimmed_to": ""}},
    )


logger = library_logger("partner_repo.erasure.eraser")

ERASURE_HOLD = timedelta(hours=24)
"""How long an erasure keeps the core's rolling lease without beating: a run cut short keeps rolls off the
core that long (unless it is run again), so its window is not rolled into new memory meanwhile."""

LEASE_WAIT = timedelta(minutes=5)
"""How long an erasure or a window clear waits for a roll in progress to give the lease back."""

CLEAR_ATTEMPTS = 3
"""How many times :meth:`MemoryEraser.clear_window` starts again after its hold was taken over."""
CLEAR_HOLD = timedelta(seconds=60)
"""The lease a window clear holds (one update): as long as a roller's."""

BATCH = 500
"""Units deleted (and announced) per round trip."""


@dataclass(frozen=True)
class ErasureReport:
    """What an erasure removed (counted over every run of it). ``erasure_id`` is None when there was
    nothing to forget (no core, no unit); ``resumed`` when this call finished an erasure a previous run left
    unfinished. ``kept_units``: units ``before`` left on purpose (the current session's)."""

    erasure_id: str | None
    core_id: str
    scope: ErasureScope
    before: datetime | None = None
    resumed: bool = False
    core_removed: bool = False
    window_messages: int = 0
    units: int = 0
    slices: int = 0
    checkpoints: int = 0
    dead_letters: int = 0
    log_parts: int = 0
    kept_units: tuple[str, ...] = ()

    @classmethod
    def of(cls, request: ErasureRequest, *, resumed: bool) -> ErasureReport:
        removed = request.removed
        return cls(
            erasure_id=request.erasure_id,
            core_id=request.core_id,
            scope=request.scope,
            before=request.before,
            resumed=resumed,
            core_removed=bool(removed["core"]),
            window_messages=removed["window_messages"],
            units=removed["units"],
            slices=request.slices,
            checkpoints=removed["checkpoints"],
            dead_letters=removed["dead_letters"],
            log_parts=request.parts,
            kept_units=request.kept_units,
        )


@driver.timeouts_surface_as_project_errors
class MemoryEraser:
    """Erases memory on the database it is given; see the module docstring and ``docs/erasure.md``."""

    def __init__(
        self,
        database: MongoDatabase,
        *,
        hold: timedelta = ERASURE_HOLD,
        lease_wait: timedelta = LEASE_WAIT,
        clock: Callable[[], datetime] = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        for name, value in (("hold", hold), ("lease_wait", lease_wait)):
            if not isinstance(value, timedelta) or value < timedelta(0) or (name == "hold" and not value):
                raise InvalidInput(f"{name} must be a positive timedelta, got {value!r}")
        self._database = database
        self._cores = database[CORES]
        self._units = database[UNITS]
        self._requests = ErasureRequests(database)
        self._log = ErasureLog(database)
        self._letters = DeadLetterRepository(database)
        self._hold = CoreHold(database, monotonic=monotonic)
        self._hold_for = hold
        self._wait = lease_wait.total_seconds()
        self._clock = clock

    async def forget(self, core_id: str) -> ErasureReport:
        """Erase the core: its window (the core document), every unit of it, every listener group's progress
        on them and their dead letters; then tell listener groups (the erasure log). Idempotent: a core with
        nothing left gives a report without an erasure id. Finishes the core's unfinished erasures first."""
        return await self._erase(require_id(core_id, "core_id"), "core", None)

    async def forget_before(self, core_id: str, before: datetime) -> ErasureReport:
        """Erase the core's units that ended before ``before`` (their ``updated_at``, the time of their last
        slice), except the current session's unit and the unit it continues, which the next roll reads.
        The window and the core stay."""
        cutoff = optional_datetime(before, "before")
        if cutoff is None:
            raise InvalidInput("before must be a datetime")
        return await self._erase(require_id(core_id, "core_id"), "before", cutoff)

    async def clear_window(self, core_id: str) -> int:
        """Empty the core's live chat window (the core, its session and its memory stay); returns how many
        messages it held. Waits for a roll in progress, so a roll never trims messages recorded after the
        clear. Consumers are not told: they never receive the window.

        The session's unit is marked first (every position the window holds is taken: a roller that took
        its snapshot before and stalled can never store them), then the window is emptied under the hold. A
        roller that takes the hold over in between (it saw the clear silent for its ttl) would leave marked
        messages in the window that no roll stores: the clear starts again, up to :data:`CLEAR_ATTEMPTS`
        times, so what it marked is also emptied."""
        core_id = require_id(core_id, "core_id")
        taken: list[range] = []  # the positions each attempt marked, and those the last one emptied
        for _ in range(CLEAR_ATTEMPTS):
            cleared = await self._clear_once(core_id, taken)
            if cleared is not None:
                # an attempt whose hold was taken over had marked messages that the taker's roll cut (they
                # were not stored): they were cleared all the same, so they count; what others removed
                # from the window meanwhile (a roll's trim, another clear) does not
                return positions_in(taken)
            logger.warning(
                "core %r: the clear's hold was taken over before the window was emptied; again", core_id
            )
        raise ConflictError(
            f"core {core_id!r}: the lease was taken over before the window was cleared, "
            f"{CLEAR_ATTEMPTS} times; clear it again"
        )

    async def _clear_once(self, core_id: str, taken: list[range]) -> int | None:
        """One clear under a hold of its own: how many messages it emptied (None: the hold was taken over);
        ``taken`` gets the positions it marked, and those it emptied."""
        owner = f"clear-{uuid.uuid4()}"
        async with self._hold.held(core_id, owner, duration=CLEAR_HOLD, wait=self._wait) as core:
            if core is None:
                return 0
            until = core.window_start + len(core.chat_messages)
            await MemoryUnitRepository(self._database).mark_taken(
                core.memory_session_id, core_id=core_id, until=until
            )
            taken.append(range(core.window_start, until))
            cleared = await MemoryCoreRepository(self._database).clear_window(core_id, lease_owner=owner)
            if cleared is not None:  # under the hold the window still starts where it was read
                taken.append(range(core.window_start, core.window_start + cleared))
            return cleared

    async def preview(
        self, core_id: str, *, before: datetime | None = None, window_only: bool = False
    ) -> ErasurePreview:
        """What :meth:`forget` (``forget_before`` with ``before``, ``clear_window`` with ``window_only``)
        would remove now, counted without changing anything."""
        core_id = require_id(core_id, "core_id")
        if window_only:
            return await preview_erasure(self._database, core_id, "window")
        if before is None:
            return await preview_erasure(self._database, core_id, "core")
        cutoff = optional_datetime(before, "before")
        kept = await self._current_units(await MemoryCoreRepository(self._database).get(core_id))
        return await preview_erasure(self._database, core_id, "before", before=cutoff, kept=kept)

    async def unfinished(self, core_id: str | None = None) -> list[ErasureRequest]:
        """Erasures a run left unfinished (of one core, when given), oldest first."""
        return await self._requests.unfinished(None if core_id is None else require_id(core_id, "core_id"))

    async def finish_pending(self) -> list[ErasureReport]:
        """Finish every erasure a run left unfinished, of every core, oldest first."""
        return [await self._run(request, resumed=True) for request in await self._requests.unfinished()]

    # -- one erasure -----------------------------------------------------------------------------------------

    async def _erase(self, core_id: str, scope: ErasureScope, before: datetime | None) -> ErasureReport:
        requested: ErasureReport | None = None
        for request in await self._requests.unfinished(core_id):
            report = await self._run(request, resumed=True)
            logger.info("core %r: finished erasure %s left unfinished", core_id, request.erasure_id)
            if request.scope == scope and request.before == before:
                requested = report
        if requested is not None:
            return requested
        if not await self._anything_to_erase(core_id, scope, before):
            return ErasureReport(erasure_id=None, core_id=core_id, scope=scope, before=before)
        request = await self._requests.open(core_id, scope, before, now=self._clock())
        return await self._run(request, resumed=False)

    async def _anything_to_erase(self, core_id: str, scope: ErasureScope, before: datetime | None) -> bool:
        if scope == "before":  # the current session's unit counts: the report says it was kept
            query = {"core_id": core_id, "updated_at": {"$lt": before}}
            return await self._units.find_one(query, {"_id": 1}) is not None
        if await self._cores.find_one({"_id": core_id}, {"_id": 1}) is not None:
            return True
        return await self._units.find_one({"core_id": core_id}, {"_id": 1}) is not None

    async def _run(self, request: ErasureRequest, *, resumed: bool) -> ErasureReport:
        if request.state == "pending":
            whole = request.scope == "core"
            held = self._hold.held(
                request.core_id,
                request.owner,
                duration=self._hold_for,
                wait=self._wait,
                release_on_error=False,  # cut short: rolls stay off the core until the erasure is run again
            )
            async with held as core:
                await self._plan(request, core)
                if whole and core is not None:
                    await self._fence_session(request, core)
                await self._delete_targets(request)
                if whole and core is not None:
                    await self._delete_core(request)
            await self._requests.erased(request.erasure_id)
        targets = [target async for target in self._requests.targets(request.erasure_id)]
        slices = sum(len(slice_ids) for _, slice_ids in targets)
        parts = await self._log.append(
            request.erasure_id, request.core_id, request.scope, targets, at=self._clock()
        )
        await self._requests.done(request.erasure_id, parts=parts, slices=slices, at=self._clock())
        await self._requests.drop_targets(request.erasure_id)
        finished = await self._requests.get(request.erasure_id)
        assert finished is not None
        logger.info(
            "core %r: erasure %s done (%d unit(s), %d slice(s), %d window message(s))",
            request.core_id,
            request.erasure_id,
            finished.removed["units"],
            slices,
            finished.removed["window_messages"],
        )
        return ErasureReport.of(finished, resumed=resumed)

    async def _plan(self, request: ErasureRequest, core: MemoryCore | None) -> None:
        """Record what the erasure removes as it is now (the lease is held: no roll adds to it meanwhile)."""
        query: dict[str, Any] = {"core_id": request.core_id}
        if request.scope == "before":
            kept = await self._current_units(core)
            query["updated_at"] = {"$lt": request.before}
            if kept:
                query["_id"] = {"$nin": kept}
                await self._requests.keep(request.erasure_id, kept)
        cursor = self._units.find(query, {"slice_ids": 1, "slices.id": 1})
        batch: list[tuple[Any, list[Any]]] = []
        async for document in cursor:
            batch.append((document["_id"], _slice_ids(document)))
            if len(batch) >= BATCH:
                await self._requests.add_targets(request, batch)
                batch = []
        await self._requests.add_targets(request, batch)

    async def _current_units(self, core: MemoryCore | None) -> list[str]:
        """The units the next roll of ``core`` reads: its session's, and the one that continues."""
        if core is None:
            return []
        kept = [core.memory_session_id]
        if core.session_continues is not None:
            kept.append(core.session_continues)
        current = await self._units.find_one({"_id": core.memory_session_id}, {"previous_unit_id": 1})
        previous = (current or {}).get("previous_unit_id")
        if isinstance(previous, str) and previous not in kept:
            kept.append(previous)
        return kept

    async def _fence_session(self, request: ErasureRequest, core: MemoryCore) -> None:
        """Tombstones under the ids the core's next roll would write (its session's unit, and the unit that
        one continues), first and whether a unit exists there or not: a roller stalled past its lease cannot
        create them after the erasure. What stands under them now is erased (and announced) with them."""
        unit_ids = _session_units(core)
        found = self._units.find(
            {"_id": {"$in": unit_ids}, "core_id": core.id}, {"slice_ids": 1, "slices.id": 1}
        )
        await self._requests.add_targets(request, [(d["_id"], _slice_ids(d)) async for d in found])
        await self._delete_units(request, unit_ids)

    async def _delete_targets(self, request: ErasureRequest) -> None:
        batch: list[Any] = []
        async for unit_id, _ in self._requests.targets(request.erasure_id):
            batch.append(unit_id)
            if len(batch) >= BATCH:
                await self._delete_units(request, batch)
                batch = []
        await self._delete_units(request, batch)

    async def _delete_units(self, request: ErasureRequest, unit_ids: list[Any]) -> None:
        """Delete a batch of units, leaving tombstones, with what names them: progress in every listener
        group, dead letters, slice-id claims. A unit a stalled roller wrote meanwhile under one of the ids is
        erased and becomes a target too (so it is announced)."""
        if not unit_ids:
            return
        done = await tombstone_units(self._units, request.core_id, unit_ids, utc_now(), _slice_ids)
        if done.late:
            logger.warning(
                "core %r: erasure %s also removed %d unit(s) written meanwhile under ids it erases",
                request.core_id,
                request.erasure_id,
                len(done.late),
            )
            await self._requests.add_targets(request, done.late)
        checkpoints = await remove_unit_progress(self._database, unit_ids)
        letters = await self._letters.remove_for_units(unit_ids)
        await RecallStore(self._database).remove_units(request.core_id, unit_ids)  # derived text goes too
        await SliceIdClaims(self._database).release_units(unit_ids)  # after the tombstones: none comes back
        await self._requests.count(
            request.erasure_id, units=done.deleted, checkpoints=checkpoints, dead_letters=letters
        )

    async def _delete_core(self, request: ErasureRequest) -> None:
        """The core document goes last (while it exists, its lease keeps rolls off the core)."""
        gone = await self._cores.find_one_and_delete(
            {"_id": request.core_id, "lease_owner": request.owner}, projection={"chat_messages": 1}
        )
        if gone is None:
            if await self._cores.find_one({"_id": request.core_id}, {"_id": 1}) is None:
                return  # deleted by an earlier run of this erasure
            raise ConflictError(
                f"core {request.core_id!r}: the erasure lost the core's lease before removing it; rerun it"
            )
        window = len(gone.get("chat_messages") or [])
        await self._requests.count(request.erasure_id, core=1, window_messages=window)


def positions_in(ranges: list[range]) -> int:
    """How many positions the ranges cover together (they may overlap: an attempt after one whose hold was
    taken over reads the window again from where the taker's roll left it)."""
    count, reached = 0, None
    for piece in sorted((r for r in ranges if r), key=lambda r: (r.start, r.stop)):
        start = piece.start if reached is None else max(piece.start, reached)
        count += max(piece.stop - start, 0)
        reached = piece.stop if reached is None else max(reached, piece.stop)
    return count


def _session_units(core: MemoryCore) -> list[Any]:
    """The ids the core's next roll would write: its session's unit and the unit that one continues."""
    return [unit_id for unit_id in (core.memory_session_id, core.session_continues) if unit_id is not None]


def _slice_ids(document: dict[str, Any]) -> list[Any]:
    """Every slice id a stored unit holds: the derived array, or its slices' ids (units from other tools)."""
    ids = list(document.get("slice_ids") or [])
    seen = {i for i in ids if isinstance(i, str)}
    for piece in document.get("slices") or []:
        found = piece.get("id") if isinstance(piece, dict) else None
        if isinstance(found, str) and found not in seen:
            seen.add(found)
            ids.append(found)
    return ids


__all__ = [
    "ERASURE_HOLD",
    "ErasureReport",
    "LEASE_WAIT",
    "MemoryEraser",
    "Tombstoned",
    "tombstone_units",
]

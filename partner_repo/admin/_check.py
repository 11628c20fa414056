"""UnitChecker: find every unit that breaks the invariants, and repair them in place.

Both walks stream: units are read in ``_id`` order in bounded keyset batches (each its own query with
``maxTimeMS``, so no server cursor lives for the whole walk), and only the reports of broken units are kept,
so memory does not grow with the collection. Slice ids shared between units are found first, with one
aggregation (:func:`shared_slice_ids`: every unit's ids unwound and grouped by id, only the ids of two units
or more kept), not a query per unit (each a fan-out on a sharded cluster); slice-id claims their unit does not
hold (:mod:`partner_repo.units._claims`) are walked in ``_id`` batches, each reading the units it names by
``_id``, and reported too; ``repair`` releases those it may.

Repair goes through :meth:`MemoryUnitRepository.save`, which normalizes and writes with optimistic
concurrency: a unit changed by someone else meanwhile is re-read and repaired again, never overwritten. A
slice id shared by several units stays with the unit whose id sorts first; the others get fresh ids (and
the report says which). Units are repaired in descending ``_id`` order so that the unit keeping an id is
saved after the others have let go of it.

Cores whose memory session is another core's unit are reported and repaired too. A core records into the
unit its ``memory_session_id`` names; a unit belongs to one core (its ``core_id``). A core pointed at another
core's unit (by a tool, or an import of one Partner state into two cores before ``import-state`` refused it)
can never roll: every append there is refused. ``check`` finds such cores by walking the cores in ``_id``
order in bounded batches, looking their session units up by ``_id`` (one query per batch), and ``repair``
gives each a fresh session, with a compare-and-set on the session it found, so a core that moved on meanwhile
is left alone. The window is kept: the next roll stores it in the new session.

What check and repair say about one unit is :class:`UnitViolations`, :class:`UnitRepair` or
:class:`UnitRepairFailure`; a repair in progress keeps its state and the slice-id renamings it makes in
:class:`Repairing` (pure).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from partner_repo.admin._inspection import (
    DUPLICATE_SLICE_ID,
    ID_TOO_LONG,
    UNREADABLE,
    UNVERSIONED,
    InvariantViolation,
    abbreviated,
    inspect_document,
)
from partner_repo.callables import Progress
from partner_repo.clock import UtcDatetime, utc_now
from partner_repo.cores import MemoryCoreRepository, new_session_id
from partner_repo.errors import ConflictError, DuplicateSliceId, InvalidInput, NotFound, UnitTooLarge
from partner_repo.models import MAX_ID_LENGTH, MemoryUnit
from partner_repo.mongo import (
    CORES,
    NOT_ERASED,
    SLICE_ID_CLAIMS,
    UNITS,
    MongoDatabase,
    driver,
    is_tombstone,
    live,
    stored_datetime,
    unit_from_document,
)
from partner_repo.normalization import new_slice_id
from partner_repo.units import ORPHAN_GRACE, MemoryUnitRepository, SliceIdClaims
from partner_repo.validation import require_id


class UnitViolations(BaseModel):
    """The violations of one unit. ``repairable`` is False when repair cannot fix them (unreadable data)."""

    model_config = ConfigDict(frozen=True)

    unit_id: str
    core_id: str | None
    violations: list[InvariantViolation]
    repairable: bool


class UnitRepair(BaseModel):
    """One repaired unit: what was wrong (now fixed), and the version it was saved as."""

    model_config = ConfigDict(frozen=True)

    unit_id: str
    core_id: str | None
    changes: list[InvariantViolation]
    version: int


class UnitRepairFailure(BaseModel):
    model_config = ConfigDict(frozen=True)

    unit_id: str
    core_id: str | None
    violations: list[InvariantViolation]
    reason: str


SHARED_PIPELINE: list[dict[str, Any]] = [
    {"$match": NOT_ERASED},
    {"$project": {"ids": {"$setUnion": [{"$ifNull": ["$slice_ids", []]}, {"$ifNull": ["$slices.id", []]}]}}},
    {"$unwind": "$ids"},
    {"$match": {"ids": {"$type": "string"}}},
    {"$group": {"_id": "$ids", "units": {"$addToSet": "$_id"}}},
    {"$match": {"units.1": {"$exists": True}}},
]
"""Each slice id held by two units or more, with its units (the derived ``slice_ids`` and the slices' own
ids: a unit from another tool may lack the derived array)."""


class SharedSliceIds:
    """Slice id -> the units holding it (sorted), for the ids more than one unit holds."""

    def __init__(self, holders: dict[str, list[str]]) -> None:
        self._holders = holders

    def of(self, unit_id: str, slice_ids: list[str]) -> list[tuple[str, str]]:
        """(slice id, other unit) for each of ``slice_ids`` another unit also holds, by other unit."""
        pairs = [(s, other) for s in slice_ids for other in self._holders.get(s, []) if other != unit_id]
        return sorted(set(pairs), key=lambda pair: (pair[1], pair[0]))

    def let_go(self, slice_id: str, unit_id: str) -> None:
        """``unit_id`` no longer holds ``slice_id`` (repair gave it a fresh id)."""
        holders = [u for u in self._holders.get(slice_id, []) if u != unit_id]
        self._holders[slice_id] = holders if len(holders) > 1 else []


async def shared_slice_ids(database: Any, *, max_time_ms: int) -> SharedSliceIds:
    """The ids two units or more hold: one aggregation (spilling to disk past the memory limit)."""
    rows = await driver.aggregate_list(
        database[UNITS], SHARED_PIPELINE, allowDiskUse=True, maxTimeMS=max_time_ms
    )
    return SharedSliceIds({row["_id"]: sorted(str(u) for u in row["units"]) for row in rows})


class OrphanClaim(BaseModel):
    """A claim its unit does not hold: a write that did not finish (or is still on its way), or a unit
    erased or deleted since. ``releasable``: ``repair`` releases it (its unit is erased, or it is older than
    :data:`~partner_repo.units._claims.ORPHAN_GRACE`)."""

    model_config = ConfigDict(frozen=True)

    slice_id: str
    unit_id: str
    claimed_at: UtcDatetime | None
    releasable: bool

    @property
    def key(self) -> tuple[str, str]:
        """(slice id, unit id): what :meth:`~partner_repo.units._claims.SliceIdClaims.release` takes."""
        return self.slice_id, self.unit_id


async def orphan_claims(
    database: Any, now: datetime, *, batch: int, max_time_ms: int
) -> AsyncIterator[OrphanClaim]:
    """Every claim whose unit does not hold its id, in slice-id order."""
    claims, units = database[SLICE_ID_CLAIMS], database[UNITS]
    last: str | None = None
    while True:
        query: dict[str, Any] = {} if last is None else {"_id": {"$gt": last}}
        cursor = claims.find(query).sort("_id", 1).limit(batch).max_time_ms(max_time_ms)
        found = [document async for document in cursor]
        if not found:
            return
        last = found[-1]["_id"]
        named = list({document["unit_id"] for document in found})
        projection = {"slice_ids": 1, "erased_at": 1, "taken_until": 1}
        holders = units.find({"_id": {"$in": named}}, projection)
        stored = {document["_id"]: document async for document in holders.max_time_ms(max_time_ms)}
        for claim in found:
            unit = stored.get(claim["unit_id"])
            if unit is not None and not is_tombstone(unit) and claim["_id"] in (unit.get("slice_ids") or []):
                continue
            claimed_at = stored_datetime(claim.get("claimed_at"))
            # an erased unit's tombstone takes no write again; a window clear's (a mark) may become the unit
            erased = is_tombstone(unit) and not isinstance((unit or {}).get("taken_until"), int)
            old = claimed_at is None or now - claimed_at >= ORPHAN_GRACE
            yield OrphanClaim(
                slice_id=claim["_id"],
                unit_id=claim["unit_id"],
                claimed_at=claimed_at,
                releasable=erased or old,
            )
        if len(found) < batch:
            return


BATCH_CORES = 100


class ForeignSession(BaseModel):
    """A core whose session unit (``session_id``) belongs to core ``owner``."""

    model_config = ConfigDict(frozen=True)

    core_id: str
    session_id: str
    owner: str


async def foreign_sessions(
    database: MongoDatabase, core_id: str | None = None, *, max_time_ms: int, batch: int = BATCH_CORES
) -> AsyncIterator[ForeignSession]:
    """Every core (or only ``core_id``) whose session unit belongs to another core."""
    cores, units = database[CORES], database[UNITS]
    last: str | None = None
    while True:
        query: dict[str, Any] = {"_id": {"$type": "string"}}
        if core_id is not None:
            query["_id"] = require_id(core_id, "core_id")
        elif last is not None:
            query["_id"]["$gt"] = last
        cursor = (
            cores.find(query, {"memory_session_id": 1}).sort("_id", 1).limit(batch).max_time_ms(max_time_ms)
        )
        found = [document async for document in cursor]
        sessions = {
            d["memory_session_id"]: d["_id"] for d in found if isinstance(d.get("memory_session_id"), str)
        }
        owners = units.find({"_id": {"$in": sorted(sessions)}, "core_id": {"$exists": True}}, {"core_id": 1})
        async for unit in owners.max_time_ms(max_time_ms):
            if unit["core_id"] != sessions[unit["_id"]]:
                yield ForeignSession(
                    core_id=sessions[unit["_id"]], session_id=unit["_id"], owner=unit["core_id"]
                )
        if core_id is not None or len(found) < batch:
            return
        last = found[-1]["_id"]


async def give_fresh_session(database: MongoDatabase, foreign: ForeignSession) -> bool:
    """Give the core a fresh session while its session is still the foreign unit; True when it did."""
    cores = MemoryCoreRepository(database)
    return await cores.set_session(foreign.core_id, new_session_id(), expected=foreign.session_id)


class Repairing:
    """One unit's repair in progress: what was reported, what is wrong now, whether it was completed."""

    def __init__(self, report: UnitViolations) -> None:
        self.report = report
        self.current = report
        self.adopted = False

    def done(self, changes: list[InvariantViolation], version: Any) -> UnitRepair:
        number = version if isinstance(version, int) and not isinstance(version, bool) else 0
        return UnitRepair(
            unit_id=self.report.unit_id, core_id=self.report.core_id, changes=changes, version=number
        )

    def failure(self, reason: str) -> UnitRepairFailure:
        report = self.report
        return UnitRepairFailure(
            unit_id=report.unit_id, core_id=report.core_id, violations=report.violations, reason=reason
        )

    def unrepairable(self) -> UnitRepairFailure:
        if any(p.code == UNREADABLE for p in self.report.violations):
            return self.failure("the stored document is not a valid unit; fix or delete it by hand")
        return self.failure(
            f"a unit's own, core or previous unit id longer than {MAX_ID_LENGTH} characters cannot be "
            "renamed in place; copy the unit under a shorter id by hand"
        )


def release_shared_ids(unit: MemoryUnit, shared: SharedSliceIds) -> list[tuple[InvariantViolation, str, str]]:
    """Fresh ids for slices whose ids a unit with a smaller id also uses (that unit keeps them): each change,
    with the id let go and the unit keeping it."""
    changes: list[tuple[InvariantViolation, str, str]] = []
    lost: dict[str, str] = {}
    for slice_id, other in shared.of(unit.id, sorted({s.id for s in unit.complete_slices() if s.id})):
        if other < unit.id:
            lost[slice_id] = min(other, lost.get(slice_id, other))
    for piece in unit.slices:
        if piece is not None and piece.id in lost:
            fresh, keeper = new_slice_id(), lost[piece.id]
            detail = f"slice id {piece.id!r} (kept by unit {keeper!r}) is now {fresh!r}"
            changes.append((InvariantViolation(code=DUPLICATE_SLICE_ID, detail=detail), piece.id, keeper))
            piece.id = fresh
    return changes


def shorten_slice_ids(unit: MemoryUnit) -> list[InvariantViolation]:
    """Fresh ids for slices whose ids are over the id limit (written by another tool)."""
    changes: list[InvariantViolation] = []
    for piece in unit.slices:
        if piece is not None and piece.id is not None and len(piece.id) > MAX_ID_LENGTH:
            fresh = new_slice_id()
            detail = f"slice id {abbreviated(piece.id)} is now {fresh!r}"
            changes.append(InvariantViolation(code=ID_TOO_LONG, detail=detail))
            piece.id = fresh
    return changes


BATCH_UNITS = 100
"""Units per keyset batch of a walk."""
REPAIR_ATTEMPTS = 5
"""How often repair re-reads a unit that another writer changed while it was being repaired."""
DEFAULT_MAX_TIME_MS = 30_000


class CheckReport(BaseModel):
    """What ``check`` found: how many units it read, every unit with a problem, and every slice-id claim its
    unit does not hold (of every core: a claim names no core)."""

    model_config = ConfigDict(frozen=True)

    units_checked: int
    units: list[UnitViolations]
    orphan_claims: list[OrphanClaim] = []
    foreign_sessions: list[ForeignSession] = []
    """Cores whose session unit belongs to another core (they cannot roll: ``repair`` gives them a fresh
    session)."""

    @property
    def ok(self) -> bool:
        return not self.units and not self.orphan_claims and not self.foreign_sessions


class RepairReport(BaseModel):
    """What ``repair`` did: units read, units repaired with their changes, units it could not repair."""

    model_config = ConfigDict(frozen=True)

    units_checked: int
    repaired: list[UnitRepair]
    failed: list[UnitRepairFailure]
    released_claims: list[OrphanClaim] = []
    fresh_sessions: list[ForeignSession] = []
    """Cores whose session unit belonged to another core, given a fresh session."""

    @property
    def ok(self) -> bool:
        return not self.failed


@driver.timeouts_surface_as_project_errors
class UnitChecker:
    """Checks (read-only) and repairs (through the unit repository) the units of one database."""

    def __init__(
        self,
        database: MongoDatabase,
        *,
        batch_units: int = BATCH_UNITS,
        max_time_ms: int = DEFAULT_MAX_TIME_MS,
    ) -> None:
        for name, value in (("batch_units", batch_units), ("max_time_ms", max_time_ms)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInput(f"{name} must be a positive integer, got {value!r}")
        self._database = database
        self._units = database[UNITS]
        self._repository = MemoryUnitRepository(database)
        self._claims = SliceIdClaims(database)
        self._batch = batch_units
        self._max_time_ms = max_time_ms

    async def check(self, core_id: str | None = None, *, progress: Progress | None = None) -> CheckReport:
        """Every unit (of ``core_id``, or of every core) that breaks an invariant, with what is wrong.

        ``progress`` is told the units checked so far (:data:`~partner_repo.callables.Progress`).
        """
        checked = 0
        found: list[UnitViolations] = []
        total = await self._count(core_id, progress)
        shared = await shared_slice_ids(self._database, max_time_ms=self._max_time_ms)
        async for document in self._walk(core_id, ascending=True):
            checked += 1
            report = self._violations(document, shared)
            if report is not None:
                found.append(report)
            if progress is not None:
                progress(checked, total)
        orphans = [claim async for claim in self._orphans()]
        foreign = [f async for f in foreign_sessions(self._database, core_id, max_time_ms=self._max_time_ms)]
        return CheckReport(
            units_checked=checked, units=found, orphan_claims=orphans, foreign_sessions=foreign
        )

    async def violations(self, core_id: str | None = None) -> AsyncIterator[UnitViolations]:
        """The broken units one by one as the walk finds them (``check`` without collecting)."""
        shared = await shared_slice_ids(self._database, max_time_ms=self._max_time_ms)
        async for document in self._walk(core_id, ascending=True):
            report = self._violations(document, shared)
            if report is not None:
                yield report

    async def repair(self, core_id: str | None = None, *, progress: Progress | None = None) -> RepairReport:
        """Normalize every broken unit in place; returns what changed and what could not be repaired.

        ``progress`` is told the units checked (and repaired where broken) so far.
        """
        checked = 0
        repaired: list[UnitRepair] = []
        failed: list[UnitRepairFailure] = []
        total = await self._count(core_id, progress)
        shared = await shared_slice_ids(self._database, max_time_ms=self._max_time_ms)
        async for document in self._walk(core_id, ascending=False):
            checked += 1
            report = self._violations(document, shared)
            if report is not None:
                outcome = await self._repair_one(document, report, shared)
                if isinstance(outcome, UnitRepair):
                    repaired.append(outcome)
                else:
                    failed.append(outcome)
            if progress is not None:
                progress(checked, total)
        released = [o async for o in self._orphans() if o.releasable and await self._claims.release(*o.key)]
        foreign = foreign_sessions(self._database, core_id, max_time_ms=self._max_time_ms)
        fresh = [f async for f in foreign if await give_fresh_session(self._database, f)]
        return RepairReport(
            units_checked=checked,
            repaired=repaired,
            failed=failed,
            released_claims=released,
            fresh_sessions=fresh,
        )

    # -- internals -----------------------------------------------------------------------------------------

    async def _count(self, core_id: str | None, progress: Progress | None) -> int:
        """The units a walk will meet, told to ``progress`` as the start (counted only when it is given)."""
        if progress is None:
            return 0
        total: int = await self._units.count_documents(_scope(core_id), maxTimeMS=self._max_time_ms)
        progress(0, total)
        return total

    async def _walk(self, core_id: str | None, *, ascending: bool) -> AsyncIterator[dict[str, Any]]:
        """Every unit (of a core) by ``_id``: string ids in keyset batches, then any other ids.

        A range on ``_id`` only matches values of its own BSON type, so ids of another type (units written
        by other tools, unreadable as units) are read separately instead of being silently skipped.
        """
        base = _scope(core_id)
        beyond, direction = ("$gt", 1) if ascending else ("$lt", -1)
        last: str | None = None
        while True:
            ids: dict[str, Any] = {"$type": "string"}
            if last is not None:
                ids[beyond] = last
            cursor = (
                self._units.find({**base, "_id": ids})
                .sort("_id", direction)
                .limit(self._batch)
                .max_time_ms(self._max_time_ms)
            )
            seen = 0
            async for document in cursor:
                seen += 1
                last = document["_id"]
                yield document
            if seen < self._batch:
                break
        others = self._units.find({**base, "_id": {"$not": {"$type": "string"}}}).sort("_id", direction)
        async for document in others.batch_size(self._batch).max_time_ms(self._max_time_ms):
            yield document

    def _orphans(self) -> AsyncIterator[OrphanClaim]:
        return orphan_claims(self._database, utc_now(), batch=self._batch, max_time_ms=self._max_time_ms)

    def _violations(self, document: dict[str, Any], shared: SharedSliceIds) -> UnitViolations | None:
        inspection = inspect_document(document)
        violations = list(inspection.violations)
        if inspection.unit is not None:
            for slice_id, other in _shared_ids(inspection.unit, shared):
                detail = f"slice id {slice_id!r} is also used by unit {other!r}"
                violations.append(InvariantViolation(code=DUPLICATE_SLICE_ID, detail=detail))
        if not violations:
            return None
        return UnitViolations(
            unit_id=str(document["_id"]),
            core_id=_text_or_none(document.get("core_id")),
            violations=violations,
            repairable=inspection.repairable,
        )

    async def _repair_one(
        self, document: dict[str, Any], report: UnitViolations, shared: SharedSliceIds
    ) -> UnitRepair | UnitRepairFailure:
        """Repair one broken unit: complete it when another tool wrote it, else save it normalized; re-read
        and look again when another writer changed it meanwhile."""
        repairing = Repairing(report)
        if not report.repairable:
            return repairing.unrepairable()
        try:
            for _ in range(REPAIR_ATTEMPTS):
                outcome = await self._repair_attempt(document, repairing, shared)
                if outcome is not None:
                    return outcome
                document = await self._reload(report.unit_id)
                latest = self._violations(document, shared)
                if latest is None:  # fixed by the completion above, or by another writer
                    return repairing.done(
                        report.violations if repairing.adopted else [], document.get("version")
                    )
                repairing.current = latest
        except NotFound:
            return repairing.failure("the unit was deleted while it was being repaired")
        except DuplicateSliceId as exc:
            return repairing.failure(f"{exc}; repair or fix that unit first, then run repair again")
        except UnitTooLarge as exc:
            return repairing.failure(str(exc))
        return repairing.failure(
            f"the unit kept changing during {REPAIR_ATTEMPTS} repair attempts; run repair again"
        )

    async def _repair_attempt(
        self, document: dict[str, Any], repairing: Repairing, shared: SharedSliceIds
    ) -> UnitRepair | UnitRepairFailure | None:
        """One attempt: the outcome, or None to re-read the unit and look again."""
        unit_id = repairing.report.unit_id
        if any(p.code == UNVERSIONED for p in repairing.current.violations):
            if repairing.adopted:
                return repairing.failure(
                    "the unit has no version although its derived fields are set, so no save can be "
                    "guarded; set its version to 1 by hand and run repair again"
                )
            await self._repository.head(unit_id)  # completes a unit written by another tool, guarded
            repairing.adopted = True
            return None
        unit = unit_from_document(document)
        kept = release_shared_ids(unit, shared)
        renamed = shorten_slice_ids(unit) + [change for change, _, _ in kept]
        try:
            stored = await self._repository.save(unit)
        except DuplicateSliceId as exc:
            return repairing.failure(f"{exc}; repair or fix that unit first, then run repair again")
        except ConflictError:
            return None  # changed meanwhile: re-read and look again
        for _, slice_id, keeper in kept:  # the unit keeping the id gets its claim
            shared.let_go(slice_id, unit_id)
            await self._claims.transfer(slice_id, unit_id, keeper)
        renaming = (DUPLICATE_SLICE_ID, ID_TOO_LONG)
        fixed = [p for p in repairing.current.violations if p.code not in renaming]
        return repairing.done(fixed + renamed, stored.version)

    async def _reload(self, unit_id: str) -> dict[str, Any]:
        document = await self._units.find_one(live({"_id": unit_id}), max_time_ms=self._max_time_ms)
        if document is None:
            raise NotFound(f"no unit {unit_id!r}")
        return dict(document)


def _scope(core_id: str | None) -> dict[str, Any]:
    """The filter of every unit (erased units' tombstones left out), or of one core's units (which a
    tombstone, without a core id, is never among)."""
    return dict(NOT_ERASED) if core_id is None else {"core_id": require_id(core_id, "core_id")}


def _shared_ids(unit: MemoryUnit, shared: SharedSliceIds) -> list[tuple[str, str]]:
    """(slice id, other unit id) for each of the unit's slice ids that another unit also uses."""
    return shared.of(unit.id, sorted({s.id for s in unit.complete_slices() if s.id}))


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


__all__ = [
    "BATCH_CORES",
    "CheckReport",
    "ForeignSession",
    "OrphanClaim",
    "RepairReport",
    "Repairing",
    "SharedSliceIds",
    "UnitChecker",
    "UnitRepair",
    "UnitRepairFailure",
    "UnitViolations",
    "foreign_sessions",
    "give_fresh_session",
    "orphan_claims",
    "release_shared_ids",
    "shared_slice_ids",
    "shorten_slice_ids",
]

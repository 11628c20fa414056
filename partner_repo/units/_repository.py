"""MemoryUnitRepository: the only code that writes ``memory_units``.

It owns the unit invariants: every save is normalized, slice ids are unique across units (minted ids by
construction, a caller's own ids through their claims, :mod:`partner_repo.units._claims`), no write takes a
unit past 16 MiB, and concurrent writers never lose or overlap messages. Appends go through
:mod:`partner_repo.units._append` (optimistic, one guarded ``$push`` of only the increment); units written by
other tools are adopted once (:class:`UnitAdoption`).

Adoption: a unit written by another tool (mongosh, Compass, mongoimport, older versions) may lack some or all
of the derived fields (``message_count``, ``slice_count``, ``slice_ids``, ``size_bytes``; a unit of an older
version lacks ``slice_ids``) and even a ``version``. The first repository read that needs them stores the
unit normalized, with one replace guarded by exactly what was read (the version and each derived field as
read, or their absence, and the array lengths), so a concurrent writer's change is never overwritten: the
loser re-reads and finds the unit completed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from partner_repo.errors import (
    ChangeStreamUnavailable,
    ConflictError,
    DuplicateSliceId,
    InvalidInput,
    NotFound,
    UnitTooLarge,
    UnreadableUnit,
    found,
)
from partner_repo.models import MemorySlice, MemoryUnit, Message
from partner_repo.mongo import (
    ASCENDING,
    DERIVED_FIELDS,
    ERASED,
    MAX_DOCUMENT_BYTES,
    NOT_ERASED,
    UNIT_FINGERPRINT_INDEX,
    UNITS,
    DuplicateKeyError,
    MongoDatabase,
    OperationFailure,
    driver,
    has_derived_fields,
    is_tombstone,
    live,
    marked,
    slice_from_document,
    stored_messages,
    unit_document,
    unit_from_document,
)
from partner_repo.normalization import normalize_unit
from partner_repo.units._append import UnitAppender
from partner_repo.units._claims import SliceIdClaims
from partner_repo.units._feed import (
    FINGERPRINT_FIELDS,
    OUTLINE_PROJECTION,
    WATCH_PIPELINE,
    UnitFingerprint,
    UnitOutline,
    fingerprint_of,
    majority,
    outline_from,
    stored_id_problem,
)
from partner_repo.units._heads import (
    HEAD_CACHE_SIZE,
    HEAD_PROJECTION,
    HeadCache,
    UnitHead,
    UnitTail,
    head_from,
)
from partner_repo.units._increment import append_request
from partner_repo.units._marks import UnitFence, fence_of, raise_mark, seal
from partner_repo.units._rules import (
    duplicate_error,
    is_missing_index,
    refuse_too_large,
    revalidated,
)
from partner_repo.validation import first_error, require_count, require_id

ADOPTION_ATTEMPTS = 200
"""How often completing a unit written by another tool re-reads when the unit keeps changing meanwhile."""


class UnitAdoption:
    """Completes foreign units on one collection; ``max_bytes`` is the document size limit."""

    def __init__(self, units: Any, max_bytes: int, claims: SliceIdClaims) -> None:
        self._units = units
        self._max_bytes = max_bytes
        self._claims = claims

    async def complete(self, unit_id: str) -> dict[str, Any]:
        """The unit's head document once it carries every derived field (storing it normalized if needed).

        An erased unit's tombstone is no unit: :class:`NotFound`, never adopted."""
        for _ in range(ADOPTION_ATTEMPTS):
            raw = await self._units.find_one({"_id": unit_id})
            if raw is None or is_tombstone(raw):
                raise NotFound(f"no unit {unit_id!r}")
            if not has_derived_fields(raw):
                await self._store_normalized(raw)
            document = await self._units.find_one({"_id": unit_id}, marked(HEAD_PROJECTION))
            if document is None or is_tombstone(document):
                raise NotFound(f"no unit {unit_id!r}")
            if has_derived_fields(document):
                return dict(document)
        raise ConflictError(f"unit {unit_id!r} kept changing while its derived fields were completed")

    async def _store_normalized(self, raw: Mapping[str, Any]) -> None:
        version = raw.get("version")
        unit = normalize_unit(unit_from_document({**raw, "version": version or 0}))
        await self._claims.claim_unit(unit)
        stored = unit.model_copy(update={"version": (version or 0) + 1})
        document = unit_document(stored)
        refuse_too_large(stored.id, document["size_bytes"], self._max_bytes)
        guard: dict[str, Any] = {"_id": raw["_id"], **NOT_ERASED}
        for name in ("version", *DERIVED_FIELDS):
            guard[name] = raw.get(name, {"$exists": False})
        for name in ("conversation_messages", "slices"):
            value = raw.get(name)
            guard[name] = {"$size": len(value)} if isinstance(value, list) else {"$exists": False}
        await self._units.replace_one(guard, document)


@driver.timeouts_surface_as_project_errors
class MemoryUnitRepository:
    """Reads and writes memory units on the database it is given."""

    def __init__(
        self,
        database: MongoDatabase,
        *,
        max_document_bytes: int = MAX_DOCUMENT_BYTES,
        head_cache_size: int = HEAD_CACHE_SIZE,
        majority_reads: bool = False,
    ) -> None:
        self._database = database
        self._units = database[UNITS]
        self._reads = majority(self._units) if majority_reads else self._units
        """The change feed's reads: ``readConcern: majority`` with ``majority_reads`` (never rolled back)."""
        self._max_bytes = max_document_bytes
        self._heads = HeadCache(require_count(head_cache_size, "head_cache_size"))
        self._claims = SliceIdClaims(database)
        self._adoption = UnitAdoption(self._units, max_document_bytes, self._claims)
        self._appender = UnitAppender(
            self._units,
            self._heads,
            max_bytes=max_document_bytes,
            read_head=self.head,
            get_slice=self.get_slice,
            claims=self._claims,
        )

    # -- reads ---------------------------------------------------------------------------------------------

    async def get(self, unit_id: str) -> MemoryUnit | None:
        """The whole unit, or None (also for an erased unit's tombstone, as for every read here)."""
        document = await self._units.find_one({"_id": require_id(unit_id, "unit_id")})
        return None if document is None or is_tombstone(document) else unit_from_document(document)

    async def require(self, unit_id: str) -> MemoryUnit:
        """The whole unit; :class:`NotFound` where :meth:`get` answers None."""
        return found(await self.get(unit_id), f"unit {unit_id!r}")

    async def head(self, unit_id: str, *, cached: bool = False) -> UnitHead | None:
        """The unit's head (counts, version, positions mark, last slice) without its messages, or None;
        ``cached``: the head this repository last saw, when it has one (the append's guard makes it safe)."""
        unit_id = require_id(unit_id, "unit_id")
        if cached and (known := self.known_head(unit_id)) is not None:
            return known
        return (await self.fence(unit_id)).head

    async def fence(self, unit_id: str) -> UnitFence:
        """What stands under ``unit_id`` (one read): a unit's head, a clear's reservation, a tombstone."""
        unit_id = require_id(unit_id, "unit_id")
        document = await self._units.find_one({"_id": unit_id}, marked(HEAD_PROJECTION))
        if document is not None and not is_tombstone(document) and not has_derived_fields(document):
            document = await self._adoption.complete(unit_id)
        return fence_of(document, lambda: self._heads.learn(head_from(document)))

    def known_head(self, unit_id: str) -> UnitHead | None:
        """The head this repository last saw of the unit, without any read (None: none seen)."""
        return self._heads.get(unit_id)

    async def get_slice(self, unit_id: str, slice_id: str) -> MemorySlice | None:
        """One slice of one unit (an ``$elemMatch`` projection, not the whole unit), or None."""
        query = {"_id": require_id(unit_id, "unit_id")}
        projection = {"slices": {"$elemMatch": {"id": require_id(slice_id, "slice_id")}}}
        document = await self._units.find_one(query, projection)
        found = (document or {}).get("slices") or []
        return slice_from_document(found[0]) if found else None

    async def slice_messages(self, unit_id: str, slice_id: str) -> list[Message]:
        """The messages a slice summarises, fetched with a ``$slice`` projection of just that interval."""
        piece = await self.get_slice(unit_id, slice_id)
        if piece is None:
            raise NotFound(f"no slice {slice_id!r} in unit {unit_id!r}")
        return await self.messages_between(unit_id, piece.start_index or 0, piece.end_index or 0)

    async def messages_between(self, unit_id: str, start: int, end: int) -> list[Message]:
        """Messages ``[start, end)`` of a unit through a ``$slice`` projection (empty for an empty range)."""
        start = require_count(start, "start")
        end = require_count(end, "end")
        if end <= start:
            return []
        projection = marked({"message_count": 1, "conversation_messages": {"$slice": [start, end - start]}})
        document = await self._reads.find_one({"_id": require_id(unit_id, "unit_id")}, projection)
        if document is None or is_tombstone(document):
            raise NotFound(f"no unit {unit_id!r}")
        return stored_messages(document)

    async def tail_messages(self, unit_id: str, n: int) -> list[Message]:
        """The last ``n`` messages of a unit (empty when there is no such unit), without reading the rest."""
        tail = await self.tail(unit_id, n)
        return [] if tail is None else tail.messages

    async def tail(self, unit_id: str, n: int) -> UnitTail | None:
        """The last ``n`` messages of a unit and its head, in one read (the head is remembered)."""
        n = require_count(n, "n")
        unit_id = require_id(unit_id, "unit_id")
        projection = marked({**HEAD_PROJECTION, "conversation_messages": {"$slice": -max(n, 1)}})
        found = await self._units.find_one({"_id": unit_id}, projection)
        document = await self._adopted(unit_id, found, projection)
        if document is None:
            return None
        return UnitTail(
            head=self._heads.learn(head_from(document)), messages=stored_messages(document) if n else []
        )

    async def list_units(self, core_id: str) -> list[MemoryUnit]:
        """Every unit of a core, oldest update first."""
        cursor = self._units.find({"core_id": require_id(core_id, "core_id")}).sort("updated_at", ASCENDING)
        return [unit_from_document(document) async for document in cursor]

    async def unit_ids(self, core_id: str) -> set[str]:
        """The ids of a core's units: Partner's ``memory_unit_uuid_set``, found by query, not stored."""
        cursor = self._units.find({"core_id": require_id(core_id, "core_id")}, {"_id": 1})
        return {document["_id"] async for document in cursor}

    # -- change feed (what the rolling listener reads) ------------------------------------------------------

    async def fingerprints(self) -> AsyncIterator[tuple[object, UnitFingerprint]]:
        """Every unit's id and fingerprint in id order, read from the ``unit_fingerprint`` index alone.

        Ids are as stored: another tool's document may have one that is not a string (``outline`` then
        raises :class:`UnreadableUnit`), so a walk can skip it and go on."""
        projection = {"_id": 1, **dict.fromkeys(FINGERPRINT_FIELDS, 1)}
        try:
            cursor = self._reads.find({}, projection).hint(UNIT_FINGERPRINT_INDEX).sort("_id", ASCENDING)
            async for document in cursor:
                yield document["_id"], fingerprint_of(document)
        except OperationFailure as exc:
            if not is_missing_index(exc):
                raise
            async for document in self._reads.find({}, projection).sort("_id", ASCENDING):
                yield document["_id"], fingerprint_of(document)

    async def erased(self, unit_ids: Sequence[object]) -> set[object]:
        """Which of these ids hold an erasure tombstone (which :meth:`fingerprints` lists like any id)."""
        cursor = self._reads.find({"_id": {"$in": list(unit_ids)}, **ERASED}, {"_id": 1})
        return {document["_id"] async for document in cursor}

    async def fingerprint_totals(self) -> tuple[int, ...]:
        """``(units, sum of each fingerprint field)``: a constant-size probe of whether any unit changed."""
        group: dict[str, Any] = {"_id": None, "units": {"$sum": 1}}
        group.update({name: {"$sum": f"${name}"} for name in FINGERPRINT_FIELDS})
        pipeline = [{"$group": group}]
        try:
            rows = await driver.aggregate_list(self._reads, pipeline, 1, hint=UNIT_FINGERPRINT_INDEX)
        except OperationFailure as exc:
            if not is_missing_index(exc):
                raise
            rows = await driver.aggregate_list(self._reads, pipeline, 1)
        row = rows[0] if rows else {}
        return (int(row.get("units", 0)), *(int(row.get(name, 0)) for name in FINGERPRINT_FIELDS))

    async def outline(self, unit_id: object) -> UnitOutline | None:
        """The unit's slices (no messages) and fingerprint in one read, or None when there is no such unit.

        A unit written by another tool is completed (normalized, derived fields) first, as ``head`` does, so
        every slice has an id. A stored document that cannot be read as a unit (an ``_id`` that is not a
        string, an invalid slice or core id, a completion that fails) raises :class:`UnreadableUnit`; an id
        no document has and no unit could have raises :class:`InvalidInput`."""
        problem = stored_id_problem(unit_id)
        if problem is not None:
            if await self._reads.find_one({"_id": {"$eq": unit_id}}, {"_id": 1}) is None:
                require_id(unit_id, "unit_id")
                return None
            raise UnreadableUnit(unit_id, problem)
        assert isinstance(unit_id, str)
        document = await self._reads.find_one({"_id": unit_id}, marked(OUTLINE_PROJECTION))
        try:
            document = await self._adopted(unit_id, document, marked(OUTLINE_PROJECTION))
        except NotFound:
            return None  # deleted meanwhile
        except (InvalidInput, ValidationError, UnitTooLarge, DuplicateSliceId) as exc:
            reason = first_error(exc) if isinstance(exc, ValidationError) else str(exc)
            raise UnreadableUnit(unit_id, f"it cannot be completed: {reason}") from exc
        return None if document is None else outline_from(unit_id, document)

    async def _adopted(
        self, unit_id: str, document: dict[str, Any] | None, projection: dict[str, Any]
    ) -> dict[str, Any] | None:
        """``document`` as read, or, for a unit written by another tool, read again (from the primary: the
        write is ours) once :mod:`partner_repo.units._repository` completed it; None for a tombstone."""
        if document is None or is_tombstone(document) or has_derived_fields(document):
            return None if is_tombstone(document) else document
        await self._adoption.complete(unit_id)
        found: dict[str, Any] | None = await self._units.find_one({"_id": unit_id}, projection)
        return None if is_tombstone(found) else found

    async def watch(
        self,
        *,
        resume_after: Mapping[str, Any] | None = None,
        start_after: Mapping[str, Any] | None = None,
        start_at_operation_time: Any = None,
        max_await_time_ms: int | None = None,
    ) -> Any:
        """A change stream on ``memory_units`` (either driver's: enter it with ``async with``); events never
        carry messages (:data:`WATCH_PIPELINE`). :class:`ChangeStreamUnavailable` on a backend without change
        streams (the in-memory one); a standalone server refuses when the stream opens (code 40573)."""
        if getattr(type(self._units), "watch", None) is None:
            raise ChangeStreamUnavailable("this backend has no change streams (the in-memory backend)")
        return await driver.watch(
            self._units,
            WATCH_PIPELINE,
            resume_after=resume_after,
            start_after=start_after,
            start_at_operation_time=start_at_operation_time,
            max_await_time_ms=max_await_time_ms,
        )

    # -- writes --------------------------------------------------------------------------------------------

    async def mark_taken(self, unit_id: str, *, core_id: str, until: int) -> None:
        """Mark every position below ``until`` taken by the unit, so no roll stores those messages (a window
        clear); for a unit that does not exist yet the mark is reserved under its id (:mod:`.marks`)."""
        unit_id, until = require_id(unit_id, "unit_id"), require_count(until, "until")
        await raise_mark(self._units, self.head, unit_id, core_id=require_id(core_id, "core_id"), until=until)
        self._heads.forget(unit_id)  # read afresh above; a head learned before the write is stale now

    async def seal(self, unit_id: str, *, version: int) -> bool:
        """Seal a full unit a roll continues in a new one, while it is at ``version`` (:mod:`.marks`)."""
        unit_id = require_id(unit_id, "unit_id")
        self._heads.forget(unit_id)
        return await seal(self._units, unit_id, require_count(version, "version"))

    async def delete(self, unit_id: str) -> bool:
        """Delete a unit (and release its slice-id claims); True when it existed."""
        unit_id = require_id(unit_id, "unit_id")
        self._heads.forget(unit_id)
        try:
            result = await self._units.delete_one(live({"_id": unit_id}))  # a tombstone stays
        finally:
            self._heads.forget(unit_id)  # a concurrent append here may have learned it meanwhile
        await self._claims.release_units([unit_id])
        return bool(result.deleted_count)

    async def save(self, unit: MemoryUnit, *, now: datetime | None = None) -> MemoryUnit:
        """Normalize and write a whole unit with optimistic concurrency; returns what was stored.

        A unit with ``version == 0`` is inserted (an existing id is a conflict); otherwise the stored unit is
        replaced only if its version is still ``unit.version``, so a stale copy never overwrites newer data.
        """
        if not isinstance(unit, MemoryUnit):
            raise InvalidInput(f"save expects a MemoryUnit, got {type(unit).__name__}")
        normalized = normalize_unit(revalidated(unit), now=now)
        await self._claims.claim_unit(normalized)
        stored: MemoryUnit = normalized.model_copy(update={"version": unit.version + 1})
        document = unit_document(stored)
        refuse_too_large(stored.id, document["size_bytes"], self._max_bytes)
        self._heads.forget(unit.id)
        try:
            if unit.version == 0:
                await self._units.insert_one(document)
            else:
                result = await self._units.replace_one({"_id": unit.id, "version": unit.version}, document)
                if result.matched_count == 0:
                    raise ConflictError(
                        f"unit {unit.id!r} changed since version {unit.version} was read (or was deleted); "
                        "reload it and save again"
                    )
        except DuplicateKeyError as exc:
            raise duplicate_error(exc, unit.id, "exists already; load it and save the loaded copy") from None
        finally:
            self._heads.forget(unit.id)
        return stored

    async def append(
        self,
        unit_id: str,
        messages: Sequence[Message | Mapping[str, Any]],
        summary: str,
        *,
        core_id: str,
        slice_id: str | None = None,
        created_at: datetime | None = None,
        rolling_size: int | None = None,
        retain_divisor: int | None = None,
        previous_unit_id: str | None = None,
        fresh_slice_id: bool = False,
        expected_start: int | None = None,
        first_position: int | None = None,
        trimmed_to: int | None = None,
        unsummarized: bool = False,
    ) -> MemorySlice:
        """Append ``messages`` and one slice covering exactly them; Partner's ``updateMemoryUnit``.

        Creates the unit if absent. Safe under any number of concurrent writers. Idempotent by ``slice_id``:
        repeating a call with the same id (a retry after a lost reply) returns the stored slice and appends
        nothing. ``rolling_size``/``retain_divisor`` record the roll that produced the slice;
        ``previous_unit_id`` is set only when this call creates the unit. ``updated_at`` becomes the slice's
        ``created_at`` (default now) unless it is already later: a writer whose clock is behind never moves
        it back. Slices stay sorted by ``created_at``: an older one is inserted where its time sorts, except
        a positioned increment's (``first_position``), which goes at the end with the last slice's time
        when its own is older (its positions come after every slice's).

        A caller-chosen ``slice_id`` is claimed for the unit first (:mod:`partner_repo.units._claims`: one
        insert by the id, on its shard; :class:`DuplicateSliceId` when another unit claimed it);
        ``fresh_slice_id=True`` says it was just minted with :func:`new_slice_id` for this append alone (a
        roll's retry key), so nothing is claimed.

        ``expected_start`` fences the append on the unit holding exactly that many messages (0: a new unit);
        ``first_position`` on the unit having taken no position at or after the first message's (the mark
        then moves to the increment's end). A fence that fails raises :class:`StaleIncrement` and writes
        nothing (a repeat of an append that did land, same ``slice_id``, returns the stored slice): a roller
        delayed past its lease never stores what another stored meanwhile (:mod:`.increment`); ``trimmed_to``
        is kept with the mark. ``unsummarized`` marks the summary as a placeholder."""
        request = append_request(
            unit_id,
            messages,
            summary,
            core_id=core_id,
            slice_id=slice_id,
            created_at=created_at,
            rolling_size=rolling_size,
            retain_divisor=retain_divisor,
            previous_unit_id=previous_unit_id,
            fresh_slice_id=fresh_slice_id,
            expected_start=expected_start,
            first_position=first_position,
            trimmed_to=trimmed_to,
            unsummarized=unsummarized,
        )
        return await self._appender.append(request)


__all__ = [
    "ADOPTION_ATTEMPTS",
    "MemoryUnitRepository",
    "UnitAdoption",
]

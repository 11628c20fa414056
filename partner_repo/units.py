"""MemoryUnitRepository: the only code that writes ``memory_units``.

It owns the unit invariants: every save is normalized, slice ids are unique across units (checked in code,
because mongomock ignores unique multikey indexes, and backed by the index on a real server), no write takes a
unit past 16 MiB, and concurrent writers never lose or overlap messages.

``append`` is optimistic: it reads the unit's small head (message count, version, last slice), then sends one
``$push`` of only the new messages and slice, guarded by the version it read. A writer that lost the race
re-reads and tries again, so intervals stay disjoint and contiguous without a lock or a transaction, and an
uncontended append costs two round trips whatever the unit's size.

Each repository also remembers the heads it last saw (a bounded LRU): a unit it appended to before gets the
guarded ``$push`` straight away, one round trip. The guard (version and counts) makes a stale entry harmless:
the push matches nothing, the entry is dropped and the append takes the usual path. Two rules keep contention
fair: appends to one unit through one repository take turns (tasks of one process never race each other),
and a repository that lost a race on a unit reads before each push there for a while (a remembered head
would otherwise let the last winner win every round and starve writers in other processes).
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import random
import time
import warnings
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from pymongo import ASCENDING
from pymongo.errors import DuplicateKeyError, OperationFailure

from partner_repo.clock import utc_now
from partner_repo.database import MongoDatabase
from partner_repo.errors import (
    ChangeStreamUnavailable,
    ConflictError,
    DuplicateSliceId,
    InvalidInput,
    NotFound,
    UnitTooLarge,
)
from partner_repo.indexes import UNIT_FINGERPRINT_INDEX, UNITS
from partner_repo.models import MemorySlice, MemoryUnit, Message
from partner_repo.normalization import new_slice_id, normalize_unit
from partner_repo.storage import (
    MAX_DOCUMENT_BYTES,
    array_elements_size,
    has_derived_fields,
    slice_document,
    slice_from_document,
    stored_datetime,
    unit_document,
    unit_from_document,
)
from partner_repo.validation import optional_datetime, parse_messages, require_count, require_id

APPEND_PATIENCE_S = 10.0
"""How long a contended append keeps re-reading and retrying before giving up with :class:`ConflictError`.

A time, not a count: the same count of attempts is milliseconds on a fast backend and seconds on a slow
network."""

CONTENDED_S = 1.0
"""After losing a race on a unit, a repository reads its head before every push there for this long."""

APPEND_ATTEMPTS = 200
"""How often completing a unit written by another tool re-reads when the unit keeps changing meanwhile."""

HEAD_CACHE_SIZE = 1024
"""How many unit heads a repository remembers to skip the head read of its next append to that unit."""

_HEAD_PROJECTION: dict[str, Any] = {
    "core_id": 1,
    "message_count": 1,
    "slice_count": 1,
    "size_bytes": 1,
    "version": 1,
    "updated_at": 1,
    "previous_unit_id": 1,
    "slices": {"$slice": -1},
}


@dataclass(frozen=True)
class UnitHead:
    """What a unit is without its messages: cheap to read at any unit size."""

    id: str
    core_id: str
    message_count: int
    size_bytes: int
    version: int
    updated_at: datetime | None
    previous_unit_id: str | None
    last_slice: MemorySlice | None
    slice_count: int = 0


UnitFingerprint = tuple[Any, ...]
"""A unit's ``(version, message_count, slice_count, size_bytes)``: every write path changes it (the version
at least), so an unchanged fingerprint means an unchanged unit. No clock is involved."""

_FINGERPRINT_FIELDS = ("version", "message_count", "slice_count", "size_bytes")


@dataclass(frozen=True)
class UnitOutline:
    """A unit's slices without its messages, and the fingerprint the unit had when they were read."""

    id: str
    core_id: str
    fingerprint: UnitFingerprint
    slices: tuple[MemorySlice, ...]


class MemoryUnitRepository:
    """Reads and writes memory units on the database it is given."""

    def __init__(
        self,
        database: MongoDatabase,
        *,
        max_document_bytes: int = MAX_DOCUMENT_BYTES,
        head_cache_size: int = HEAD_CACHE_SIZE,
    ) -> None:
        self._database = database
        self._units = database[UNITS]
        self._max_bytes = max_document_bytes
        self._heads = _HeadCache(require_count(head_cache_size, "head_cache_size"))
        self._appending = _UnitQueue()

    # -- reads ---------------------------------------------------------------------------------------------

    async def get(self, unit_id: str) -> MemoryUnit | None:
        """The whole unit, or None."""
        document = await self._units.find_one({"_id": require_id(unit_id, "unit_id")})
        return None if document is None else unit_from_document(document)

    async def head(self, unit_id: str) -> UnitHead | None:
        """The unit's head (counts, version, last slice) without its messages, or None."""
        document = await self._units.find_one({"_id": require_id(unit_id, "unit_id")}, _HEAD_PROJECTION)
        if document is None:
            return None
        if not has_derived_fields(document):
            document = await self._complete_derived_fields(unit_id)
        return self._heads.learn(_head_from(document))

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
        projection = {"message_count": 1, "conversation_messages": {"$slice": [start, end - start]}}
        document = await self._units.find_one({"_id": require_id(unit_id, "unit_id")}, projection)
        if document is None:
            raise NotFound(f"no unit {unit_id!r}")
        return _messages(document)

    async def tail_messages(self, unit_id: str, n: int) -> list[Message]:
        """The last ``n`` messages of a unit (empty when there is no such unit), without reading the rest."""
        n = require_count(n, "n")
        unit_id = require_id(unit_id, "unit_id")
        if n == 0:
            return []
        projection = {"message_count": 1, "conversation_messages": {"$slice": -n}}
        document = await self._units.find_one({"_id": unit_id}, projection)
        return [] if document is None else _messages(document)

    async def list_units(self, core_id: str) -> list[MemoryUnit]:
        """Every unit of a core, oldest update first."""
        cursor = self._units.find({"core_id": require_id(core_id, "core_id")}).sort("updated_at", ASCENDING)
        return [unit_from_document(document) async for document in cursor]

    async def unit_ids(self, core_id: str) -> set[str]:
        """The ids of a core's units: Partner's ``memory_unit_uuid_set``, found by query, not stored."""
        cursor = self._units.find({"core_id": require_id(core_id, "core_id")}, {"_id": 1})
        return {document["_id"] async for document in cursor}

    # -- change feed (what the rolling listener reads) ------------------------------------------------------

    async def fingerprints(self) -> AsyncIterator[tuple[str, UnitFingerprint]]:
        """Every unit's id and fingerprint in id order, read from the ``unit_fingerprint`` index alone."""
        projection = {"_id": 1, **dict.fromkeys(_FINGERPRINT_FIELDS, 1)}
        try:
            cursor = self._units.find({}, projection).hint(UNIT_FINGERPRINT_INDEX).sort("_id", ASCENDING)
            async for document in cursor:
                yield document["_id"], _fingerprint(document)
        except OperationFailure as exc:
            if not _is_missing_index(exc):
                raise
            async for document in self._units.find({}, projection).sort("_id", ASCENDING):
                yield document["_id"], _fingerprint(document)

    async def fingerprint_totals(self) -> tuple[int, ...]:
        """``(units, sum of each fingerprint field)``: a constant-size probe of whether any unit changed."""
        group: dict[str, Any] = {"_id": None, "units": {"$sum": 1}}
        group.update({name: {"$sum": f"${name}"} for name in _FINGERPRINT_FIELDS})
        pipeline = [{"$group": group}]
        try:
            rows = await self._units.aggregate(pipeline, hint=UNIT_FINGERPRINT_INDEX).to_list(length=1)
        except OperationFailure as exc:
            if not _is_missing_index(exc):
                raise
            rows = await self._units.aggregate(pipeline).to_list(length=1)
        row = rows[0] if rows else {}
        return (int(row.get("units", 0)), *(int(row.get(name, 0)) for name in _FINGERPRINT_FIELDS))

    async def outline(self, unit_id: str) -> UnitOutline | None:
        """The unit's slices (no messages) and fingerprint in one read, or None when there is no such unit.

        A unit written by another tool is completed (normalized, derived fields) first, as ``head`` does, so
        every slice has an id.
        """
        unit_id = require_id(unit_id, "unit_id")
        projection = {"core_id": 1, "slices": 1, **dict.fromkeys(_FINGERPRINT_FIELDS, 1)}
        document = await self._units.find_one({"_id": unit_id}, projection)
        if document is not None and not has_derived_fields(document):
            await self._complete_derived_fields(unit_id)
            document = await self._units.find_one({"_id": unit_id}, projection)
        if document is None:
            return None
        pieces = tuple(slice_from_document(s) for s in document.get("slices") or [] if s is not None)
        return UnitOutline(
            id=unit_id,
            core_id=document["core_id"],
            fingerprint=_fingerprint(document),
            slices=tuple(p for p in pieces if p.id is not None),
        )

    def watch(
        self,
        *,
        resume_after: Mapping[str, Any] | None = None,
        start_after: Mapping[str, Any] | None = None,
        start_at_operation_time: Any = None,
        max_await_time_ms: int | None = None,
    ) -> Any:
        """A change stream on ``memory_units`` (a Motor change stream: open it with ``async with``).

        Inserted and replaced units arrive without their messages (projected out on the server); update events
        carry only what the update changed. Raises :class:`ChangeStreamUnavailable` on a backend without
        change streams (the in-memory one); a standalone server refuses when the stream opens (code 40573).
        """
        if getattr(type(self._units), "watch", None) is None:
            raise ChangeStreamUnavailable("this backend has no change streams (the in-memory backend)")
        return self._units.watch(
            [{"$project": {"fullDocument.conversation_messages": 0}}],
            resume_after=resume_after,
            start_after=start_after,
            start_at_operation_time=start_at_operation_time,
            max_await_time_ms=max_await_time_ms,
        )

    # -- writes --------------------------------------------------------------------------------------------

    async def delete(self, unit_id: str) -> bool:
        """Delete a unit; True when it existed."""
        unit_id = require_id(unit_id, "unit_id")
        self._heads.forget(unit_id)
        try:
            result = await self._units.delete_one({"_id": unit_id})
        finally:
            self._heads.forget(unit_id)  # a concurrent append here may have learned it meanwhile
        return bool(result.deleted_count)

    async def save(self, unit: MemoryUnit, *, now: datetime | None = None) -> MemoryUnit:
        """Normalize and write a whole unit with optimistic concurrency; returns what was stored.

        A unit with ``version == 0`` is inserted (an existing id is a conflict); otherwise the stored unit is
        replaced only if its version is still ``unit.version``, so a stale copy never overwrites newer data.
        """
        if not isinstance(unit, MemoryUnit):
            raise InvalidInput(f"save expects a MemoryUnit, got {type(unit).__name__}")
        normalized = normalize_unit(_revalidated(unit), now=now)
        await self._refuse_foreign_slice_ids(normalized)
        stored: MemoryUnit = normalized.model_copy(update={"version": unit.version + 1})
        document = unit_document(stored)
        self._refuse_too_large(stored.id, document["size_bytes"])
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
            raise self._duplicate_error(
                exc, unit.id, "exists already; load it and save the loaded copy"
            ) from None
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
    ) -> MemorySlice:
        """Append ``messages`` and one slice covering exactly them; Partner's ``updateMemoryUnit``.

        Creates the unit if absent. Safe under any number of concurrent writers. Idempotent by ``slice_id``:
        repeating a call with the same id (a retry after a lost reply) returns the stored slice and appends
        nothing. ``rolling_size``/``retain_divisor`` record the roll that produced the slice;
        ``previous_unit_id`` is set only when this call creates the unit. ``updated_at`` becomes the slice's
        ``created_at`` (default now) unless it is already later: a writer whose clock is behind never moves
        it back.

        A caller-chosen ``slice_id`` is checked against every other unit (a query by slice id, which fans out
        on a sharded cluster). ``fresh_slice_id=True`` says the id was just minted with :func:`new_slice_id`
        for this append alone (the rolling service does this for its retry key): no other unit can hold it,
        so the check is skipped and every round trip stays on the unit's shard.
        """
        unit_id = require_id(unit_id, "unit_id")
        core_id = require_id(core_id, "core_id")
        increment = parse_messages(messages, allow_empty=False)
        if not isinstance(summary, str):
            raise InvalidInput(f"summary must be a string, got {type(summary).__name__}")
        given_id = None if slice_id is None else require_id(slice_id, "slice_id")
        stamp = optional_datetime(created_at, "created_at") or utc_now()
        for name, value in (("rolling_size", rolling_size), ("retain_divisor", retain_divisor)):
            if value is not None:
                require_count(value, name)
        piece = MemorySlice(
            id=given_id or new_slice_id(),
            summary=summary,
            created_at=stamp,
            rolling_size=rolling_size,
            retain_divisor=retain_divisor,
        )

        async with self._appending.hold(unit_id):
            return await self._append_increment(
                unit_id,
                core_id,
                increment,
                piece,
                stamp,
                created_at,
                given_id,
                fresh_slice_id,
                previous_unit_id,
            )

    # -- internals -----------------------------------------------------------------------------------------

    async def _append_increment(
        self,
        unit_id: str,
        core_id: str,
        increment: list[Message],
        piece: MemorySlice,
        stamp: datetime,
        created_at: datetime | None,
        given_id: str | None,
        fresh_slice_id: bool,
        previous_unit_id: str | None,
    ) -> MemorySlice:
        """The optimistic loop of :meth:`append` (its input validated): push, and on a lost race try again."""
        message_documents = [m.model_dump() for m in increment]
        cacheable = (given_id is None or fresh_slice_id) and not self._heads.contended(unit_id)
        known = self._heads.get(unit_id) if cacheable else None
        if known is not None and known.core_id == core_id:
            stored = await self._push_to_known_head(known, message_documents, piece, minted=given_id is None)
            if stored is not None:
                return stored

        deadline = time.monotonic() + APPEND_PATIENCE_S
        for attempt in itertools.count():
            if attempt and created_at is None:
                # A slice without a caller-given time is created when it is stored. Re-stamping a retry also
                # keeps the loser of a race on the short path: with its first, now stale, stamp it would have
                # to be inserted before the winners' slices (one more read) and would keep losing to writers
                # with fresh stamps under sustained contention.
                piece = piece.model_copy(update={"created_at": max(stamp, utc_now())})
            head = await self._append_head(unit_id, None if fresh_slice_id else given_id)
            if head is not None:
                self._heads.learn(head)
            if head is None:
                stored = await self._create_with(unit_id, core_id, increment, piece, previous_unit_id)
            else:
                if head.core_id != core_id:
                    raise InvalidInput(f"unit {unit_id!r} belongs to core {head.core_id!r}, not {core_id!r}")
                stored = await self._push(head, message_documents, piece)
            if stored is not None:
                return stored
            self._heads.lost(unit_id)
            if given_id is not None:
                existing = await self.get_slice(unit_id, given_id)
                if existing is not None:
                    return existing
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(random.uniform(0, 0.0005 * min(attempt, 20)))
        raise ConflictError(
            f"append to unit {unit_id!r} lost the race for {APPEND_PATIENCE_S:g} s ({attempt + 1} attempts); "
            "try again"
        )

    async def _push_to_known_head(
        self, known: UnitHead, message_documents: list[dict[str, Any]], piece: MemorySlice, *, minted: bool
    ) -> MemorySlice | None:
        """The one-round-trip append: push guarded by a remembered head; None (entry dropped) when stale.

        The guard also holds the counts and size, not only the version, so a unit deleted and re-created by
        someone else up to the same version is not pushed to at a wrong position. A remembered size that
        refuses the push is not trusted either: the usual path re-reads it and decides. A slice id minted by
        this very call cannot be in the unit, so its absence is checked only for an id the caller passed (a
        retried roll reuses its id).
        """
        try:
            stored = await self._push(known, message_documents, piece, exact=True, check_slice_id=not minted)
        except UnitTooLarge:
            stored = None
        if stored is None:
            self._heads.forget(known.id, up_to=known.version)
            self._heads.lost(known.id)
        return stored

    async def _append_head(self, unit_id: str, slice_id: str | None) -> UnitHead | None:
        """Round trip 1 of an append: the unit's head, and (for a caller-chosen slice id) whether another
        unit already holds that id, in one query."""
        if slice_id is None:
            return await self.head(unit_id)
        query = {"$or": [{"_id": unit_id}, {"slices.id": slice_id}]}
        documents = await self._units.find(query, _HEAD_PROJECTION).to_list(length=2)
        mine = None
        for document in documents:
            if document["_id"] == unit_id:
                mine = document
            else:
                raise DuplicateSliceId(slice_id, document["_id"])
        if mine is None:
            return None
        if not has_derived_fields(mine):
            mine = await self._complete_derived_fields(unit_id)
        return _head_from(mine)

    async def _create_with(
        self,
        unit_id: str,
        core_id: str,
        increment: list[Message],
        piece: MemorySlice,
        previous_unit_id: str | None,
    ) -> MemorySlice | None:
        """Insert a new unit holding the increment; None when another writer created it first."""
        placed = piece.model_copy(update={"start_index": 0, "end_index": len(increment)})
        unit = MemoryUnit(
            id=unit_id,
            core_id=core_id,
            conversation_messages=increment,
            slices=[placed],
            updated_at=placed.created_at,
            previous_unit_id=previous_unit_id,
            version=1,
        )
        document = unit_document(unit)
        self._refuse_too_large(unit_id, document["size_bytes"])
        try:
            await self._units.insert_one(document)
        except DuplicateKeyError as exc:
            if _is_slice_id_collision(exc):
                raise self._duplicate_error(exc, unit_id, "") from None
            return None
        self._heads.learn(_head_from(document))
        return placed

    async def _push(
        self,
        head: UnitHead,
        message_documents: list[dict[str, Any]],
        piece: MemorySlice,
        *,
        exact: bool = False,
        check_slice_id: bool = True,
    ) -> MemorySlice | None:
        """Round trip 2: push only the increment, guarded by the version read; None when it lost the race.

        ``exact`` also guards the counts and size (for a remembered head rather than one just read).
        """
        start = head.message_count
        placed = piece.model_copy(update={"start_index": start, "end_index": start + len(message_documents)})
        new_slice = slice_document(placed)
        position = await self._slice_position(head, placed)
        added = array_elements_size(message_documents, start)
        added += array_elements_size([new_slice], head.slice_count)
        self._refuse_too_large(head.id, head.size_bytes + added)
        push_slice: dict[str, Any] = {"$each": [new_slice]}
        if position is not None:
            push_slice["$position"] = position
        guard: dict[str, Any] = {"_id": head.id, "version": head.version}
        if exact:
            guard.update(
                message_count=head.message_count, slice_count=head.slice_count, size_bytes=head.size_bytes
            )
        if check_slice_id:
            guard["slices.id"] = {"$ne": placed.id}
        try:
            result = await self._units.update_one(
                guard,
                {
                    "$push": {"conversation_messages": {"$each": message_documents}, "slices": push_slice},
                    "$inc": {
                        "message_count": len(message_documents),
                        "slice_count": 1,
                        "size_bytes": added,
                        "version": 1,
                    },
                    "$max": {"updated_at": placed.created_at},  # a writer whose clock is behind: kept
                },
            )
        except DuplicateKeyError as exc:
            raise self._duplicate_error(exc, head.id, "") from None
        if not result.matched_count:
            return None
        assert placed.created_at is not None
        updated_at = placed.created_at
        if head.updated_at is not None and head.updated_at > updated_at:
            updated_at = head.updated_at
        self._heads.learn(
            UnitHead(
                id=head.id,
                core_id=head.core_id,
                message_count=head.message_count + len(message_documents),
                size_bytes=head.size_bytes + added,
                version=head.version + 1,
                updated_at=updated_at,
                previous_unit_id=head.previous_unit_id,
                last_slice=placed if position is None else head.last_slice,
                slice_count=head.slice_count + 1,
            )
        )
        return placed

    async def _slice_position(self, head: UnitHead, piece: MemorySlice) -> int | None:
        """Where the new slice goes to keep slices sorted by creation time.

        None (the end) in the usual case; an explicit position only when its time is older than the last
        slice's (a writer whose clock is behind).
        """
        last = head.last_slice
        assert piece.created_at is not None
        if last is None or last.created_at is None or last.created_at <= piece.created_at:
            return None
        document = await self._units.find_one({"_id": head.id}, {"slices.created_at": 1})
        times = [stored_datetime(s.get("created_at")) for s in (document or {}).get("slices", [])]
        return bisect.bisect_right(times, piece.created_at)

    async def _complete_derived_fields(self, unit_id: str) -> dict[str, Any]:
        """Store a unit written by another tool (no derived fields, maybe no version) normalized, once.

        The replace is guarded by what was read (version, or its absence, and the array lengths), so a
        concurrent writer's change is never overwritten: the loser re-reads and finds the unit completed.
        """
        for _ in range(APPEND_ATTEMPTS):
            raw = await self._units.find_one({"_id": unit_id})
            if raw is None:
                raise NotFound(f"no unit {unit_id!r}")
            if not has_derived_fields(raw):
                await self._complete(raw)
            document = await self._units.find_one({"_id": unit_id}, _HEAD_PROJECTION)
            if document is None:
                raise NotFound(f"no unit {unit_id!r}")
            if has_derived_fields(document):
                return dict(document)
        raise ConflictError(f"unit {unit_id!r} kept changing while its derived fields were completed")

    async def _complete(self, raw: Mapping[str, Any]) -> None:
        version = raw.get("version")
        unit = normalize_unit(unit_from_document({**raw, "version": version or 0}))
        await self._refuse_foreign_slice_ids(unit)
        stored = unit.model_copy(update={"version": (version or 0) + 1})
        document = unit_document(stored)
        self._refuse_too_large(stored.id, document["size_bytes"])
        guard: dict[str, Any] = {"_id": raw["_id"], "message_count": {"$exists": False}}
        guard["version"] = version if version is not None else {"$exists": False}
        for name in ("conversation_messages", "slices"):
            value = raw.get(name)
            guard[name] = {"$size": len(value)} if isinstance(value, list) else {"$exists": False}
        await self._units.replace_one(guard, document)

    async def _refuse_foreign_slice_ids(self, unit: MemoryUnit) -> None:
        ids = [s.id for s in unit.complete_slices()]
        if not ids:
            return
        other = await self._units.find_one(
            {"_id": {"$ne": unit.id}, "slices.id": {"$in": ids}},
            {"slices": {"$elemMatch": {"id": {"$in": ids}}}},
        )
        if other is not None:
            clash = (other.get("slices") or [{}])[0].get("id") or ids[0]
            raise DuplicateSliceId(str(clash), str(other["_id"]))

    def _refuse_too_large(self, unit_id: str, size_bytes: int) -> None:
        if size_bytes > self._max_bytes:
            raise UnitTooLarge(unit_id, size_bytes, self._max_bytes)

    @staticmethod
    def _duplicate_error(exc: DuplicateKeyError, unit_id: str, exists_hint: str) -> Exception:
        if _is_slice_id_collision(exc):
            value = ((exc.details or {}).get("keyValue") or {}).get("slices.id")
            return DuplicateSliceId(str(value) if value is not None else "?", None)
        return ConflictError(f"unit {unit_id!r} {exists_hint}".strip())


class _UnitQueue:
    """Appends to one unit through one repository go one at a time; other units are not held up.

    Tasks of one process sharing a repository would otherwise race each other over the network: all but one
    push lose and go again, and under sustained contention one unlucky task can lose every time. Queued, each
    append finds the head the previous one left (one round trip) and only other processes can make it retry.
    An entry lives only while some append to its unit is running or waiting.
    """

    def __init__(self) -> None:
        self._turns: dict[str, _Turn] = {}

    def hold(self, unit_id: str) -> _Turn:
        """``async with queue.hold(unit_id):`` waits for the unit's earlier appends, then holds it."""
        turn = self._turns.get(unit_id)
        if turn is None:
            turn = self._turns[unit_id] = _Turn(self._turns, unit_id)
        return turn


class _Turn:
    """One unit's queue: a lock, and how many appends hold or wait for it (the entry goes with the last)."""

    __slots__ = ("_lock", "_turns", "_unit_id", "_users")

    def __init__(self, turns: dict[str, _Turn], unit_id: str) -> None:
        self._turns = turns
        self._unit_id = unit_id
        self._lock = asyncio.Lock()
        self._users = 0

    async def __aenter__(self) -> None:
        self._users += 1
        try:
            await self._lock.acquire()
        except BaseException:  # cancelled while waiting: never held
            self._leave()
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        self._lock.release()
        self._leave()

    def _leave(self) -> None:
        self._users -= 1
        if not self._users:
            del self._turns[self._unit_id]


class _HeadCache:
    """The unit heads one repository last saw, least recently used dropped first.

    Concurrent tasks share a repository, so an entry is only ever replaced by a newer version, and a stale
    entry is dropped only if nothing newer was learned meanwhile.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._heads: OrderedDict[str, UnitHead] = OrderedDict()
        self._lost: OrderedDict[str, float] = OrderedDict()

    def get(self, unit_id: str) -> UnitHead | None:
        head = self._heads.get(unit_id)
        if head is not None:
            self._heads.move_to_end(unit_id)
        return head

    def learn(self, head: UnitHead) -> UnitHead:
        if self._size == 0:
            return head
        known = self._heads.get(head.id)
        if known is None or head.version > known.version:
            self._heads[head.id] = head
        self._heads.move_to_end(head.id)
        while len(self._heads) > self._size:
            self._heads.popitem(last=False)
        return head

    def forget(self, unit_id: str, *, up_to: int | None = None) -> None:
        known = self._heads.get(unit_id)
        if known is not None and (up_to is None or known.version <= up_to):
            del self._heads[unit_id]

    def lost(self, unit_id: str) -> None:
        """Another writer changed the unit first: for :data:`CONTENDED_S` its heads are not pushed to unread.

        Under contention a remembered head is a head start: the last winner pushes in one round trip while
        the others read first, so it wins again and again and starves them. Once a repository has lost on a
        unit, it reads before each push there, on equal terms with the other writers.
        """
        self._lost[unit_id] = time.monotonic()
        self._lost.move_to_end(unit_id)
        while len(self._lost) > max(self._size, 1):
            self._lost.popitem(last=False)

    def contended(self, unit_id: str) -> bool:
        at = self._lost.get(unit_id)
        return at is not None and time.monotonic() - at < CONTENDED_S


def _is_slice_id_collision(exc: DuplicateKeyError) -> bool:
    details = exc.details or {}
    in_key = "slices.id" in (details.get("keyPattern") or {})
    return in_key or "slice_id_unique" in str(details.get("errmsg", ""))


def _revalidated(unit: MemoryUnit) -> MemoryUnit:
    """A fresh, validated copy: a unit changed after it was built (fields assigned, lists appended to) is
    checked again, so bad data is refused with :class:`InvalidInput` before anything is written."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pydantic warns while dumping the very values we refuse below
            copy: MemoryUnit = MemoryUnit.model_validate(unit.model_dump())
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InvalidInput(f"unit {getattr(unit, 'id', None)!r} is invalid: {where}: {first['msg']}") from exc
    return copy


def _fingerprint(document: Mapping[str, Any]) -> UnitFingerprint:
    return tuple(document.get(name) for name in _FINGERPRINT_FIELDS)


def _is_missing_index(exc: OperationFailure) -> bool:
    """The hinted index does not exist (indexes left to migrations that have not run): scan without it."""
    return exc.code == 2 and "hint" in str(exc).lower()


def _messages(document: Mapping[str, Any]) -> list[Message]:
    return [Message.model_validate(m) for m in document.get("conversation_messages") or []]


def _head_from(document: Mapping[str, Any]) -> UnitHead:
    slices = document.get("slices") or []
    return UnitHead(
        id=document["_id"],
        core_id=document["core_id"],
        message_count=int(document.get("message_count", 0)),
        size_bytes=int(document.get("size_bytes", 0)),
        version=int(document.get("version", 0)),
        updated_at=stored_datetime(document.get("updated_at")),
        previous_unit_id=document.get("previous_unit_id"),
        last_slice=slice_from_document(slices[-1]) if slices else None,
        slice_count=int(document.get("slice_count", 0)),
    )


__all__ = [
    "APPEND_ATTEMPTS",
    "APPEND_PATIENCE_S",
    "HEAD_CACHE_SIZE",
    "MemoryUnitRepository",
    "UnitFingerprint",
    "UnitHead",
    "UnitOutline",
]

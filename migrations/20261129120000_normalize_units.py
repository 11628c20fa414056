"""Normalize every stored memory unit in place: the path for units written by older versions or other tools.

Frozen on purpose. The rules below are a copy of ``partner_repo.normalize_unit`` (Partner's
``normalizeMemoryUnit`` rules 1-8 plus the repeated-id rule) and of the stored unit layout of partner-repo
0.1.0, not an import of the library: a migration must keep doing what it did when it was written, even after
the library's models or rules change (a later change to normalization ships its own migration). A unit test
checks that this copy still agrees with the library, so unintended drift is caught.

Forward streams through the units in ``_id`` order. For each unit that normalization would change it writes
the normalized slices, ``updated_at`` and the derived ``message_count``/``slice_count``/``size_bytes`` with
one update guarded by the unit's ``version`` (bumped, as every write does), so a concurrent ``append`` is
never overwritten: the loser re-reads and is normalized again. Fields this migration does not own (messages,
ids, unknown fields) stay as stored. Units already normalized are not written, so a re-run is cheap and
changes nothing. A unit whose slices cannot be read at all is left untouched and logged. The pre-image of
every unit it rewrites is kept in ``BACKUP``.

Outside a transaction (the default) one unit that cannot be written now (it kept changing under live
appends, or the server refused the write) is left as stored, logged, and the others are still normalized; the
run then fails naming those units, so the migration stays pending and the next run (which skips what is
already normalized) finishes them. Inside a transaction nothing is skipped: any failure aborts it all.

Erasure tombstones (``{_id, erased_at}``, left under an erased unit's id since 0.4.0) are no units: Forward
neither reads nor writes them (its scan, guard and re-read leave out documents with ``erased_at``), so a run
after an erasure never turns one into a unit again.

Backward: normalization is not invertible (dropped ``None`` entries, generated ids, clamped intervals), so it
restores the pre-images Forward kept, each only if the unit is still exactly the version Forward wrote; a unit
written since is left normalized (restoring it would lose that write) and its pre-image stays in ``BACKUP``.
"""

# No `from __future__ import annotations`: Beanie loads this file outside sys.modules, where pydantic could
# not resolve string annotations.
import logging
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any

import bson
from beanie import Document, free_fall_migration
from bson.errors import InvalidDocument
from pydantic import AfterValidator, BaseModel, ConfigDict, StrictStr, TypeAdapter, ValidationError
from pymongo.errors import WriteError

from partner_repo.mongo import driver

UNITS = "memory_units"
BACKUP = "migration_backup_20261129120000_normalize_units"
ATTEMPTS = 50
"""How often one unit is re-read and normalized again when concurrent writers keep changing it."""
BATCH_SIZE = 100
NAMED = 5
"""How many of the units left as stored the final error names (the log names each one)."""

NOT_ERASED = {"erased_at": {"$exists": False}}
"""Leaves out erasure tombstones (0.4.0): an erased unit's id holds ``{_id, erased_at}``, which is no unit."""

log = logging.getLogger("partner_repo.migrations.normalize_units")


# -- frozen model (partner-repo 0.1.0) -----------------------------------------------------------------------


def to_utc_ms(value: datetime) -> datetime:
    """Aware UTC, millisecond precision; naive values are UTC (the stored time convention)."""
    value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return value.replace(microsecond=value.microsecond - value.microsecond % 1000)


UtcDatetime = Annotated[datetime, AfterValidator(to_utc_ms)]


class Slice(BaseModel):
    """A stored slice as 0.1.0 reads it. Unknown keys are kept: the migration never drops data."""

    model_config = ConfigDict(extra="allow")

    id: StrictStr | None = None
    start_index: int | None = None
    end_index: int | None = None
    summary: StrictStr = ""
    created_at: UtcDatetime | None = None
    rolling_size: int | None = None
    retain_divisor: int | None = None


SLICES: TypeAdapter[list[Slice | None]] = TypeAdapter(list[Slice | None])
UPDATED_AT: TypeAdapter[UtcDatetime | None] = TypeAdapter(UtcDatetime | None)


class UnitCollection(Document):
    """Binds the migration to the units collection; documents are read raw and parsed by the models above."""

    class Settings:
        name = UNITS


# -- frozen rules --------------------------------------------------------------------------------------------


class Unreadable(ValueError):
    """The unit's slices or time cannot be parsed; the unit is left as stored."""


def normalized_fields(document: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The fields normalization owns, as they must be stored: slices, updated_at, derived counts, size."""
    messages = document.get("conversation_messages") or []
    if not isinstance(messages, list):
        raise Unreadable("conversation_messages is not a list")
    try:
        updated_at = UPDATED_AT.validate_python(document.get("updated_at")) or to_utc_ms(now)  # 1
        raw_slices = document.get("slices") or []
        if not isinstance(raw_slices, list):
            raise Unreadable("slices is not a list")
        pieces = SLICES.validate_python(raw_slices)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise Unreadable(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
    max_end = len(messages)  # 2
    seen: set[str] = set()
    slices: list[Slice] = []
    for original in pieces:
        if original is None:  # 3
            continue
        piece = original.model_copy()
        if piece.id is None or not piece.id.strip() or piece.id in seen:  # 4, and repeated ids
            piece.id = str(uuid.uuid4())
        seen.add(piece.id)
        if piece.created_at is None:  # 5
            piece.created_at = updated_at
        start = piece.start_index
        piece.start_index = 0 if start is None or start < 0 else min(start, max_end)  # 6
        end = piece.end_index
        piece.end_index = max_end if end is None or end < piece.start_index else min(end, max_end)  # 7
        slices.append(piece)
    slices.sort(key=lambda s: s.created_at or updated_at)  # 8: stable, ties keep their order
    fields: dict[str, Any] = {
        "slices": [s.model_dump(mode="python") for s in slices],
        "updated_at": updated_at,
        "message_count": max_end,
        "slice_count": len(slices),
    }
    stored = {**document, **fields, "version": written_version(document), "size_bytes": 0}
    fields["size_bytes"] = len(bson.encode(stored))
    return fields


def needs_write(document: Mapping[str, Any], fields: Mapping[str, Any]) -> bool:
    """Whether the stored fields differ from their normalized form (times compared in stored precision)."""
    return any(
        _comparable(document.get(name, _MISSING)) != _comparable(value) for name, value in fields.items()
    )


_MISSING = object()


def _comparable(value: Any) -> Any:
    if isinstance(value, datetime):
        return to_utc_ms(value)
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _comparable(v) for k, v in value.items()}
    return value


def _version_guard(document: Mapping[str, Any]) -> dict[str, Any]:
    version = document.get("version")
    guard = {"_id": document["_id"], "version": version if version is not None else {"$exists": False}}
    return {**guard, **NOT_ERASED}


def written_version(pre_image: Mapping[str, Any]) -> int:
    """The version this migration writes over ``pre_image`` (every write bumps it, as the library's do)."""
    return int(pre_image.get("version") or 0) + 1


# -- the migration -------------------------------------------------------------------------------------------


class KeptChanging(RuntimeError):
    """Concurrent writers changed the unit before each of its ``ATTEMPTS`` guarded writes."""


class UnitsLeft(RuntimeError):
    """Units this run left as stored; the migration must run again to normalize them."""


PER_UNIT_FAILURES = (KeptChanging, WriteError, InvalidDocument)
"""What leaves one unit for the next run (outside a transaction) instead of stopping the whole run."""


async def normalize_all(session: Any) -> dict[str, int]:
    units = driver.document_collection(UnitCollection)
    backup = units.database[BACKUP]
    all_or_nothing = bool(getattr(session, "in_transaction", False))
    counts = {"scanned": 0, "normalized": 0, "unreadable": 0, "left": 0}
    left: dict[Any, str] = {}
    cursor = units.find(NOT_ERASED, session=session).sort("_id", 1).batch_size(BATCH_SIZE)
    async for document in cursor:
        counts["scanned"] += 1
        try:
            outcome = await _normalize_one(units, backup, document, session)
        except PER_UNIT_FAILURES as exc:
            if all_or_nothing:
                raise  # the transaction is lost anyway: skipping would only hide why
            outcome, left[document["_id"]] = "left", _why(exc)
            log.warning(
                "normalize_units: unit %r left as stored for the next run: %s", document["_id"], _why(exc)
            )
        if outcome in counts:
            counts[outcome] += 1
    log.info(
        "normalize_units: %(scanned)d units scanned, %(normalized)d normalized, %(unreadable)d unreadable, "
        "%(left)d left for the next run",
        counts,
    )
    if left:
        named = ", ".join(f"{unit_id!r} ({why})" for unit_id, why in list(left.items())[:NAMED])
        more = f" and {len(left) - NAMED} more (each logged)" if len(left) > NAMED else ""
        raise UnitsLeft(f"{len(left)} unit(s) left as stored: {named}{more}; every other unit is normalized")
    return counts


def _why(exc: Exception) -> str:
    if isinstance(exc, WriteError):
        details = exc.details or {}
        return f"the server refused the write: {details.get('errmsg', exc)} (code {exc.code})"
    if isinstance(exc, InvalidDocument):
        return f"it cannot be encoded: {exc}"
    return str(exc)


async def _normalize_one(units: Any, backup: Any, document: Mapping[str, Any], session: Any) -> str:
    for _ in range(ATTEMPTS):
        try:
            fields = normalized_fields(document, datetime.now(UTC))
        except Unreadable as exc:
            log.warning(
                "normalize_units: unit %r left as stored, it cannot be read: %s", document["_id"], exc
            )
            return "unreadable"
        if not needs_write(document, fields):
            return "unchanged"
        update = {"$set": {**fields, "version": written_version(document)}}
        result = await units.update_one(_version_guard(document), update, session=session)
        if result.matched_count:
            # After the unit, not before: a pre-image saved for a write that then lost its race could later be
            # restored over another writer's version. A crash in between leaves the unit normalized without a
            # pre-image, which Backward then leaves normalized (harmless: it is the library's own form).
            await backup.replace_one({"_id": document["_id"]}, dict(document), upsert=True, session=session)
            return "normalized"
        reread = await units.find_one({"_id": document["_id"], **NOT_ERASED}, session=session)
        if reread is None:
            return "deleted"
        document = reread
    raise KeptChanging(f"it kept changing under concurrent writes, {ATTEMPTS} attempts in a row")


async def restore_all(session: Any) -> dict[str, int]:
    units = driver.document_collection(UnitCollection)
    backup = units.database[BACKUP]
    counts = {"restored": 0, "kept": 0}
    async for pre_image in backup.find({}, session=session).sort("_id", 1).batch_size(BATCH_SIZE):
        guard = {"_id": pre_image["_id"], "version": written_version(pre_image)}
        result = await units.replace_one(guard, pre_image, session=session)
        if result.matched_count:
            await backup.delete_one({"_id": pre_image["_id"]}, session=session)
            counts["restored"] += 1
        else:
            counts["kept"] += 1
            log.warning(
                "normalize_units backward: unit %r was written after the migration (or deleted); it stays "
                "normalized and its pre-migration copy stays in %s",
                pre_image["_id"],
                BACKUP,
            )
    if counts["kept"] == 0 and not getattr(session, "in_transaction", False):
        await backup.drop()  # a collection cannot be dropped inside a transaction; empty, it is harmless
    log.info("normalize_units backward: %(restored)d units restored, %(kept)d kept normalized", counts)
    return counts


class Forward:
    @free_fall_migration(document_models=[UnitCollection])
    async def normalize_units(self, session: Any) -> None:
        await normalize_all(session)


class Backward:
    @free_fall_migration(document_models=[UnitCollection])
    async def restore_units(self, session: Any) -> None:
        await restore_all(session)

"""Fill ``slice_ids``, the derived array of a unit's slice ids, in every unit (the next migration moves the
unique index onto it).

Why: the unique index of partner-repo 0.1.0 was on ``slices.id`` with the partial filter ``{"slices.id":
{"$exists": true}}``. A partial filter selects documents, not array elements: a unit holding one slice with
an id and one without indexes a null key for the second, and two such units collide (the second write
fails, also the normalize migration's Backward restores of pre-normalization copies). 0.2.0 keeps the ids of
a unit's slices in ``slice_ids`` (strings only) and makes that unique instead.

Frozen on purpose, like the other migrations: the layout below is 0.2.0's, copied, not imported.

Forward, per unit in ``_id`` order, for units in the library's layout (they carry ``message_count``; units
written by other tools are completed by the library when it first reads them): set ``slice_ids`` to the ids
of its slices and ``size_bytes`` to the unit's exact BSON size with it, in one update guarded by the version
read (a concurrent append is never overwritten: the loser re-reads). The version is not bumped: only derived
fields change, never what a unit holds, and the normalize migration's Backward (which restores a pre-image
only over the exact version it wrote) keeps working through this one. Units already right are not written,
so a rerun continues where a stopped run ended; a unit that keeps changing is left, named, for the next run.
Deploy 0.2.0 to every writer first: 0.1.0 appends do not maintain ``slice_ids``.

Backward removes ``slice_ids`` again (``size_bytes`` recomputed, guarded the same way).
"""

# No `from __future__ import annotations`: Beanie loads this file outside sys.modules, where pydantic could
# not resolve string annotations.
import logging
from collections.abc import Mapping
from typing import Any

import bson
from beanie import Document, free_fall_migration
from pymongo.errors import DuplicateKeyError

from partner_repo.mongo import driver

UNITS = "memory_units"
ATTEMPTS = 50
"""How often one unit is re-read and written again when concurrent writers keep changing it."""
BATCH_SIZE = 100
NAMED = 5
"""Units named in the error of a run that left some."""


log = logging.getLogger("partner_repo.migrations.slice_ids")


class UnitCollection(Document):
    """Binds the migration to the units collection; documents are read raw."""

    class Settings:
        name = UNITS


class KeptChanging(RuntimeError):
    """Concurrent writers changed the unit before each of its ``ATTEMPTS`` guarded writes."""


class UnitsLeft(RuntimeError):
    """Units this run could not write; the migration must run again for them."""


# -- the frozen layout (partner-repo 0.2.0) -------------------------------------------------------------


def slice_ids_of(document: Mapping[str, Any]) -> list[str]:
    """The ids of a stored unit's slices, in slice order (slices without a string id have none)."""
    slices = document.get("slices")
    pieces = slices if isinstance(slices, list) else []
    return [p["id"] for p in pieces if isinstance(p, Mapping) and isinstance(p.get("id"), str)]


def with_slice_ids(document: Mapping[str, Any]) -> dict[str, Any]:
    """The fields Forward writes: ``slice_ids`` and the exact ``size_bytes`` of the unit holding them."""
    ids = slice_ids_of(document)
    stored = {**document, "slice_ids": ids, "size_bytes": 0}
    return {"slice_ids": ids, "size_bytes": len(bson.encode(stored))}


def without_slice_ids(document: Mapping[str, Any]) -> dict[str, Any]:
    """The unit's exact ``size_bytes`` once ``slice_ids`` is gone (what Backward writes)."""
    stored = {k: v for k, v in document.items() if k != "slice_ids"}
    stored["size_bytes"] = 0
    return {"size_bytes": len(bson.encode(stored))}


def in_library_layout(document: Mapping[str, Any]) -> bool:
    return "message_count" in document and isinstance(document.get("slices", []), list)


def up_to_date(document: Mapping[str, Any]) -> bool:
    stored = document.get("slice_ids")
    return isinstance(stored, list) and sorted(map(repr, stored)) == sorted(map(repr, slice_ids_of(document)))


def _guard(document: Mapping[str, Any]) -> dict[str, Any]:
    version = document.get("version")
    return {"_id": document["_id"], "version": version if version is not None else {"$exists": False}}


# -- the migration -------------------------------------------------------------------------------------------


async def fill_all(session: Any) -> dict[str, int]:
    units = driver.document_collection(UnitCollection)
    counts = {"scanned": 0, "written": 0, "left": 0}
    left: dict[Any, str] = {}
    async for document in units.find({}, session=session).sort("_id", 1).batch_size(BATCH_SIZE):
        counts["scanned"] += 1
        try:
            if await _write_one(units, document, session, forward=True):
                counts["written"] += 1
        except (KeptChanging, DuplicateKeyError) as exc:
            if getattr(session, "in_transaction", False):
                raise
            counts["left"] += 1
            left[document["_id"]] = _why(exc)
            log.warning("slice_ids: unit %r left for the next run: %s", document["_id"], exc)
    log.info("slice_ids: %(scanned)d units scanned, %(written)d written, %(left)d left", counts)
    if left:
        named = ", ".join(f"{unit_id!r}" for unit_id in list(left)[:NAMED])
        raise UnitsLeft(f"{len(left)} unit(s) not written ({named}); every other unit has slice_ids")
    return counts


def _why(exc: Exception) -> str:
    if isinstance(exc, DuplicateKeyError):
        return (
            f"a slice id of it is held by another unit ({(exc.details or {}).get('keyValue')}); run "
            "`partner-repo check` and `partner-repo repair`, then migrate again"
        )
    return str(exc)


async def clear_all(session: Any) -> dict[str, int]:
    units = driver.document_collection(UnitCollection)
    counts = {"written": 0}
    async for document in units.find({"slice_ids": {"$exists": True}}, session=session).batch_size(
        BATCH_SIZE
    ):
        if await _write_one(units, document, session, forward=False):
            counts["written"] += 1
    log.info("slice_ids backward: slice_ids removed from %(written)d units", counts)
    return counts


async def _write_one(units: Any, document: Mapping[str, Any], session: Any, *, forward: bool) -> bool:
    """Write one unit's new form, guarded by its version; False when nothing was (or needed to be) written."""
    for _ in range(ATTEMPTS):
        if forward and (not in_library_layout(document) or up_to_date(document)):
            return False
        if forward:
            update: dict[str, Any] = {"$set": with_slice_ids(document)}
        else:
            update = {"$set": without_slice_ids(document), "$unset": {"slice_ids": ""}}
        result = await units.update_one(_guard(document), update, session=session)
        if result.matched_count:
            return True
        reread = await units.find_one({"_id": document["_id"]}, session=session)
        if reread is None or (not forward and "slice_ids" not in reread):
            return False
        document = reread
    raise KeptChanging(f"it kept changing under concurrent writes, {ATTEMPTS} attempts in a row")


class Forward:
    @free_fall_migration(document_models=[UnitCollection])
    async def fill_slice_ids(self, session: Any) -> None:
        await fill_all(session)


class Backward:
    @free_fall_migration(document_models=[UnitCollection])
    async def clear_slice_ids(self, session: Any) -> None:
        await clear_all(session)

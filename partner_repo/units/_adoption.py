"""Adopting units written by other tools (mongosh, Compass, mongoimport, older versions), once.

Such a unit may lack some or all of the derived fields (``message_count``, ``slice_count``, ``slice_ids``,
``size_bytes``; a unit of an older version lacks ``slice_ids``) and even a ``version``. The first repository
read that needs them stores the unit normalized, with one replace guarded by exactly what was read (the
version and each derived field as read, or their absence, and the array lengths), so a concurrent writer's
change is never overwritten: the loser re-reads and finds the unit completed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from partner_repo.errors import ConflictError, NotFound
from partner_repo.mongo import (
    DERIVED_FIELDS,
    NOT_ERASED,
    has_derived_fields,
    is_tombstone,
    marked,
    unit_document,
    unit_from_document,
)
from partner_repo.normalization import normalize_unit
from partner_repo.units._claims import SliceIdClaims
from partner_repo.units._heads import HEAD_PROJECTION
from partner_repo.units._rules import refuse_too_large

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


__all__ = ["ADOPTION_ATTEMPTS", "UnitAdoption"]

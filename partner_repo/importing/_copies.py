"""Importing a Partner state into a second core: refused, or a copy under new ids.

A unit belongs to one core (its ``core_id``): a core whose session is another core's unit can never roll
(every append there is refused). So before an import writes anything it looks up the state's unit ids (the
unit files and the current session): one stored under another core refuses the import, naming that core.
Asked for a copy instead (``import-state --as-copy``, ``as_copy=True``), every unit id, the session and
every slice id get new ids derived from the core and the original id (UUID5), so a copy imported again
under the same core finds its units present and changes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from partner_repo.errors import UnitOfAnotherCore
from partner_repo.models import MemoryUnit
from partner_repo.mongo import UNITS, MongoDatabase
from partner_repo.validation import id_problem

COPY_NAMESPACE = uuid.UUID("5b0b1f4e-6a3c-4c59-9a51-2f6e0f7f3c31")
"""The namespace of the ids a copy gets (any fixed UUID: the ids only need to be stable)."""

LOOKUP_BATCH = 1000
"""Unit ids looked up per query."""


def copy_id(core_id: str, original: str, kind: str = "unit") -> str:
    """The id the copy of ``original`` (a unit or slice id of the state) gets in core ``core_id``."""
    return str(uuid.uuid5(COPY_NAMESPACE, f"{kind}\x00{core_id}\x00{original}"))


class Copies:
    """The renaming of one import as a copy into ``core_id``."""

    def __init__(self, core_id: str) -> None:
        self.core_id = core_id

    def unit_id(self, original: str) -> str:
        return copy_id(self.core_id, original)

    def of(self, unit: MemoryUnit) -> MemoryUnit:
        """``unit`` under its copy's ids: its own, the unit it continues, each slice's."""
        slices = [
            piece
            if piece is None or piece.id is None  # no id: normalization mints one
            else piece.model_copy(update={"id": copy_id(self.core_id, f"{unit.id}\x00{piece.id}", "slice")})
            for piece in unit.slices
        ]
        previous = None if unit.previous_unit_id is None else self.unit_id(unit.previous_unit_id)
        copied: MemoryUnit = unit.model_copy(
            update={"id": self.unit_id(unit.id), "previous_unit_id": previous, "slices": slices}
        )
        return copied


async def refuse_units_of_other_cores(database: MongoDatabase, core_id: str, unit_ids: Sequence[str]) -> None:
    """:class:`UnitOfAnotherCore` (nothing written) when one of ``unit_ids`` is stored under another core."""
    ids = sorted({unit_id for unit_id in unit_ids if _storable(unit_id)})  # the others are reported skipped
    for start in range(0, len(ids), LOOKUP_BATCH):
        query: dict[str, Any] = {
            "_id": {"$in": ids[start : start + LOOKUP_BATCH]},
            "core_id": {"$exists": True, "$ne": core_id},
        }
        found = await database[UNITS].find_one(query, {"core_id": 1})
        if found is not None:
            hint = ": import it into that core, or a copy under new ids (import-state --as-copy)"
            raise UnitOfAnotherCore(found["_id"], found["core_id"], core_id, hint=hint)


def _storable(unit_id: str) -> bool:
    """Whether ``unit_id`` could be a stored unit's id (one the import skips is no other core's)."""
    try:
        unit_id.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return bool(unit_id.strip()) and id_problem(unit_id, "it") is None


__all__ = ["COPY_NAMESPACE", "Copies", "copy_id", "refuse_units_of_other_cores"]

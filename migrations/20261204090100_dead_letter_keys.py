"""Key each dead letter on its unit and slice: ``{group, consumer, unit_id, slice_id[, revision]}``.

Before, a slice's letter was keyed ``{group, consumer, slice_id[, revision]}``: the slice id alone named the
delivery, although a slice id is a delivery's identity only within its unit. Each such letter is copied
under its new key (fields unchanged) and the old one deleted; a letter already under its new key, and an
erasure's letter (keyed on its position in the erasure log), are left alone.

Idempotent and safe with services running: the copy is inserted only where no letter has the new key yet (a
letter an upgraded listener recorded meanwhile, or this migration's own copy before it was cut short, is
kept as it is), and the old letter is deleted only after. Backward restores the old keys the same way (of two
letters of one slice id in two units, the first moved is kept). Frozen on purpose.
"""

# No `from __future__ import annotations`: Beanie loads this file outside sys.modules, where pydantic could
# not resolve string annotations.
import logging
from typing import Any

from beanie import Document, free_fall_migration

from partner_repo.mongo import driver

LETTERS = "rolling_dead_letters"

log = logging.getLogger("partner_repo.migrations.dead_letter_keys")


class UnitCollection(Document):
    """Gives the migration its database (through the collection binding); no fields are read."""

    class Settings:
        name = "memory_units"


def new_key(letter: dict[str, Any]) -> dict[str, Any]:
    key = {
        "group": letter["group"],
        "consumer": letter["consumer"],
        "unit_id": letter.get("unit_id", ""),
        "slice_id": letter["slice_id"],
    }
    if letter.get("revision"):
        key["revision"] = letter["revision"]
    return key


def old_key(letter: dict[str, Any]) -> dict[str, Any]:
    key = {"group": letter["group"], "consumer": letter["consumer"], "slice_id": letter["slice_id"]}
    if letter.get("revision"):
        key["revision"] = letter["revision"]
    return key


async def rekey(keyed: Any, forward: bool) -> int:
    """Move every slice letter not under ``keyed(letter)`` there; returns how many moved."""
    letters = driver.document_collection(UnitCollection).database[LETTERS]
    has_unit = {"_id.unit_id": {"$exists": not forward}}
    query = {"erasure_seq": {"$exists": False}, "_id.slice_id": {"$exists": True}, **has_unit}
    moved = 0
    async for letter in letters.find(query):
        fields = {k: v for k, v in letter.items() if k != "_id"}
        await letters.update_one({"_id": keyed(letter)}, {"$setOnInsert": fields}, upsert=True)
        await letters.delete_one({"_id": letter["_id"]})
        moved += 1
    log.info("dead_letter_keys: %d letter(s) rekeyed", moved)
    return moved


class Forward:
    @free_fall_migration(document_models=[UnitCollection])
    async def key_letters_on_their_unit(self, session: Any) -> None:
        await rekey(new_key, forward=True)


class Backward:
    @free_fall_migration(document_models=[UnitCollection])
    async def key_letters_on_their_slice(self, session: Any) -> None:
        await rekey(old_key, forward=False)

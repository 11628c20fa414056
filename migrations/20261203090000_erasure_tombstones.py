"""Create the TTL indexes that remove erasure tombstones (partner-repo 0.4.0); Backward drops exactly these.

An erasure (``partner-repo forget``) leaves a tombstone under each id it erases: in ``memory_units``
``{_id, erased_at}`` (so a roller stalled past its lease cannot create the erased unit again), in
``listener_checkpoints`` ``{_id, kind: "erased-unit", group, unit_id, erased_at}`` (so a listener's held-back
commit cannot bring an erased unit's progress back). ``erased_ttl`` on ``erased_at`` in both collections
removes them 7 days (604,800 seconds) after the erasure; the index is partial on ``erased_at`` existing, so
it holds the tombstones only, never a key for each unit or checkpoint.

Frozen on purpose: the definitions are copies, not imports of ``partner_repo.mongo._indexes``. Each build is
idempotent and runs outside the migration's session (MongoDB refuses ``createIndexes`` on an existing
collection inside a transaction). No data changes: tombstones written before the index exists are removed
once it is built (the server's TTL monitor, every 60 seconds, removes whatever is already past its time).
"""

# No `from __future__ import annotations`: Beanie loads this file outside sys.modules, where pydantic could
# not resolve string annotations.
import logging
from typing import Any

from beanie import Document, free_fall_migration
from pymongo import ASCENDING, IndexModel
from pymongo.errors import OperationFailure

from partner_repo.mongo import driver

RETENTION_SECONDS = 7 * 24 * 60 * 60


def tombstone_ttl() -> IndexModel:
    return IndexModel(
        [("erased_at", ASCENDING)],
        name="erased_ttl",
        expireAfterSeconds=RETENTION_SECONDS,
        partialFilterExpression={"erased_at": {"$exists": True}},
    )


INDEXES: dict[str, list[IndexModel]] = {
    "memory_units": [tombstone_ttl()],
    "listener_checkpoints": [tombstone_ttl()],
}

INDEX_NOT_FOUND = 27
NAMESPACE_NOT_FOUND = 26

log = logging.getLogger("partner_repo.migrations.erasure_tombstones")


class UnitCollection(Document):
    """Gives the migration its database (through the collection binding); no fields are read."""

    class Settings:
        name = "memory_units"


async def create_all() -> None:
    database = driver.document_collection(UnitCollection).database
    for collection, indexes in INDEXES.items():
        for index in indexes:
            options = dict(index.document)
            keys = list(options.pop("key").items())
            await database[collection].create_index(keys, **options)
            log.info("erasure_tombstones: %s.%s created", collection, index.document["name"])


async def drop_all() -> None:
    database = driver.document_collection(UnitCollection).database
    for collection, indexes in INDEXES.items():
        for index in indexes:
            name = index.document["name"]
            try:
                await database[collection].drop_index(name)
            except OperationFailure as exc:
                if not _already_gone(exc):
                    raise
            log.info("erasure_tombstones backward: dropped %s.%s", collection, name)


def _already_gone(exc: OperationFailure) -> bool:
    return exc.code in (INDEX_NOT_FOUND, NAMESPACE_NOT_FOUND) or "not found" in str(exc).lower()


class Forward:
    @free_fall_migration(document_models=[UnitCollection])
    async def create_tombstone_ttl_indexes(self, session: Any) -> None:
        await create_all()


class Backward:
    @free_fall_migration(document_models=[UnitCollection])
    async def drop_tombstone_ttl_indexes(self, session: Any) -> None:
        await drop_all()

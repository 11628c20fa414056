"""Create every index partner-repo relies on; Backward drops exactly these.

Frozen on purpose: ``INDEXES`` is a copy of ``partner_repo.mongo._indexes.ALL_INDEXES`` as of partner-repo
0.1.0, not an import, so this migration keeps creating the same indexes after the library's set changes (a new
index ships with its own migration; a unit test checks that the migrations together create exactly the
library's set).

It runs after the normalization migration: the unique slice-id index cannot be built while two units hold
slices without an id (both index a null ``slices.id``), and normalization gives every slice an id.

Index builds ignore the migration's session: MongoDB refuses ``createIndexes`` on an existing collection and
``dropIndexes`` inside a multi-document transaction. Both are idempotent here, so running them outside the
transaction is safe; with ``--allow-index-dropping`` never passed, nothing else is dropped.

On a collection sharded before ``migrate`` (docs/sharding.md) an index it cannot have (0.1's unique
``slice_id_unique``) is not requested (``partner_repo.mongo._topology``): a later migration replaces it
anyway.
"""

# No `from __future__ import annotations`: Beanie loads this file outside sys.modules, where pydantic could
# not resolve string annotations.
import logging
from typing import Any

from beanie import Document, free_fall_migration
from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.errors import OperationFailure

from partner_repo.mongo import driver, topology_of

log = logging.getLogger("partner_repo.migrations.create_indexes")

INDEXES: dict[str, list[IndexModel]] = {
    "memory_units": [
        IndexModel([("core_id", ASCENDING), ("updated_at", DESCENDING)], name="core_updated"),
        IndexModel(
            [("slices.id", ASCENDING)],
            name="slice_id_unique",
            unique=True,
            partialFilterExpression={"slices.id": {"$exists": True}},
        ),
        IndexModel([("slices.created_at", ASCENDING), ("slices.id", ASCENDING)], name="slice_created"),
        IndexModel(
            [("core_id", ASCENDING), ("slices.created_at", ASCENDING), ("slices.id", ASCENDING)],
            name="core_slice_created",
        ),
        IndexModel(
            [
                ("_id", ASCENDING),
                ("version", ASCENDING),
                ("message_count", ASCENDING),
                ("slice_count", ASCENDING),
                ("size_bytes", ASCENDING),
            ],
            name="unit_fingerprint",
        ),
    ],
    "memory_cores": [
        IndexModel([("last_interaction_at", ASCENDING)], name="last_interaction"),
        IndexModel([("idle_rolled", ASCENDING), ("last_interaction_at", ASCENDING)], name="idle_pending"),
    ],
    "listener_checkpoints": [
        IndexModel([("group", ASCENDING), ("kind", ASCENDING)], name="group_kind"),
    ],
    "rolling_dead_letters": [
        IndexModel(
            [("group", ASCENDING), ("consumer", ASCENDING), ("failed_at", ASCENDING)], name="group_consumer"
        ),
    ],
}

INDEX_NOT_FOUND = 27
NAMESPACE_NOT_FOUND = 26


class UnitCollection(Document):
    """Gives the migration its database (through the collection binding); no fields are read."""

    class Settings:
        name = "memory_units"


async def create_all() -> None:
    database = driver.document_collection(UnitCollection).database
    topology = await topology_of(database)
    for collection, indexes in INDEXES.items():
        allowed = [index for index in indexes if topology.refusal(collection, index.document) is None]
        names = await database[collection].create_indexes(allowed)
        log.info("create_indexes: %s has %s", collection, ", ".join(names))


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
            log.info("create_indexes backward: dropped %s.%s", collection, name)


def _already_gone(exc: OperationFailure) -> bool:
    return exc.code in (INDEX_NOT_FOUND, NAMESPACE_NOT_FOUND) or "not found" in str(exc).lower()


class Forward:
    @free_fall_migration(document_models=[UnitCollection])
    async def create_indexes(self, session: Any) -> None:
        await create_all()


class Backward:
    @free_fall_migration(document_models=[UnitCollection])
    async def drop_indexes(self, session: Any) -> None:
        await drop_all()

"""Create the indexes recall relies on (``partner_repo.recall``); Backward drops exactly these.

The recall index is derived data in two collections of its own, written by the ``recall-index`` consumer
(``RecallIndexer``) and read by ``MemoryRecall``:

- ``recall_slices``: ``core_terms`` on ``(core_id, terms)`` (multikey: the text channel finds the slices
  holding a query's rarest terms), ``core_ended`` on ``(core_id, ended_at desc)`` (the newest slices, and the
  time filter), ``core_ancestors`` on ``(core_id, ancestors)`` and ``core_related`` on ``(core_id, related)``
  (multikey: the topic, parent and related channels), and ``unit`` on ``unit_id`` (an erasure removes a
  unit's slices without a scan);
- ``recall_vocabulary``: ``core_kind_words`` on ``(core_id, kind, words)`` (the topic nodes a query's words
  name) and ``core_kind_depth`` on ``(core_id, kind, depth)`` (the roots of a core's topic tree).

Every filter starts with the core, so a recall reads only its core's keys. No data changes: the index's
documents are built by the consumer (a listener group started from the beginning backfills them).

Frozen on purpose: the definitions are copies, not imports of ``partner_repo.mongo._indexes``. Each build is
idempotent and runs outside the migration's session (MongoDB refuses ``createIndexes`` on an existing
collection inside a transaction); no partial filter, so the in-memory backend builds them as a server does.
"""

# No `from __future__ import annotations`: Beanie loads this file outside sys.modules, where pydantic could
# not resolve string annotations.
import logging
from typing import Any

from beanie import Document, free_fall_migration
from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.errors import OperationFailure

from partner_repo.mongo import driver

INDEXES: dict[str, list[IndexModel]] = {
    "recall_slices": [
        IndexModel([("core_id", ASCENDING), ("terms", ASCENDING)], name="core_terms"),
        IndexModel([("core_id", ASCENDING), ("ended_at", DESCENDING)], name="core_ended"),
        IndexModel([("core_id", ASCENDING), ("ancestors", ASCENDING)], name="core_ancestors"),
        IndexModel([("core_id", ASCENDING), ("related", ASCENDING)], name="core_related"),
        IndexModel([("unit_id", ASCENDING)], name="unit"),
    ],
    "recall_vocabulary": [
        IndexModel(
            [("core_id", ASCENDING), ("kind", ASCENDING), ("words", ASCENDING)], name="core_kind_words"
        ),
        IndexModel(
            [("core_id", ASCENDING), ("kind", ASCENDING), ("depth", ASCENDING)], name="core_kind_depth"
        ),
    ],
}

INDEX_NOT_FOUND = 27
NAMESPACE_NOT_FOUND = 26

log = logging.getLogger("partner_repo.migrations.recall_indexes")


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
            log.info("recall_indexes: %s.%s created", collection, index.document["name"])


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
            log.info("recall_indexes backward: dropped %s.%s", collection, name)


def _already_gone(exc: OperationFailure) -> bool:
    return exc.code in (INDEX_NOT_FOUND, NAMESPACE_NOT_FOUND) or "not found" in str(exc).lower()


class Forward:
    @free_fall_migration(document_models=[UnitCollection])
    async def create_recall_indexes(self, session: Any) -> None:
        await create_all()


class Backward:
    @free_fall_migration(document_models=[UnitCollection])
    async def drop_recall_indexes(self, session: Any) -> None:
        await drop_all()

"""Create the indexes erasure relies on (``partner-repo forget``); Backward drops exactly these.

- ``erasures.erasure_part``, unique on ``(erasure_id, part)``: a part of a finished erasure is logged once,
  however often the run that logs it is repeated after a crash (``_id`` is its position in the log).
- ``erasure_requests.state_core`` on ``(state, core_id)``: the pending erasures (of a core), which a rerun
  continues; ``erasure_requests.erasure_unit`` on ``(erasure_id, unit_id)``: the ids an erasure will remove,
  in order.
- ``listener_checkpoints.unit`` and ``rolling_dead_letters.unit`` on ``unit_id``: an erasure removes every
  group's progress on its units and their dead letters without scanning either collection.

Frozen on purpose: the definitions are copies, not imports of ``partner_repo.mongo._indexes``. Each build is
idempotent and runs outside the migration's session (MongoDB refuses ``createIndexes`` on an existing
collection inside a transaction); no partial filter, so the in-memory backend builds them as a server does.
"""

# No `from __future__ import annotations`: Beanie loads this file outside sys.modules, where pydantic could
# not resolve string annotations.
import logging
from typing import Any

from beanie import Document, free_fall_migration
from pymongo import ASCENDING, IndexModel
from pymongo.errors import OperationFailure

from partner_repo.mongo import driver

INDEXES: dict[str, list[IndexModel]] = {
    "listener_checkpoints": [IndexModel([("unit_id", ASCENDING)], name="unit")],
    "rolling_dead_letters": [IndexModel([("unit_id", ASCENDING)], name="unit")],
    "erasures": [
        IndexModel([("erasure_id", ASCENDING), ("part", ASCENDING)], name="erasure_part", unique=True),
    ],
    "erasure_requests": [
        IndexModel([("state", ASCENDING), ("core_id", ASCENDING)], name="state_core"),
        IndexModel([("erasure_id", ASCENDING), ("unit_id", ASCENDING)], name="erasure_unit"),
    ],
}

INDEX_NOT_FOUND = 27
NAMESPACE_NOT_FOUND = 26

log = logging.getLogger("partner_repo.migrations.erasure_indexes")


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
            log.info("erasure_indexes: %s.%s created", collection, index.document["name"])


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
            log.info("erasure_indexes backward: dropped %s.%s", collection, name)


def _already_gone(exc: OperationFailure) -> bool:
    return exc.code in (INDEX_NOT_FOUND, NAMESPACE_NOT_FOUND) or "not found" in str(exc).lower()


class Forward:
    @free_fall_migration(document_models=[UnitCollection])
    async def create_erasure_indexes(self, session: Any) -> None:
        await create_all()


class Backward:
    @free_fall_migration(document_models=[UnitCollection])
    async def drop_erasure_indexes(self, session: Any) -> None:
        await drop_all()

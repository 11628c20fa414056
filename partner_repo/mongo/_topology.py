"""What kind of deployment a database is on, and which indexes its sharded collections cannot have.

Index management (``ensure_indexes``, the index migrations) asks before it creates: on a sharded cluster
MongoDB refuses ``createIndexes`` of a unique index that the shard key does not prefix, and refuses
``shardCollection`` while such an index exists (manual: "Sharded Collections with Unique Indexes"). The
library's own set has no such index on a collection it documents as shardable (:data:`SHARD_KEYS`); this
keeps the migrations that built one before (``slice_ids_unique``) from failing on a collection sharded
first, and refuses ``migrate --transaction`` there (a cross-shard transaction may not create a collection).

A ``mongos`` says so in its ``hello`` reply (``msg: "isdbgrid"``); which collections are sharded, and on what
key, is in ``config.collections``. A user who may not read ``config`` gets the documented keys assumed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pymongo.errors import OperationFailure, PyMongoError

from partner_repo.mongo import _driver as driver
from partner_repo.mongo._indexes import ALL_INDEXES, SHARD_KEYS
from partner_repo.mongo._masking import library_logger

log = library_logger("partner_repo.topology")

MONGOS_HELLO_MSG = "isdbgrid"
"""What a ``mongos`` answers in the ``msg`` field of ``hello``; a ``mongod`` has no such field."""


@dataclass(frozen=True)
class Topology:
    """A deployment as index management sees it: a ``mongos`` or not, and the shard key of each sharded
    collection of the database (by collection name)."""

    mongos: bool = False
    shard_keys: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def shard_key(self, collection: str) -> Mapping[str, Any] | None:
        return self.shard_keys.get(collection)

    def refusal(self, collection: str, index: Mapping[str, Any]) -> str | None:
        """Why ``collection`` cannot have ``index`` (an ``IndexModel.document``) here; None when it can."""
        return index_refusal(index, self.shard_key(collection))


def index_refusal(index: Mapping[str, Any], shard_key: Mapping[str, Any] | None) -> str | None:
    """Why a collection sharded on ``shard_key`` cannot have ``index`` (None: it can, or is not sharded).

    MongoDB's rule (``isUniqueIndexCompatible``): a unique index is allowed when its first field is ``_id``
    or the shard key's fields are a prefix of its fields; every other index is allowed.
    """
    if shard_key is None or not index.get("unique"):
        return None
    fields = list(dict(index["key"]))
    key_fields = list(shard_key)
    if fields[:1] == ["_id"] or fields[: len(key_fields)] == key_fields:
        return None
    return (
        f"unique index {index.get('name')!r} on {fields} is not prefixed by the shard key {dict(shard_key)}; "
        "a sharded collection cannot have it"
    )


async def topology_of(database: Any) -> Topology:
    """The topology ``database`` is on: one ``hello`` (nothing on the in-memory backend), and on a ``mongos``
    one read of ``config.collections`` for the library's collections."""
    hello = await _hello(database)
    if hello.get("msg") != MONGOS_HELLO_MSG:
        return Topology()
    names = {f"{database.name}.{name}": name for name in _collections()}
    config = driver.client_of(database)["config"]["collections"]
    try:
        cursor = config.find({"_id": {"$in": sorted(names)}}, {"key": 1, "dropped": 1, "unsplittable": 1})
        found = [document async for document in cursor]
    except OperationFailure as exc:
        log.warning(
            "cannot read config.collections (%s): assuming the documented shard keys %s",
            driver.first_line(exc),
            SHARD_KEYS,
        )
        return Topology(mongos=True, shard_keys=dict(SHARD_KEYS))
    keys = {
        names[document["_id"]]: dict(document["key"])
        for document in found
        if document.get("key") and not document.get("dropped") and not document.get("unsplittable")
    }
    return Topology(mongos=True, shard_keys=keys)


async def _hello(database: Any) -> Mapping[str, Any]:
    """The server's ``hello`` (``isMaster`` before 4.4.2); empty on a backend without either."""
    for command in ("hello", "isMaster"):
        try:
            reply: Mapping[str, Any] = await database.command(command)
            return reply
        except NotImplementedError:  # the in-memory backend: no server, never a mongos
            return {}
        except OperationFailure:
            continue
        except PyMongoError:
            return {}
    return {}


def _collections() -> Iterable[str]:
    return sorted({*ALL_INDEXES, *SHARD_KEYS})


__all__ = ["MONGOS_HELLO_MSG", "Topology", "index_refusal", "topology_of"]

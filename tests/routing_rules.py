"""How a sharded cluster routes each command the library sends, for the documented shard keys: a pure check.

``mongos`` sends a command to one shard when its filter pins the shard key to one value, to the shards of
the listed values for an ``$in`` or an ``$or`` of such branches, and to every shard otherwise; with a hashed
key a range on it pins nothing (manual: "Query Routing and Targeted Operations", "Hashed Sharding"). A
collection that is not sharded lives on its database's primary shard: one shard. Some commands a sharded
cluster refuses outright, and they are reported as such:

- an upsert (``update`` with ``upsert``, ``findAndModify`` with ``upsert``) whose filter lacks an equality on
  the full shard key;
- an ``updateOne``, ``deleteOne`` or ``findAndModify`` not pinned to one shard (allowed only from MongoDB 7,
  by a two-phase protocol the library does not rely on: docs/sharding.md);
- a unique index the shard key does not prefix (:func:`partner_repo.mongo._topology.index_refusal`);
- creating a collection or an index inside a transaction (a cross-shard transaction cannot).

The shard keys are the documented ones (``partner_repo.mongo._indexes.SHARD_KEYS``: ``_id`` hashed for the
units and the claims, ``{core_id: 1, _id: 1}`` for the recall index); every other collection is unsharded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from partner_repo.mongo import SHARD_KEYS, index_refusal

Kind = Literal["one", "some", "all", "unsharded", "admin", "refused"]
"""Where a command goes: one shard, several (each named by the key), every shard, the primary shard of an
unsharded collection, nowhere in particular (an admin command, a cursor's ``getMore``), or refused."""

ADMIN_COMMANDS = frozenset(
    {
        "hello", "isMaster", "ismaster", "ping", "buildInfo", "endSessions", "listCollections",
        "listIndexes", "dropIndexes", "drop", "dropDatabase", "getMore", "killCursors", "commitTransaction",
        "abortTransaction", "saslStart", "saslContinue", "serverStatus", "explain", "create", "createIndexes",
    }
)  # fmt: skip
"""Commands that read or write no document by filter (``createIndexes`` and ``create`` are still checked)."""

TARGETED = frozenset({"one", "unsharded", "admin"})


@dataclass(frozen=True)
class Route:
    kind: Kind
    collection: str | None
    why: str = ""


def route(command: Mapping[str, Any], shard_keys: Mapping[str, Mapping[str, Any]] = SHARD_KEYS) -> Route:
    """Where a cluster sharded on ``shard_keys`` sends ``command`` (as the driver sent it)."""
    name = next(iter(command))
    collection = command[name] if isinstance(command[name], str) else None
    in_transaction = command.get("autocommit") is False
    if name in {"create", "createIndexes"} and in_transaction:
        return Route("refused", collection, f"{name} inside a transaction")
    key = shard_keys.get(collection or "")
    if name == "createIndexes":
        for index in command.get("indexes", []):
            if (reason := index_refusal(index, key)) is not None:
                return Route("refused", collection, reason)
        return Route("admin", collection)
    if name in ADMIN_COMMANDS or collection is None:
        return Route("admin", collection)
    if key is None:
        return Route("unsharded", collection)
    field = next(iter(key))
    hashed = key[field] == "hashed"
    whole = tuple(key)
    if name == "insert":
        return Route("one" if len(command.get("documents", [])) == 1 else "some", collection)
    if name in {"find", "count", "distinct"}:
        return Route(target(command.get("filter", command.get("query")) or {}, field, hashed), collection)
    if name == "aggregate":
        return _aggregate(command.get("pipeline", []), collection, field, hashed)
    if name == "update":
        return _writes(command.get("updates", []), collection, whole, hashed, one="multi", upsert=True)
    if name == "delete":
        return _writes(command.get("deletes", []), collection, whole, hashed, one="limit", upsert=False)
    if name == "findAndModify":
        statement = {"q": command.get("query") or {}, "upsert": command.get("upsert", False)}
        return _writes([statement], collection, whole, hashed, one="always", upsert=True)
    return Route("all", collection, f"unknown command {name}")


def target(query: Mapping[str, Any], field: str, hashed: bool) -> Kind:
    """``one`` when ``query`` pins ``field`` to one value, ``some`` to a few, ``all`` otherwise."""
    if field in query:
        return _values(query[field], hashed)
    kinds = [target(part, field, hashed) for part in query.get("$and", [])]
    if "one" in kinds:
        return "one"
    if "some" in kinds:
        return "some"
    branches = query.get("$or")
    if branches and all(target(branch, field, hashed) != "all" for branch in branches):
        return "one" if len(branches) == 1 and target(branches[0], field, hashed) == "one" else "some"
    return "all"


def _values(condition: Any, hashed: bool) -> Kind:
    if not isinstance(condition, Mapping) or not any(str(k).startswith("$") for k in condition):
        return "one"  # an equality (an embedded document is compared whole)
    if "$eq" in condition:
        return "one"
    if "$in" in condition:
        return "one" if len(condition["$in"]) == 1 else "some"
    ranged = {"$gt", "$gte", "$lt", "$lte"} & set(condition)
    return "all" if hashed or not ranged else "some"


def _aggregate(
    pipeline: Sequence[Mapping[str, Any]], collection: str | None, field: str, hashed: bool
) -> Route:
    first = pipeline[0] if pipeline else {}
    if "$changeStream" in first:
        return Route("all", collection, "a change stream is opened on every shard")
    if "$match" in first:
        return Route(target(first["$match"], field, hashed), collection)
    return Route("all", collection, f"the pipeline starts with {next(iter(first), 'nothing')}")


def _writes(
    statements: Sequence[Mapping[str, Any]],
    collection: str | None,
    key: tuple[str, ...],
    hashed: bool,
    *,
    one: str,
    upsert: bool,
) -> Route:
    """Each statement's routing; the widest wins, and a refusal names its statement. The first field of the
    shard key routes (a compound key's prefix targets the chunks of that value); an upsert must name every
    field of the key with an equality (the manual: "must include the full shard key")."""
    widest: Kind = "one"
    for statement in statements:
        query = statement.get("q") or {}
        kind = target(query, key[0], hashed)
        if one == "multi":  # update: updateOne unless multi
            single = not statement.get("multi")
        else:  # delete: deleteOne when limit is 1; findAndModify: always one
            single = one == "always" or statement.get("limit") == 1
        if upsert and statement.get("upsert") and not all(target(query, f, hashed) == "one" for f in key):
            return Route(
                "refused",
                collection,
                f"an upsert without an equality on the full shard key {', '.join(key)}: {query}",
            )
        if single and kind != "one":
            return Route(
                "refused", collection, f"a single-document write not pinned to one shard: {statement}"
            )
        widest = kind if _order(kind) > _order(widest) else widest
    return Route(widest, collection)


def _order(kind: Kind) -> int:
    return {"one": 0, "some": 1, "all": 2}.get(kind, 0)


__all__ = ["TARGETED", "Route", "route", "target"]

"""The recall index's documents and their ids: one collection, three kinds, every id naming its core.

``recall_index`` holds, for each core, one document per indexed slice, one per topic node of the core's
tree, and one for the core itself (its counters). Every document carries ``core_id``, and every command on
the collection selects one core first: the collection may be sharded on ``{core_id: 1, _id: 1}``
(``docs/sharding.md``), and each read and write then goes to the shard holding that core. Ids are strings,
so a point read is an ``_id`` lookup on every server: a JSON array of the kind's letter and the values that
name the document (unambiguous whatever the ids hold).

- a slice: ``["s", unit id, slice id]``;
- a topic node: ``["n", core id, path]`` (the path as the extractor gave it, the key topics are matched by);
- the core: ``["c", core id]``.

Counters and numbers are read through :func:`stored_count`: a value of another type is none, never an error.
"""

from __future__ import annotations

import json

SLICE = "slice"
NODE = "node"
CORE = "core"


def slice_key(unit_id: str, slice_id: str) -> str:
    return _key("s", unit_id, slice_id)


def node_key(core_id: str, path: str) -> str:
    return _key("n", core_id, path)


def core_key(core_id: str) -> str:
    return _key("c", core_id)


def node_ids(core_id: str) -> dict[str, str]:
    """A filter on ``_id`` matching every node id of ``core_id``, whatever else a node document holds or
    lost: the ids that start with ``["n",<core id>,``, as a range (with ``core_id``, a range of the
    ``{core_id, _id}`` index on every server: ``,`` and the next character, ``-``, bound it)."""
    prefix = _key("n", core_id)[:-1] + ","
    return {"$gte": prefix, "$lt": prefix[:-1] + "-"}


def _key(*parts: str) -> str:
    return json.dumps(list(parts), ensure_ascii=False, separators=(",", ":"))


_KINDS = {"s": SLICE, "n": NODE, "c": CORE}


def key_kind(key: object) -> str | None:
    """The kind of document ``key`` names (:data:`SLICE`, :data:`NODE`, :data:`CORE`), or None for an id
    of no kind (another tool's document)."""
    parts = _parts(key)
    return _KINDS.get(parts[0]) if parts else None


def node_path(key: object) -> str | None:
    """The path a node's id names, or None when ``key`` is not a node's id."""
    parts = _parts(key)
    return parts[2] if parts and parts[0] == "n" and len(parts) == 3 else None


def _parts(key: object) -> list[str] | None:
    if not isinstance(key, str) or not key.startswith("["):
        return None
    try:
        parts = json.loads(key)
    except ValueError:
        return None
    return parts if isinstance(parts, list) and parts and all(isinstance(p, str) for p in parts) else None


def stored_count(value: object) -> int | None:
    """A counter or number as stored: an int, or None where it is missing or of another type (damage, or
    another tool's write), so a reader never raises on it and ``check`` reports it."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


__all__ = [
    "CORE",
    "NODE",
    "SLICE",
    "core_key",
    "key_kind",
    "node_key",
    "node_ids",
    "node_path",
    "slice_key",
    "stored_count",
]

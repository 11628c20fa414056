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


def _key(*parts: str) -> str:
    return json.dumps(list(parts), ensure_ascii=False, separators=(",", ":"))


__all__ = ["CORE", "NODE", "SLICE", "core_key", "node_key", "slice_key"]

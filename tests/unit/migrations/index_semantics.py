"""MongoDB's documented index-key rules, as an oracle for what a real server's unique index refuses.

mongomock does not enforce unique multikey indexes and applies partial filters only in part, and SecantusDB
does not give a missing array-element field a null key; so the index definitions are also checked against the
rules of MongoDB's manual ("Multikey Indexes", "Partial Indexes", "Unique Indexes"):

- a document is indexed only if it matches the index's partial filter (a filter on a document, not on array
  elements: ``{"a.b": {"$exists": true}}`` holds when any element of ``a`` has ``b``);
- a path ``a.b`` through an array of subdocuments gives one key per element: the element's ``b``, or null when
  the element has none; a path ending in an array gives one key per element, and an empty array the single key
  ``undefined``;
- a unique index refuses two documents sharing a key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NULL = ("null",)
UNDEFINED = ("undefined",)


def keys(document: Mapping[str, Any], path: str) -> set[Any]:
    """The index keys of ``document`` for the single-field index on ``path``."""
    return _keys(document, path.split("."))


def _keys(value: Any, parts: list[str]) -> set[Any]:
    if not parts:
        if isinstance(value, list):
            return {_scalar(v) for v in value} if value else {UNDEFINED}
        return {_scalar(value)}
    if isinstance(value, list):
        found: set[Any] = set()
        for element in value:
            found |= _keys(element, parts) if isinstance(element, Mapping) else {NULL}
        return found or {UNDEFINED}
    if isinstance(value, Mapping) and parts[0] in value:
        return _keys(value[parts[0]], parts[1:])
    return {NULL}


def _scalar(value: Any) -> Any:
    return NULL if value is None else value


def matches(document: Mapping[str, Any], partial_filter: Mapping[str, Any]) -> bool:
    """The partial-filter operators the library's indexes use: ``$exists: true`` and ``$type: "string"``."""
    for path, condition in partial_filter.items():
        values = _values(document, path.split("."))
        if condition == {"$exists": True}:
            if not values:
                return False
        elif condition == {"$type": "string"}:
            flat = [v for value in values for v in (value if isinstance(value, list) else [value])]
            if not any(isinstance(v, str) for v in flat):
                return False
        else:
            raise ValueError(f"the oracle knows no partial filter {condition!r}")
    return True


def _values(value: Any, parts: list[str]) -> list[Any]:
    if not parts:
        return [value]
    if isinstance(value, list):
        return [found for element in value for found in _values(element, parts)]
    if isinstance(value, Mapping) and parts[0] in value:
        return _values(value[parts[0]], parts[1:])
    return []


def collisions(documents: list[Mapping[str, Any]], index: Mapping[str, Any]) -> list[tuple[Any, Any, Any]]:
    """(key, first _id, second _id) for every key two indexed documents share under a unique ``index``."""
    ((path, _),) = list(index["key"].items())
    partial = index.get("partialFilterExpression")
    owner: dict[Any, Any] = {}
    found: list[tuple[Any, Any, Any]] = []
    for document in documents:
        if partial is not None and not matches(document, partial):
            continue
        for key in keys(document, path):
            if key in owner and owner[key] != document["_id"]:
                found.append((key, owner[key], document["_id"]))
            owner.setdefault(key, document["_id"])
    return found

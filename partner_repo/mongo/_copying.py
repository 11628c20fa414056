"""Copying stored documents out of the in-memory backend, as a server's reply would carry them.

mongomock copies a document field by field through a general projector and then walks it again to make its
times aware: per element of every array, in Python. A read that wants whole documents or an inclusion of
plain paths (``terms``, ``marks.bread``) needs neither: :func:`projected` copies just those fields, an array
of strings in one step, and makes times aware on the way. A projection it does not read exactly (an
exclusion, an operator, a path through an array) returns None, and the caller uses mongomock's.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

Tree = dict[str, Any]
"""A projection's paths as a tree: a field maps to True (the whole field) or to the tree of its fields."""

_IMMUTABLE = (str, int, float, bool, bytes, type(None))
_FLAT = frozenset(_IMMUTABLE)
"""Element types of an array copied in one step (immutable: the copy may share them)."""


class _Unread(Exception):
    """A projection :func:`projected` does not read exactly."""


def projection_tree(projection: Any) -> Tree | None:
    """The inclusion paths of ``projection`` as a tree (``{}`` copies the whole document), or None when it is
    not a plain inclusion (``_id`` follows the projection: included unless it says 0)."""
    if projection is None:
        return {}
    if not isinstance(projection, Mapping) or not projection:
        return None
    tree: Tree = {}
    for path, value in projection.items():
        if type(value) not in (int, bool) or not isinstance(path, str) or path.startswith("$"):
            return None
        if not value:
            if path != "_id":
                return None
            continue
        _add(tree, path.split("."))
    if "_id" not in projection or projection["_id"]:
        tree.setdefault("_id", True)
    return tree or None


def _add(tree: Tree, parts: list[str]) -> None:
    head, rest = parts[0], parts[1:]
    if tree.get(head) is True:
        return
    if not rest:
        tree[head] = True
    else:
        _add(tree.setdefault(head, {}), rest)


def projected(document: Mapping[str, Any], tree: Tree, aware: bool) -> dict[str, Any] | None:
    """A copy of ``document`` with only the fields of ``tree`` (all of them for ``{}``), in the document's
    order, times made aware when ``aware``; None when a path crosses an array (mongomock's projector then)."""
    try:
        return _copy_fields(document, tree, aware) if tree else _copied(document, aware)
    except _Unread:
        return None


def _copy_fields(document: Mapping[str, Any], tree: Tree, aware: bool) -> dict[str, Any]:
    found: dict[str, Any] = {}
    names = [name for name in document if name in tree] if len(tree) < len(document) else list(document)
    for name in names:
        wanted, value = tree.get(name), document[name]
        if wanted is None:
            continue
        if wanted is True:
            found[name] = _copied(value, aware)
        elif isinstance(value, Mapping):
            found[name] = _copy_fields(value, wanted, aware)
        elif isinstance(value, list):
            raise _Unread(name)  # a path through an array: each element projected, mongomock does it
    return found


def _copied(value: Any, aware: bool) -> Any:
    if type(value) is list:  # first: most of what a read copies is arrays (terms, paths, days)
        return _copied_list(value, aware)
    if isinstance(value, _IMMUTABLE):
        return value
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if aware and value.tzinfo is None else value
    if isinstance(value, list):
        return _copied_list(value, aware)
    if isinstance(value, Mapping):
        return {name: _copied(item, aware) for name, item in value.items()}
    return copy.deepcopy(value)


def _copied_list(value: list[Any], aware: bool) -> list[Any]:
    """A copy of an array: in one step when its elements are immutable (the copy may share them), which
    for an array of strings ``str.join`` tells at C speed (it refuses any other element)."""
    try:
        "".join(value)
    except TypeError:
        if set(map(type, value)) <= _FLAT:
            return list(value)
        return [_copied(item, aware) for item in value]
    return list(value)


__all__ = ["projected", "projection_tree"]

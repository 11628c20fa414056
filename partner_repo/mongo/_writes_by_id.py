"""Replacing or updating one document by ``_id`` in the embedded backend in one pass.

mongomock's ``replace_one`` walks a replacement four times before storing it: it normalizes its dates
(``patch_datetime_awareness_in_document``, which rebuilds every dict and list), deep-copies it field by field,
and, for an upsert, normalizes it again and validates it while inserting. Its ``update_one`` deep-copies the
document it updates to tell whether it changed. A recall index write (a slice's document of a few hundred
values, then the counters it moves) pays that on every slice. :func:`replace_by_id` and :func:`update_by_id`
do the same writes with one walk over what they store (:func:`stored_form`: dates as mongomock stores them,
every container copied) and the same checks, for the filters such writes use: an equality on a string or
integer ``_id``, with any other conditions. Anything else returns None and goes through mongomock's path.

What they keep of MongoDB's (and mongomock's) semantics: the filter is tested on the one document that
``_id`` names. A replacement of a match keeps its ``_id`` (an ``_id`` in the replacement must equal it); an
update applies ``$set``, ``$setOnInsert`` (on insert only), ``$inc``, ``$max`` and ``$min`` to top-level
fields (numbers only for the last three, as MongoDB requires; anything else, or a field named twice, goes
to mongomock). No match with ``upsert`` inserts under the filter's ``_id``: the replacement whole, or the
filter's equalities with the update applied; that fails with a duplicate key error (code 11000) when a
document with that ``_id`` exists but did not match. Unique indexes are enforced with the same rollback;
``nModified`` counts a write that changed the document. The stored document is a new dict in the same place
of the collection's natural order (mongomock changes the stored dict in place; nothing outside the store
holds it: every read copies), and unchanged values are shared with the one it replaces.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from bson import BSON
from mongomock import DuplicateKeyError, helpers
from mongomock.collection import _validate_data_fields

_KEPT = (str, int, float, bool, bytes, type(None))
"""Values stored as they are given (immutable, and never changed by mongomock's date normalization)."""


def replace_by_id(collection: Any, spec: Any, replacement: Any, upsert: bool) -> dict[str, Any] | None:
    """Replace the document ``spec`` matches in ``collection`` (an indexed mongomock collection) with
    ``replacement``; mongomock's raw update result, or None when ``spec`` does not name one ``_id`` this
    path takes (the caller then uses mongomock's ``replace_one``). ``replacement`` is already validated
    as a replacement (``validate_ok_for_replace``)."""
    if not isinstance(spec, Mapping) or not isinstance(replacement, Mapping):
        return None
    _id = spec.get("_id")
    if type(_id) not in (str, int) or any(str(name).startswith("$") for name in replacement):
        return None  # mongomock's path: another _id, or its own error for an operator in a replacement
    if "_id" in replacement and (type(replacement["_id"]) is not type(_id) or replacement["_id"] != _id):
        return None  # mongomock's path: its error for a changed _id
    spec = helpers.patch_datetime_awareness_in_document(spec)  # type: ignore[no-untyped-call]
    body = {name: stored_form(value) for name, value in replacement.items() if name != "_id"}
    matched = next(iter(collection._iter_documents(spec)), None)
    document: dict[str, Any] = _like(matched, {"_id": _id, **body})
    if matched is None:
        if not upsert:
            return _result(collection, 0, 0, None)
        collection._expand_dots(dict(spec))  # mongomock's upsert rejects conflicting filter paths first
        return _inserted(collection, document)
    _validate_data_fields(body)  # type: ignore[no-untyped-call] # what mongomock checks of a replacement
    BSON.encode(body)
    store = collection._store
    store[_id] = document  # an equal document too: mongomock rewrites it (the replacement's field order)
    if document == matched:
        return _result(collection, 1, 0, None)
    try:
        collection._ensure_uniques(document)
    except DuplicateKeyError:
        store[_id] = matched  # as mongomock rolls back
        raise
    return _result(collection, 1, 1, None)


def update_by_id(collection: Any, spec: Any, update: Any, upsert: bool) -> dict[str, Any] | None:
    """Apply ``update`` to the document ``spec`` matches in ``collection`` (an indexed mongomock
    collection); mongomock's raw update result, or None when this path does not take ``spec`` or
    ``update`` (see the module). ``update`` is already validated as an update (``validate_ok_for_update``)."""
    if not isinstance(spec, Mapping) or type(spec.get("_id")) not in (str, int) or not _plain_update(update):
        return None
    spec = helpers.patch_datetime_awareness_in_document(spec)  # type: ignore[no-untyped-call]
    matched = next(iter(collection._iter_documents(spec)), None)
    if matched is None and not upsert:
        return _result(collection, 0, 0, None)
    if matched is None:
        expanded = collection._expand_dots(dict(spec))
        base, _ = collection._discard_operators(expanded)
        if not isinstance(base, Mapping):
            return None
        document = {name: stored_form(value) for name, value in base.items()}
    else:
        document = matched.copy()
    if not _numbers_where_needed(document, update):
        return None  # mongomock's path (and its error, or its answer) for arithmetic on a non-number
    _apply(document, update, inserting=matched is None)
    if matched is None:
        return _inserted(collection, document)
    store = collection._store
    store[document["_id"]] = document  # an equal document too: mongomock keeps what was set (0.0 over 0)
    if document == matched:
        return _result(collection, 1, 0, None)
    try:
        collection._ensure_uniques(document)
    except DuplicateKeyError:
        store[document["_id"]] = matched  # as mongomock rolls back
        raise
    return _result(collection, 1, 1, None)


_NUMERIC = frozenset({"$inc", "$max", "$min"})
_TAKEN = frozenset({"$set", "$setOnInsert"}) | _NUMERIC


def _plain_update(update: Any) -> bool:
    """Whether ``update`` only sets or counts top-level fields other than ``_id``, each named once, with
    numbers for ``$inc``, ``$max`` and ``$min``."""
    if not isinstance(update, Mapping) or not update or not set(update) <= _TAKEN:
        return False
    names: list[Any] = []
    for operator, fields in update.items():
        if not isinstance(fields, Mapping) or not fields:
            return False
        for name, value in fields.items():
            if type(name) is not str or not name or name == "_id" or "." in name or "\0" in name:
                return False
            if name.startswith("$") or (operator in _NUMERIC and not _number(value)):
                return False
        names.extend(fields)
    return len(names) == len(set(names))


def _number(value: Any) -> bool:
    """A number MongoDB's arithmetic and comparison treat as this path does (no NaN, no bool)."""
    return type(value) in (int, float) and value == value


def _numbers_where_needed(document: Mapping[str, Any], update: Mapping[str, Any]) -> bool:
    return all(
        name not in document or _number(document[name])
        for operator in _NUMERIC.intersection(update)
        for name in update[operator]
    )


def _apply(document: dict[str, Any], update: Mapping[str, Any], inserting: bool) -> None:
    """``update``'s operators, in their order (mongomock's: a new field goes last)."""
    for operator, fields in update.items():
        for name, value in fields.items():
            if operator == "$set" or (operator == "$setOnInsert" and inserting):
                BSON.encode({name: value})  # mongomock's check of a value it sets
                document[name] = stored_form(value)
            elif operator == "$inc":
                document[name] = document.get(name, 0) + value
            elif operator in ("$max", "$min") and _beyond(document.get(name), value, operator):
                document[name] = value


def _beyond(current: Any, value: Any, operator: str) -> bool:
    """Whether ``$max``/``$min`` sets ``value`` over ``current`` (a number, or None for a missing field:
    :func:`_numbers_where_needed` lets no stored null through)."""
    if current is None:
        return True
    return bool(value > current) if operator == "$max" else bool(value < current)


def _inserted(collection: Any, document: dict[str, Any]) -> dict[str, Any]:
    """Insert ``document`` (no document matched): a duplicate key when its ``_id`` is taken."""
    if not all(isinstance(name, str) for name in document):
        raise ValueError("Document keys must be strings")
    _validate_data_fields(document)  # type: ignore[no-untyped-call] # mongomock's checks of an insert
    BSON.encode(document)
    store = collection._store
    if document["_id"] in store:
        raise DuplicateKeyError("E11000 Duplicate Key Error", 11000)
    document = OrderedDict(document)  # what mongomock's upsert stores (see _like)
    store[document["_id"]] = document
    try:
        collection._ensure_uniques(document)
    except DuplicateKeyError:
        del store[document["_id"]]
        raise
    return _result(collection, 1, 1, document["_id"])


def _like(matched: Any, document: dict[str, Any]) -> dict[str, Any]:
    """``document`` as the same kind of dict as the one it replaces. mongomock stores an upserted document as
    an ``OrderedDict`` (an inserted one as a dict) and changes it in place, so whether a replacement that
    only reorders fields counts as modified depends on it (an ``OrderedDict`` compares in order, as MongoDB
    compares documents); keeping the kind keeps mongomock's answer."""
    return OrderedDict(document) if isinstance(matched, OrderedDict) else document


def _result(collection: Any, matched: int, modified: int, upserted: Any) -> dict[str, Any]:
    """mongomock's raw update result (what ``UpdateResult`` reads)."""
    existing = upserted is None and matched > 0
    return {
        "connectionId": collection.database.client._id,
        "err": None,
        "n": matched,
        "nModified": modified if existing else 0,
        "ok": 1,
        "upserted": upserted,
        "updatedExisting": existing,
    }


def stored_form(value: Any) -> Any:
    """``value`` as mongomock stores it, in one walk: what ``patch_datetime_awareness_in_document`` then a
    deep copy give (dicts and lists rebuilt, tuples as lists, dates naive UTC at the millisecond)."""
    if isinstance(value, _KEPT):
        return value
    if isinstance(value, OrderedDict):
        return OrderedDict((name, stored_form(item)) for name, item in value.items())
    if isinstance(value, dict):
        return {name: stored_form(item) for name, item in value.items()}
    if isinstance(value, list | tuple):
        return [stored_form(item) for item in value]
    if isinstance(value, datetime):
        plain = value - value.utcoffset() if value.tzinfo else value  # type: ignore[operator]
        return plain.replace(tzinfo=None, microsecond=value.microsecond // 1000 * 1000)
    return copy.deepcopy(helpers.patch_datetime_awareness_in_document(value))  # type: ignore[no-untyped-call]


__all__ = ["replace_by_id", "stored_form", "update_by_id"]

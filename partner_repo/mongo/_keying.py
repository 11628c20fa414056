"""How the in-memory backend keys documents for its indexes: one key per value MongoDB finds equal.

:mod:`partner_repo.mongo._mongomock_store` keeps, for each index a collection declares, the documents of each
key of its first field (and of each pair with its second). This module says what a key is (:func:`key_of`),
which keys a document gives an index (an array one per element, as a multikey index), and which keys a
filter's condition names (an equality, an ``$in``, a range on the second field). A key only narrows the
documents the matcher tests: two values with one key that MongoDB tells apart cost a test, never an answer.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

UNKEYABLE = object()
"""A value an index cannot key (its documents are candidates of every lookup on the index)."""
RANGES = frozenset({"$gt", "$gte", "$lt", "$lte"})
MISSING = ("$missing",)


def key_of(value: Any) -> Any:
    """A hashable key equal for values MongoDB's equality finds equal (numbers by value, datetimes at the
    stored millisecond in UTC, embedded documents field by field in order), or :data:`UNKEYABLE`.

    A boolean is a type of its own for MongoDB (``true`` is not ``1``), so its key is tagged. Values that
    share a key and that MongoDB tells apart (a string and the bytes of it) cost a test of the candidates,
    never a wrong answer; a lookup answers exactly only for strings and numbers (:meth:`Index.exact`)."""
    if type(value) is str:  # first: most keys are (a slice's terms, ids, paths)
        return value
    if isinstance(value, bool):
        return ("$bool", value)
    if isinstance(value, str | int | bytes):
        return value
    if isinstance(value, float):
        return UNKEYABLE if math.isnan(value) else value
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return ("$date", value.replace(microsecond=value.microsecond // 1000 * 1000))
    if isinstance(value, Mapping):
        items = tuple((str(name), key_of(part)) for name, part in value.items())
        return UNKEYABLE if any(part is UNKEYABLE for _, part in items) else ("$doc", items)
    try:
        hash(value)
    except TypeError:
        return UNKEYABLE
    return UNKEYABLE if value is None or isinstance(value, list | tuple) else value


def _element_keys(value: Any) -> list[Any]:
    """The keys a document's value gives an index: each element of an array (an empty array none)."""
    if isinstance(value, list):
        return [key_of(element) for element in value]
    return [key_of(value)]


class Index:
    """The keys of one declared index: its first field's values, and pairs with its second's."""

    def __init__(self, first: str, second: str | None) -> None:
        self.first = first
        self.second = second
        self.by_first: dict[Any, set[Any]] = {}
        self.by_pair: dict[Any, dict[Any, set[Any]]] = {}
        self.ordered: dict[Any, dict[str, list[Any]]] = {}
        """For each first value, its second values sorted by kind (numbers, strings, dates): ranges bisect."""
        self.loose: set[Any] = set()
        """Documents whose value this index cannot key: candidates of every lookup on it."""

    def entries(self, document: Mapping[str, Any]) -> list[tuple[Any, Any]]:
        if self.first not in document:
            return []
        firsts = _element_keys(document[self.first])
        if self.second is None:
            return [(first, MISSING) for first in firsts]
        value = document.get(self.second, MISSING)
        seconds = [MISSING] if value is MISSING else _element_keys(value) or [MISSING]
        return [(first, second) for first in firsts for second in seconds]

    def add(self, key: Any, entries: Iterable[tuple[Any, Any]]) -> None:
        # no setdefault(..., set()): a multikey array (a slice's terms) adds dozens of entries of one first
        # value, and each would build a set to throw away
        for first, second in entries:
            if first is UNKEYABLE or second is UNKEYABLE:
                self.loose.add(key)
                continue
            keys = self.by_first.get(first)
            if keys is None:
                keys = self.by_first[first] = set()
            keys.add(key)
            if self.second is None:
                continue
            pairs = self.by_pair.get(first)
            if pairs is None:
                pairs = self.by_pair[first] = {}
            held = pairs.get(second)
            if held is None:
                held = pairs[second] = set()
                kind = _kind(second)
                if kind is not None:
                    bisect.insort(self.ordered.setdefault(first, {}).setdefault(kind, []), second)
            held.add(key)

    def remove(self, key: Any, entries: Iterable[tuple[Any, Any]]) -> None:
        self.loose.discard(key)
        for first, second in entries:
            if first is UNKEYABLE or second is UNKEYABLE:
                continue
            _discard(self.by_first, first, key)
            pairs = self.by_pair.get(first)
            if pairs is not None and second in pairs:
                _discard(pairs, second, key)
                if second not in pairs:
                    self._unorder(first, second)
                if not pairs:
                    del self.by_pair[first]

    def exact(self, query: Mapping[str, Any]) -> bool:
        """Whether :meth:`lookup`'s documents all match ``query``: it names this index's fields only, its
        values are strings (a range on the second field: numbers), and no document is unkeyed. Strings are
        equal exactly when their keys are, and numbers compare as MongoDB compares them."""
        if self.loose or not set(query) <= {self.first, self.second} or self.first not in query:
            return False
        firsts = point_keys(query[self.first])
        if firsts is None or not all(type(key) is str for key in firsts):
            return False
        if self.second is None or self.second not in query:
            return True
        condition = query[self.second]
        seconds = point_keys(condition)
        if seconds is not None:
            return all(type(key) is str for key in seconds)
        if not isinstance(condition, Mapping) or not _is_range(condition):
            return False
        return {_kind(key_of(bound)) for bound in condition.values()} == {"number"}

    def _within(self, first: Any, condition: Mapping[str, Any]) -> list[Any] | None:
        """The second values of ``first`` a range keeps, or None when its bounds are not of one kind."""
        kinds = {_kind(key_of(bound)) for bound in condition.values()}
        if len(kinds) != 1 or None in kinds:
            return None
        values = self.ordered.get(first, {}).get(kinds.pop() or "", [])
        return values[_bounds(values, condition)]

    def _unorder(self, first: Any, second: Any) -> None:
        kind = _kind(second)
        values = self.ordered.get(first, {}).get(kind or "")
        if values is not None:
            at = bisect.bisect_left(values, second)
            if at < len(values) and values[at] == second:
                del values[at]

    def narrows(self, query: Mapping[str, Any]) -> int:
        """How many of this index's fields narrow ``query``: 0 (the first is not an equality or ``$in``),
        1 (the first only), 2 (the second too: an equality, ``$in`` or range)."""
        if point_keys(query.get(self.first, MISSING)) is None:
            return 0
        if self.second is None or self.second not in query:
            return 1
        condition = query[self.second]
        if point_keys(condition) is not None or (isinstance(condition, Mapping) and _is_range(condition)):
            return 2
        return 1

    def lookup(self, query: Mapping[str, Any]) -> set[Any] | None:
        """The documents that may match ``query`` by this index, or None when it cannot narrow them."""
        firsts = point_keys(query.get(self.first, MISSING))
        if firsts is None:
            return None
        found: set[Any] = set(self.loose)
        condition = query.get(self.second, MISSING) if self.second is not None else MISSING
        seconds = point_keys(condition)
        for first in firsts:
            if seconds is not None:
                pairs = self.by_pair.get(first, {})
                for second in seconds:
                    found.update(pairs.get(second, ()))
            elif isinstance(condition, Mapping) and _is_range(condition):
                within = self._within(first, condition)
                if within is None:
                    return None
                pairs = self.by_pair.get(first, {})
                for second in within:
                    found.update(pairs.get(second, ()))
            else:
                found.update(self.by_first.get(first, ()))
        return found


def _kind(key: Any) -> str | None:
    """Which sorted list a key goes in: a range compares numbers with numbers, strings with strings, dates
    with dates (MongoDB's comparison of different types never satisfies a range)."""
    if isinstance(key, bool):
        return None
    if isinstance(key, int | float):
        return "number"
    if isinstance(key, str):
        return "string"
    if isinstance(key, tuple) and key[:1] == ("$date",):
        return "date"
    return None


def _discard(index: dict[Any, set[Any]], value: Any, key: Any) -> None:
    keys = index.get(value)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del index[value]


def point_keys(condition: Any) -> list[Any] | None:
    """The keys an equality or ``$in`` condition names, or None for any other condition (or an unkeyable
    value: a null matches missing fields, an array matches itself whole)."""
    if condition is MISSING:
        return None
    if isinstance(condition, Mapping) and any(str(name).startswith("$") for name in condition):
        if set(condition) == {"$eq"}:
            values = [condition["$eq"]]
        elif set(condition) == {"$in"} and isinstance(condition["$in"], list | tuple):
            values = list(condition["$in"])
        else:
            return None
    else:
        values = [condition]
    keys = [key_of(value) for value in values]
    return None if any(key is UNKEYABLE for key in keys) else keys


def _is_range(condition: Mapping[str, Any]) -> bool:
    return bool(condition) and set(condition) <= RANGES


def _bounds(values: list[Any], condition: Mapping[str, Any]) -> slice:
    """The slice of sorted ``values`` a range keeps."""
    low, high = 0, len(values)
    for operator, bound in condition.items():
        at = key_of(bound)
        if operator == "$gt":
            low = max(low, bisect.bisect_right(values, at))
        elif operator == "$gte":
            low = max(low, bisect.bisect_left(values, at))
        elif operator == "$lt":
            high = min(high, bisect.bisect_left(values, at))
        else:
            high = min(high, bisect.bisect_right(values, at))
    return slice(low, max(low, high))


__all__ = ["MISSING", "UNKEYABLE", "Index", "key_of", "point_keys"]

"""What an aggregation's first stages let the in-memory backend's read do itself.

A server starts a pipeline whose first stage is a ``$match`` with a query through its indexes, stops that
query at a ``$limit`` that follows, and fetches only the fields the rest of the pipeline reads (the
manual's "Aggregation Pipeline Optimization": ``$match`` and ``$limit`` move into the query, and projection
optimization keeps only the fields needed). The embedded backend does the same with :func:`plan`: the
``$match`` (and a ``$limit`` right after it) become the read, and when the next stage is a ``$project``,
``$group`` or ``$count`` whose inputs can be named, only those fields are copied out of the store. Every
later stage runs on what was read as it would have, so the answer is the pipeline's own either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

READING_STAGES = frozenset({"$match", "$project", "$sort", "$limit", "$skip", "$count", "$group", "$unwind"})
"""Stages that build their output without changing the documents they are given (mongomock's ``$addFields``
and ``$set`` change nested fields of their input, ``$lookup`` sets a field on it)."""


@dataclass(frozen=True)
class Plan:
    """A pipeline split at its read: the filter, how many documents at most (0: all), the projection the
    read may apply (None: whole documents), the stages that run on what it reads, and whether the read must
    copy the documents (False: every later stage only reads them, so only the answer is copied)."""

    filter: Mapping[str, Any]
    limit: int
    projection: dict[str, int] | None
    rest: list[Mapping[str, Any]]
    copy: bool = True


def plan(pipeline: Sequence[Mapping[str, Any]]) -> Plan | None:
    """The read a pipeline starts with (None when its first stage is not a ``$match`` alone); consecutive
    ``$match`` stages at its head are one filter (MongoDB coalesces them the same way)."""
    if not pipeline or set(pipeline[0]) != {"$match"}:
        return None
    chosen, rest = dict(pipeline[0]["$match"]), list(pipeline[1:])
    while rest and set(rest[0]) == {"$match"} and not set(rest[0]["$match"]) & set(chosen):
        chosen.update(rest[0]["$match"])
        rest = rest[1:]
    limit = 0
    if rest and set(rest[0]) == {"$limit"} and _count(rest[0]["$limit"]):
        limit = int(rest[0]["$limit"])
        rest = rest[1:]
    projection = needed(rest[0]) if rest else None
    if rest and _plain_inclusion(rest[0]):
        projection, rest = dict(rest[0]["$project"]), rest[1:]  # the read applies it exactly
    copy = not rest or not reads_only(rest)
    return Plan(filter=chosen, limit=limit, projection=projection, rest=rest, copy=copy)


def reads_only(stages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether ``stages`` only read their input (:data:`READING_STAGES`, ``$facet`` of such) and compare no
    date the pipeline gives (the stored documents' dates are not yet made aware)."""
    for stage in stages:
        name, spec = next(iter(stage.items()))
        if name == "$facet" and isinstance(spec, Mapping):
            if not all(reads_only(branch) for branch in spec.values()):
                return False
        elif name not in READING_STAGES or _dated(spec):
            return False
    return True


def _dated(value: Any) -> bool:
    if isinstance(value, datetime):
        return True
    if isinstance(value, Mapping):
        return any(_dated(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_dated(item) for item in value)
    return False


def _plain_inclusion(stage: Mapping[str, Any]) -> bool:
    """A ``$project`` of fields to keep (``1``), ``_id`` perhaps left out (``0``): what a read's projection
    does itself."""
    spec = stage.get("$project")
    if set(stage) != {"$project"} or not isinstance(spec, Mapping) or not spec:
        return False
    values = [(field, value) for field, value in spec.items()]
    if not all(type(value) in (int, bool) and (value or field == "_id") for field, value in values):
        return False
    return any(value for _, value in values)


def needed(stage: Mapping[str, Any]) -> dict[str, int] | None:
    """The fields ``stage`` reads of its input documents, as an inclusion projection, or None when they
    cannot be named (an exclusion, ``$$ROOT``, a stage other than ``$project``, ``$group`` or ``$count``)."""
    name, spec = next(iter(stage.items()))
    paths: set[str] | None
    if name == "$count":
        paths = set()
    elif name == "$project" and isinstance(spec, Mapping):
        paths = _projected(spec)
    elif name == "$group" and isinstance(spec, Mapping):
        paths = _references(list(spec.values()))
    else:
        return None
    if paths is None:
        return None
    return dict.fromkeys(sorted(_outermost(paths | {"_id"})), 1)


def _projected(spec: Mapping[str, Any]) -> set[str] | None:
    paths: set[str] = set()
    for field, value in spec.items():
        if isinstance(value, Mapping) and not all(str(name).startswith("$") for name in value):
            return None  # a nested projection ({a: {b: 1}}): left to the stage
        if value is True or (type(value) is int and value == 1):
            paths.add(field)
        elif value is False or (type(value) is int and value == 0):
            if field != "_id":
                return None  # an exclusion keeps every other field
        else:
            found = _references(value)
            if found is None:
                return None
            paths |= found
    return paths


def _references(expression: Any) -> set[str] | None:
    """The field paths an expression reads (``"$a.b"`` reads ``a.b``), or None when it reads the whole
    document (``$$ROOT``, ``$$CURRENT``)."""
    if isinstance(expression, str):
        if expression.startswith("$$"):
            variable = expression[2:].split(".", 1)[0]
            return None if variable in ("ROOT", "CURRENT") else set()
        return {expression[1:]} if expression.startswith("$") and len(expression) > 1 else set()
    parts: list[Any]
    if isinstance(expression, Mapping):
        parts = [value for name, value in expression.items() if name != "$literal"]
    elif isinstance(expression, list | tuple):
        parts = list(expression)
    else:
        return set()
    found: set[str] = set()
    for part in parts:
        inner = _references(part)
        if inner is None:
            return None
        found |= inner
    return found


def _outermost(paths: set[str]) -> set[str]:
    """The paths without those another one contains (``a`` covers ``a.b``: a projection may not name both)."""
    return {path for path in paths if not any(path.startswith(other + ".") for other in paths)}


def _count(value: Any) -> bool:
    return type(value) is int and value > 0


__all__ = ["Plan", "needed", "plan"]

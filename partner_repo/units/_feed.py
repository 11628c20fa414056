"""What the rolling listener reads of ``memory_units``: fingerprints, outlines and the change-stream pipeline.

Units are also written by other tools (mongosh, Compass and mongoimport write ``ObjectId`` ids; a script may
store a slice that is not one). The listener must skip such a unit, not stop on it, so reading an outline
says precisely when a stored document cannot be read as a unit: :class:`~partner_repo.errors.UnreadableUnit`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from partner_repo.errors import UnreadableUnit
from partner_repo.models import MemorySlice
from partner_repo.mongo import DERIVED_PROJECTION, ReadConcern, slice_from_document
from partner_repo.validation import first_error

UnitFingerprint = tuple[Any, ...]
"""A unit's ``(version, message_count, slice_count, size_bytes)``: every write path changes it (the version
at least), so an unchanged fingerprint means an unchanged unit. No clock is involved."""

FINGERPRINT_FIELDS = ("version", "message_count", "slice_count", "size_bytes")

OUTLINE_PROJECTION: dict[str, Any] = {
    "core_id": 1,
    "slices": 1,
    **DERIVED_PROJECTION,
    **dict.fromkeys(FINGERPRINT_FIELDS, 1),
}
"""The slices and fingerprint, and what tells whether the unit still needs adopting (O(1) bytes more)."""


@dataclass(frozen=True)
class UnitOutline:
    """A unit's slices without its messages, and the fingerprint the unit had when they were read."""

    id: str
    core_id: str
    fingerprint: UnitFingerprint
    slices: tuple[MemorySlice, ...]


def fingerprint_of(document: Mapping[str, Any]) -> UnitFingerprint:
    return tuple(document.get(name) for name in FINGERPRINT_FIELDS)


def stored_id_problem(unit_id: object) -> str | None:
    """Why a stored ``_id`` cannot be a unit's (None when it can): units have non-blank string ids.

    Looser than :func:`partner_repo.validation.id_problem` on purpose: a stored id over the length limit
    stays readable."""
    if not isinstance(unit_id, str):
        return f"its _id is {type(unit_id).__name__} {unit_id!r}, not a string (written by another tool?)"
    if not unit_id.strip():
        return f"its _id {unit_id!r} is blank"
    return None


def outline_from(unit_id: str, document: Mapping[str, Any]) -> UnitOutline:
    """The outline of a stored (completed) unit, or :class:`UnreadableUnit` saying what is wrong with it."""
    core_id = document.get("core_id")
    if not isinstance(core_id, str) or not core_id.strip():
        raise UnreadableUnit(unit_id, f"its core_id is {core_id!r}, not a non-blank string")
    stored = document.get("slices")
    if stored is not None and not isinstance(stored, list):
        raise UnreadableUnit(unit_id, f"its slices are a {type(stored).__name__}, not an array")
    pieces: list[MemorySlice] = []
    for position, raw in enumerate(stored or []):
        if raw is None:
            continue
        try:
            piece = slice_from_document(raw)
        except ValidationError as exc:
            raise UnreadableUnit(unit_id, f"slice {position} is invalid: {first_error(exc)}") from exc
        if piece.id is not None:
            pieces.append(piece)
    return UnitOutline(
        id=unit_id, core_id=core_id, fingerprint=fingerprint_of(document), slices=tuple(pieces)
    )


def majority(collection: Any) -> Any:
    """``collection`` reading with ``readConcern: majority``.

    Left as it is where ``with_options`` does not give back the same kind of collection: mongomock-motor
    returns its synchronous core there, and the embedded backend is a single node whose every read is
    majority-committed anyway (test wrappers around a collection likewise keep what they wrap).
    """
    with_options = getattr(collection, "with_options", None)
    if with_options is None:
        return collection
    chosen = with_options(read_concern=ReadConcern("majority"))
    return chosen if type(chosen) is type(collection) else collection


_NOT_MESSAGES = {
    "$and": [
        {"$ne": ["$$this.k", "conversation_messages"]},
        {"$ne": [{"$indexOfBytes": ["$$this.k", "conversation_messages."]}, 0]},
    ]
}
WATCH_PIPELINE: list[dict[str, Any]] = [
    {"$project": {"fullDocument.conversation_messages": 0}},
    {
        "$set": {
            "updateDescription": {
                "$cond": {
                    "if": {"$eq": ["$operationType", "update"]},
                    "then": {
                        "$mergeObjects": [
                            "$updateDescription",
                            {
                                "updatedFields": {
                                    "$arrayToObject": {
                                        "$filter": {
                                            "input": {"$objectToArray": "$updateDescription.updatedFields"},
                                            "cond": _NOT_MESSAGES,
                                        }
                                    }
                                }
                            },
                        ]
                    },
                    "else": "$$REMOVE",
                }
            }
        }
    },
]
"""What :meth:`MemoryUnitRepository.watch` asks the server to strip from every event: the messages.

An insert or replace brings the whole unit (``fullDocument``); an append is a ``$push``, reported as
``updatedFields["conversation_messages.N"]`` per message (or the whole array when pushed into an empty one).
Left in, every listener would receive every message, and an append near 16 MiB would make an event over the
limit (``BSONObjectTooLarge``). A dotted key inside ``updatedFields`` cannot be named by ``$project``, so the
second stage rebuilds ``updatedFields`` without the keys that are, or start with, ``conversation_messages``
(update events only; others have no ``updateDescription``). The listener reads each slice's messages itself.
"""


__all__ = ["UnitFingerprint", "UnitOutline"]

"""How units are laid out in MongoDB, beyond the model: derived fields and BSON sizes.

A stored unit also carries ``message_count``, ``slice_count``, ``slice_ids`` and ``size_bytes``. The counts
and the size let ``append`` work in O(increment): it learns where the new messages start and exactly how many
bytes its push adds (an array element's key is its index, so the size depends on the counts) without reading
the messages. ``slice_ids`` holds the id of every slice and nothing else, so the index on it, which finds
the unit of a slice id, never holds a null key (an index on ``slices.id`` gives a slice without an id one).
Every write path keeps them exact (``save`` recomputes them, ``append`` increments them).

An erased unit leaves a *tombstone* under its id: ``{_id, erased_at}`` and nothing else (no ``core_id``, no
slices, so every query by core or slice id skips it). It keeps a stalled roller from creating the unit again
until a TTL index removes it (:data:`partner_repo.mongo._indexes.TOMBSTONE_RETENTION`); every reader treats it
as "no such unit" (:func:`is_tombstone`, :func:`live`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import bson
from pymongo.errors import BulkWriteError

from partner_repo.clock import to_utc_ms
from partner_repo.models import MemorySlice, MemoryUnit, Message, reading_stored

MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
"""MongoDB's document size limit."""

MAX_SUMMARY_BYTES = 256 * 1024
"""The longest slice summary stored (UTF-8 bytes); a longer one is cut, and the cut logged."""

ROLL_RESERVE_BYTES = 64 * 1024
"""Room a unit keeps for its own fields and one slice's, besides the messages and the summary."""

MAX_MESSAGE_BYTES = MAX_DOCUMENT_BYTES - ROLL_RESERVE_BYTES - MAX_SUMMARY_BYTES
"""The largest message (BSON bytes) the library accepts: one that fits a fresh unit with its slice, so every
message can be rolled, and a window never holds one that would wedge its core."""

DERIVED_FIELDS = ("message_count", "slice_count", "slice_ids", "size_bytes")

DERIVED_PROJECTION: dict[str, Any] = {
    "message_count": 1,
    "slice_count": 1,
    "size_bytes": 1,
    "slice_ids": {"$slice": -1},
}
"""Projects what :func:`has_derived_fields` looks at, in O(1) bytes (at most one slice id)."""

ERASED_AT = "erased_at"
"""The field that makes a document an erasure tombstone (in ``memory_units`` and ``listener_checkpoints``)."""

NOT_ERASED: dict[str, Any] = {ERASED_AT: {"$exists": False}}
"""The condition a filter adds to leave tombstones out."""

ERASED: dict[str, Any] = {ERASED_AT: {"$exists": True}}
"""The condition that selects tombstones only."""


def is_tombstone(document: Mapping[str, Any] | None) -> bool:
    """Whether a stored document (read with ``erased_at`` in its projection) is an erasure tombstone: an
    erased unit's, or the one a window clear leaves under the id of a session whose unit does not exist yet
    (it also holds ``taken_until``: the positions the clear erased; see :mod:`partner_repo.units._marks`)."""
    return document is not None and ERASED_AT in document


def live(query: Mapping[str, Any]) -> dict[str, Any]:
    """``query`` restricted to what is not a tombstone (for scans; a read by ``_id`` keeps its plain filter,
    which the server answers fastest, and projects :func:`marked` instead)."""
    return {**query, **NOT_ERASED}


def marked(projection: Mapping[str, Any]) -> dict[str, Any]:
    """``projection`` with ``erased_at``: :func:`is_tombstone` then recognizes a tombstone read through it."""
    return {**projection, ERASED_AT: 1}


DUPLICATE_KEY = 11000


async def insert_new(collection: Any, documents: list[dict[str, Any]]) -> list[Any]:
    """Insert ``documents`` in one unordered ``insert``, each unless its ``_id`` is taken; returns the taken
    ids (any other write error is raised). How tombstones are written: idempotently, in batches."""
    if not documents:
        return []
    try:
        await collection.insert_many(documents, ordered=False)
    except BulkWriteError as exc:
        errors = (exc.details or {}).get("writeErrors") or []
        if any(error.get("code") != DUPLICATE_KEY for error in errors) or not errors:
            raise
        return [documents[error["index"]]["_id"] for error in errors]
    return []


def slice_document(piece: MemorySlice) -> dict[str, Any]:
    return piece.model_dump(mode="python")


def unit_document(unit: MemoryUnit) -> dict[str, Any]:
    """The stored form of a (normalized) unit, with the derived fields filled in."""
    document: dict[str, Any] = unit.model_dump(by_alias=True, mode="python")
    document["slices"] = [slice_document(s) for s in unit.complete_slices()]
    document["message_count"] = len(unit.conversation_messages)
    document["slice_count"] = len(document["slices"])
    document["slice_ids"] = [s["id"] for s in document["slices"]]
    document["size_bytes"] = 0
    document["size_bytes"] = bson_size(document)
    return document


LARGE_UNIT_MESSAGES = 1_000
"""From this many messages on, a unit is built with the garbage collector paused: ``unit_from_document``."""


def unit_from_document(document: Mapping[str, Any]) -> MemoryUnit:
    """The validated model of a stored unit (ids over :data:`~partner_repo.models.MAX_ID_LENGTH` are read as
    they are: data other tools wrote stays readable, and ``check`` reports it).

    Building a large unit allocates thousands of pydantic objects in one synchronous call; they are all live,
    yet each allocation burst triggers collector passes that rescan them (the dominant cost of a 5,000-message
    ``get``). The collector is paused for that call only when the unit is large, and restored (only if it was
    on) even when validation fails. Validation itself is unchanged; nothing awaits while it is paused.
    """
    messages = document.get("conversation_messages")
    if not isinstance(messages, list) or len(messages) < LARGE_UNIT_MESSAGES or not gc.isenabled():
        with reading_stored():
            unit: MemoryUnit = MemoryUnit.model_validate(document)
        return unit
    gc.disable()
    try:
        with reading_stored():
            large: MemoryUnit = MemoryUnit.model_validate(document)
    finally:
        gc.enable()
    return large


def stored_messages(document: Mapping[str, Any]) -> list[Message]:
    """The messages of a stored unit read with any projection of ``conversation_messages`` (none: empty)."""
    return [Message.model_validate(m) for m in document.get("conversation_messages") or []]


def slice_from_document(document: Mapping[str, Any]) -> MemorySlice:
    with reading_stored():
        return MemorySlice.model_validate(document)


def has_derived_fields(document: Mapping[str, Any]) -> bool:
    """Whether a stored unit carries every derived field (units written by other tools may not)."""
    return all(field in document for field in DERIVED_FIELDS)


def bson_size(document: Mapping[str, Any]) -> int:
    return len(bson.encode(document))


def array_elements_size(elements: Iterable[Mapping[str, Any]], first_index: int) -> int:
    """Bytes that pushing ``elements`` onto an array of ``first_index`` elements adds (type, key, document).

    Inserting at a ``$position`` adds the same bytes: the elements after it are renumbered, so the new keys
    are still ``first_index`` and up.
    """
    total = 0
    for offset, element in enumerate(elements):
        total += 1 + len(str(first_index + offset)) + 1 + bson_size(element)
    return total


def append_size(
    message_documents: list[dict[str, Any]],
    message_count: int,
    slice_doc: Mapping[str, Any],
    slice_count: int,
) -> int:
    """Bytes one append adds to a unit of ``message_count`` messages and ``slice_count`` slices: the messages,
    the slice and its id in ``slice_ids`` (exact, so ``size_bytes`` stays exact)."""
    added = array_elements_size(message_documents, message_count)
    added += array_elements_size([slice_doc], slice_count)
    return added + string_elements_size([str(slice_doc["id"])], slice_count)


def messages_bytes(message_documents: Iterable[Mapping[str, Any]]) -> int:
    """The BSON bytes of messages in their stored form: what a window's byte count adds up."""
    return sum(bson_size(document) for document in message_documents)


def mark_size_change(before: tuple[int | None, int | None], after: tuple[int, int]) -> int:
    """Bytes a unit grows by when its ``(taken_until, taken_count)`` go from ``before`` (None: absent) to
    ``after`` (exact, so ``size_bytes`` stays exact: an int past 2**31 - 1 is stored in 8 bytes, not 4)."""
    return field_size_change("taken_until", before[0], after[0]) + field_size_change(
        "taken_count", before[1], after[1]
    )


def field_size_change(name: str, old: int | None, new: int | None) -> int:
    """Bytes a document grows by when its int field ``name`` goes from ``old`` to ``new`` (None: absent)."""
    before = bson_size({}) if old is None else bson_size({name: old})
    return (bson_size({}) if new is None else bson_size({name: new})) - before


def with_mark(document: dict[str, Any], taken_until: int, taken_count: int) -> dict[str, Any]:
    """A new unit's stored form with its positions mark, its ``size_bytes`` counting the mark."""
    document.update(taken_until=taken_until, taken_count=taken_count, size_bytes=0)
    document["size_bytes"] = bson_size(document)
    return document


def string_elements_size(values: Iterable[str], first_index: int) -> int:
    """Bytes that pushing the strings ``values`` onto an array of ``first_index`` elements adds."""
    total = 0
    for offset, value in enumerate(values):
        total += 1 + len(str(first_index + offset)) + 1 + 4 + len(value.encode("utf-8")) + 1
    return total


def stored_datetime(value: Any) -> Any:
    """Datetimes from a raw document in the library's form (aware UTC, ms); other values unchanged."""
    return to_utc_ms(value) if isinstance(value, datetime) else value

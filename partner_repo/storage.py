"""How units are laid out in MongoDB, beyond the model: derived fields and BSON sizes.

A stored unit also carries ``message_count`` and ``size_bytes``. They let ``append`` work in O(increment):
it learns where the new messages start and whether the unit would pass 16 MiB without reading the messages.
Every write path keeps them exact (``save`` recomputes them, ``append`` increments them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import bson

from partner_repo.clock import to_utc_ms
from partner_repo.models import MemorySlice, MemoryUnit, Message

MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
"""MongoDB's document size limit."""

DERIVED_FIELDS = ("message_count", "size_bytes")


def message_document(message: Message) -> dict[str, Any]:
    return {"role": message.role, "content": message.content}


def slice_document(piece: MemorySlice) -> dict[str, Any]:
    return piece.model_dump(mode="python")


def unit_document(unit: MemoryUnit) -> dict[str, Any]:
    """The stored form of a (normalized) unit, with the derived fields filled in."""
    document = unit.model_dump(by_alias=True, mode="python")
    document["slices"] = [slice_document(s) for s in unit.complete_slices()]
    document["message_count"] = len(unit.conversation_messages)
    document["size_bytes"] = 0
    document["size_bytes"] = bson_size(document)
    return document


def unit_from_document(document: Mapping[str, Any]) -> MemoryUnit:
    return MemoryUnit.model_validate(document)


def slice_from_document(document: Mapping[str, Any]) -> MemorySlice:
    return MemorySlice.model_validate(document)


def bson_size(document: Mapping[str, Any]) -> int:
    return len(bson.encode(document))


def array_elements_size(elements: Iterable[Mapping[str, Any]], first_index: int) -> int:
    """Bytes that pushing ``elements`` at ``first_index`` adds to a BSON array (type byte, key, document)."""
    total = 0
    for offset, element in enumerate(elements):
        total += 1 + len(str(first_index + offset)) + 1 + bson_size(element)
    return total


def stored_datetime(value: Any) -> Any:
    """Datetimes from a raw document in the library's form (aware UTC, ms); other values unchanged."""
    from datetime import datetime

    return to_utc_ms(value) if isinstance(value, datetime) else value

"""Turning a stored slice back into the RollingResult its roll produced."""

from __future__ import annotations

from partner_repo.errors import NotFound
from partner_repo.models import MemorySlice
from partner_repo.rolling.result import RollingResult
from partner_repo.units import MemoryUnitRepository


async def load_result(
    units: MemoryUnitRepository, unit_id: str, core_id: str | None, piece: MemorySlice
) -> RollingResult | None:
    """The result for ``piece`` of ``unit_id``, reading only the slice's messages; None when the unit is gone.

    ``rolling_size``/``retain_divisor`` come from the slice (``None`` for slices not made by a roll).
    """
    if core_id is None:
        head = await units.head(unit_id)
        if head is None:
            return None
        core_id = head.core_id
    try:
        messages = await units.messages_between(unit_id, piece.start_index or 0, piece.end_index or 0)
    except NotFound:
        return None
    return RollingResult.from_slice(unit_id, core_id, piece, messages)


async def load_stored_result(
    units: MemoryUnitRepository, unit_id: str, core_id: str | None, slice_id: str
) -> RollingResult | None:
    """The result for the slice stored under ``slice_id`` (re-read from the unit), or None when it is gone."""
    piece = await units.get_slice(unit_id, slice_id)
    if piece is None:
        return None
    return await load_result(units, unit_id, core_id, piece)


__all__: list[str] = []  # internal to the listener: nothing here is public API

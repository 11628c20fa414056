"""Turning a stored slice back into the RollingResult its roll produced."""

from __future__ import annotations

from pydantic import ValidationError

from partner_repo.errors import InvalidInput, NotFound, UnreadableUnit
from partner_repo.events import RollingResult
from partner_repo.models import MemorySlice
from partner_repo.units import MemoryUnitRepository
from partner_repo.validation import first_error


async def load_result(
    units: MemoryUnitRepository, unit_id: str, core_id: str | None, piece: MemorySlice
) -> RollingResult | None:
    """The result for ``piece`` of ``unit_id``, reading only the slice's messages; None when the unit is gone.

    ``rolling_size``/``retain_divisor`` come from the slice (``None`` for slices not made by a roll). A unit
    or a slice's messages that cannot be read raise :class:`UnreadableUnit`: no retry would change that.
    """
    if core_id is None:
        outline = await units.outline(unit_id)
        if outline is None:
            return None
        core_id = outline.core_id
    try:
        messages = await units.messages_between(unit_id, piece.start_index or 0, piece.end_index or 0)
    except NotFound:
        return None
    except (ValidationError, InvalidInput) as exc:
        reason = first_error(exc) if isinstance(exc, ValidationError) else str(exc)
        raise UnreadableUnit(unit_id, f"the messages of slice {piece.id!r} cannot be read: {reason}") from exc
    return RollingResult.from_slice(unit_id, core_id, piece, messages)


async def load_stored_result(
    units: MemoryUnitRepository, unit_id: str, core_id: str | None, slice_id: str
) -> RollingResult | None:
    """The result for the slice stored under ``slice_id`` (re-read from the unit), or None when it is gone."""
    try:
        piece = await units.get_slice(unit_id, slice_id)
    except ValidationError as exc:
        raise UnreadableUnit(unit_id, f"slice {slice_id!r} is invalid: {first_error(exc)}") from exc
    if piece is None:
        return None
    return await load_result(units, unit_id, core_id, piece)


__all__: list[str] = []  # internal to the listener: nothing here is public API

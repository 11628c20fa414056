"""What the delivery pipeline reports (its lag) and records (a unit's fingerprint), and the one order it
delivers a unit's slices in."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from partner_repo.listener.checkpoints import ListenerCheckpoints, UnitProgress
from partner_repo.models import MemorySlice
from partner_repo.units import UnitFingerprint

CommitAction = Callable[[], Awaitable[None]]
"""A checkpoint step (a resume token, a unit fingerprint) saved once the slices offered before it are done."""


@dataclass(frozen=True)
class ListenerLag:
    """How far behind a listener is, for monitoring.

    ``pending`` counts slices found but not yet finished by every consumer (``pending_by_consumer`` per
    consumer); ``last_delivered_slice_at`` is the ``created_at`` of the newest slice every consumer finished
    (a writer's clock: compare it with care); ``last_delivered_at`` is when that happened here.
    """

    source: str | None
    pending: int
    pending_by_consumer: dict[str, int]
    last_delivered_slice_at: datetime | None
    last_delivered_at: datetime | None
    delivered: int
    dead_lettered: int


def in_slice_order(slices: Iterable[MemorySlice]) -> list[MemorySlice]:
    """Slices in the order their appends happened: by interval (``start_index``, then ``end_index``), ties in
    array order. Never by ``created_at``: that is a writer's clock."""
    indexed = list(enumerate(slices))
    indexed.sort(key=lambda pair: (pair[1].start_index or 0, pair[1].end_index or 0, pair[0]))
    return [piece for _, piece in indexed]


def fingerprint_commit(
    checkpoints: ListenerCheckpoints, progress: UnitProgress, fingerprint: UnitFingerprint
) -> CommitAction:
    """The commit that records "every slice the unit held at ``fingerprint`` is delivered"."""

    async def save() -> None:
        if progress.fingerprint != fingerprint:
            await checkpoints.save_fingerprint(progress.unit_id, progress.core_id or "", fingerprint)
            progress.fingerprint = fingerprint

    return save


__all__ = ["ListenerLag"]

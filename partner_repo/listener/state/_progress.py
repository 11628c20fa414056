"""What the delivery pipeline reports (its lag) and records (a unit's fingerprint), and the one order it
delivers a unit's slices in."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from partner_repo.listener.state._checkpoints import ListenerCheckpoints, UnitProgress
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
    ``in_flight_by_consumer`` counts the slices each consumer is being handed right now (at most its
    concurrency), and ``oldest_pending_by_consumer`` is the ``created_at`` of the oldest slice each consumer
    has pending (None when it has none): :meth:`lag_seconds` turns it into how far behind it is.
    ``delivered`` and ``dead_lettered`` count deliveries to one consumer since the start: those the consumer
    took, and those given up on (a dead letter each); together, every delivery handled (a slice handed to
    two consumers counts twice).
    """

    source: str | None
    pending: int
    pending_by_consumer: dict[str, int]
    last_delivered_slice_at: datetime | None
    last_delivered_at: datetime | None
    delivered: int
    dead_lettered: int
    in_flight_by_consumer: dict[str, int] = field(default_factory=dict)
    oldest_pending_by_consumer: dict[str, datetime | None] = field(default_factory=dict)

    def lag_seconds(self, now: datetime) -> dict[str, float]:
        """Per consumer, the age at ``now`` of the oldest slice it has pending (0 when none is).

        A lower bound while the listener is behind by more than ``max_pending`` slices (those not read yet
        are not counted), and measured against writers' clocks.
        """
        return {
            name: 0.0 if oldest is None else max((now - oldest).total_seconds(), 0.0)
            for name, oldest in self.oldest_pending_by_consumer.items()
        }


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

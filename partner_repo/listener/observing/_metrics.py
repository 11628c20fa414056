"""ListenerMetrics: an observer that counts what listeners report, per group and consumer, in plain Python.

Counters only ever grow (deliveries, failed attempts, retries, dead letters, skipped slices); gauges are the
latest value (in flight now, pending, lag seconds, whether this process holds the group's lease). Any
exporter can read :meth:`ListenerMetrics.snapshot` from any thread;
:mod:`partner_repo.listener.observing._prometheus` serves it to Prometheus. One instance may watch several
listeners (of different groups).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

from partner_repo.clock import utc_now
from partner_repo.listener.observing._observer import ListenerObserver, Outcome
from partner_repo.listener.state import ListenerLag


@dataclass
class ConsumerMetrics:
    """What one consumer of one group did (counters) and where it stands (gauges)."""

    deliveries: int = 0
    failures: int = 0
    retries: int = 0
    dead_letters: int = 0
    skipped: int = 0
    in_flight: int = 0
    pending: int = 0
    lag_seconds: float = 0.0


@dataclass(frozen=True)
class MetricsSnapshot:
    """A consistent copy: per (group, consumer) its figures, and per group whether its lease is held here."""

    consumers: dict[tuple[str, str], ConsumerMetrics]
    lease_active: dict[str, bool]


class ListenerMetrics(ListenerObserver):
    """Counts listener events; see the module docstring. Thread-safe: events come from the event loop,
    snapshots may be taken from an exporter's thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._consumers: dict[tuple[str, str], ConsumerMetrics] = {}
        self._lease: dict[str, bool] = {}

    def snapshot(self) -> MetricsSnapshot:
        with self._lock:
            return MetricsSnapshot(
                consumers={key: replace(value) for key, value in self._consumers.items()},
                lease_active=dict(self._lease),
            )

    def _of(self, group: str, consumer: str) -> ConsumerMetrics:
        return self._consumers.setdefault((group, consumer), ConsumerMetrics())

    def lease_changed(self, group: str, active: bool) -> None:
        with self._lock:
            self._lease[group] = active

    def delivery_started(self, group: str, consumer: str, slice_id: str) -> None:
        with self._lock:
            self._of(group, consumer).in_flight += 1

    def attempt_failed(self, group: str, consumer: str, slice_id: str, attempt: int, retrying: bool) -> None:
        with self._lock:
            figures = self._of(group, consumer)
            figures.failures += 1
            figures.retries += int(retrying)

    def delivery_finished(self, group: str, consumer: str, slice_id: str, outcome: Outcome) -> None:
        with self._lock:
            figures = self._of(group, consumer)
            figures.in_flight = max(figures.in_flight - 1, 0)
            if outcome == "delivered":
                figures.deliveries += 1
            elif outcome == "dead_lettered":
                figures.dead_letters += 1
            else:
                figures.skipped += 1

    def sampled(self, group: str, lag: ListenerLag) -> None:
        behind = lag.lag_seconds(utc_now())
        with self._lock:
            self._lease.setdefault(group, lag.source is not None)
            for consumer, pending in lag.pending_by_consumer.items():
                figures = self._of(group, consumer)
                figures.pending = pending
                figures.lag_seconds = behind.get(consumer, 0.0)


__all__ = ["ConsumerMetrics", "ListenerMetrics", "MetricsSnapshot"]

"""ListenerObserver: what a running listener reports, for metrics, logs or tests.

A listener given ``observer=`` calls it as things happen (a delivery starts or ends, an attempt fails, the
lease is won or lost) and, every :data:`SAMPLE_INTERVAL` seconds while it runs, hands it a
:class:`~partner_repo.listener.state._progress.ListenerLag` snapshot for gauges. Nothing here imports a
metrics library: :mod:`partner_repo.listener.observing._metrics` counts the events in plain Python, and
:mod:`partner_repo.listener.observing._prometheus` serves those counts to a scraper.

Calls run on the listener's event loop, so an observer must return quickly and must not block. One that
raises is logged (once per method) and otherwise ignored: watching never breaks delivering.
"""

from __future__ import annotations

from typing import Literal

from partner_repo.listener.state import ListenerLag
from partner_repo.mongo import library_logger

logger = library_logger("partner_repo.listener")

SAMPLE_INTERVAL = 1.0
"""Seconds between the lag snapshots an observer receives while the listener runs."""

Outcome = Literal["delivered", "dead_lettered", "skipped"]
"""How a consumer finished a slice: delivered, given up on (a dead letter), or skipped (the slice is gone)."""


class ListenerObserver:
    """Does nothing: subclass it and override what you watch. Every method is called on the event loop."""

    def lease_changed(self, group: str, active: bool) -> None:
        """This listener started (True) or stopped (False) delivering for ``group``."""

    def delivery_started(self, group: str, consumer: str, slice_id: str) -> None:
        """``consumer`` is about to be handed ``slice_id`` (its first attempt)."""

    def attempt_failed(self, group: str, consumer: str, slice_id: str, attempt: int, retrying: bool) -> None:
        """Attempt ``attempt`` of ``consumer`` at ``slice_id`` failed; ``retrying`` unless it was the last."""

    def delivery_finished(self, group: str, consumer: str, slice_id: str, outcome: Outcome) -> None:
        """``consumer`` is done with ``slice_id`` (see :data:`Outcome`)."""

    def sampled(self, group: str, lag: ListenerLag) -> None:
        """The listener's lag now (every :data:`SAMPLE_INTERVAL` seconds while it runs)."""


class GuardedObserver(ListenerObserver):
    """Forwards to an observer, logging (once per method) and swallowing what it raises."""

    def __init__(self, inner: ListenerObserver | None) -> None:
        self._inner = inner
        self._complained: set[str] = set()

    def _call(self, method: str, *args: object) -> None:
        if self._inner is None:
            return
        try:
            getattr(self._inner, method)(*args)
        except Exception:
            if method not in self._complained:
                self._complained.add(method)
                logger.exception("listener observer %r failed in %s; ignored", self._inner, method)

    def lease_changed(self, group: str, active: bool) -> None:
        self._call("lease_changed", group, active)

    def delivery_started(self, group: str, consumer: str, slice_id: str) -> None:
        self._call("delivery_started", group, consumer, slice_id)

    def attempt_failed(self, group: str, consumer: str, slice_id: str, attempt: int, retrying: bool) -> None:
        self._call("attempt_failed", group, consumer, slice_id, attempt, retrying)

    def delivery_finished(self, group: str, consumer: str, slice_id: str, outcome: Outcome) -> None:
        self._call("delivery_finished", group, consumer, slice_id, outcome)

    def sampled(self, group: str, lag: ListenerLag) -> None:
        self._call("sampled", group, lag)


__all__ = ["ListenerObserver", "Outcome"]

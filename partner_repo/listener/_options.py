"""The listener's options, checked: seconds, counts, and how many slices each consumer takes at once.

A consumer may declare its own ``concurrency`` (an attribute: how many slices, of different units, it can
be handed at once); it wins over the listener's ``concurrency``, which is the default for consumers that do
not say. A consumer written for one-at-a-time delivery declares ``concurrency = 1`` and stays safe whatever
the listener is started with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from partner_repo.errors import InvalidInput
from partner_repo.listener.delivery import AfterRolling, AfterRollingRegistry, Backoff
from partner_repo.listener.observing import ListenerObserver
from partner_repo.listener.state import StartFrom
from partner_repo.validation import require_id

SourceChoice = Literal["auto", "polling"]

MAX_CONCURRENCY = 1024
"""The most slices one consumer may be handed at once (each is a task; far more only adds memory)."""


def require_seconds(value: object, name: str, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"{name} must be a number of seconds, got {type(value).__name__}")
    if value < 0 or (value == 0 and not allow_zero):
        raise InvalidInput(f"{name} must be {'non-negative' if allow_zero else 'positive'}, got {value}")
    return float(value)


def require_count(value: object, name: str, *, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"{name} must be a positive integer, got {value!r}")
    if maximum is not None and value > maximum:
        raise InvalidInput(f"{name} must be at most {maximum}, got {value!r}")
    return value


def consumer_concurrency(consumer: AfterRolling, default: int) -> int:
    """How many slices ``consumer`` takes at once: its own ``concurrency`` attribute, else ``default``."""
    declared = getattr(consumer, "concurrency", None)
    if declared is None:
        return default
    return require_count(declared, f"concurrency of consumer {consumer.name!r}", maximum=MAX_CONCURRENCY)


@dataclass(frozen=True)
class ListenerOptions:
    """A listener's options as :class:`~partner_repo.listener.RollingListener` takes them, every one checked
    (:meth:`checked`) before the listener builds anything, so a bad one is refused with :class:`InvalidInput`
    naming it."""

    group: str
    poll_interval: float
    start_from: StartFrom
    source: SourceChoice
    max_attempts: int
    backoff: Backoff
    max_pending: int
    consume_timeout: float | None
    drain_timeout: float
    lease_ttl: float
    concurrency: int
    observer: ListenerObserver | None

    @classmethod
    def checked(
        cls,
        registry: object,
        *,
        group: object,
        poll_interval: object,
        start_from: object,
        source: object,
        max_attempts: object,
        backoff: object,
        max_pending: object,
        consume_timeout: object,
        drain_timeout: object,
        lease_ttl: object,
        concurrency: object,
        observer: object,
    ) -> ListenerOptions:
        """The options, or :class:`InvalidInput` for the first one that is wrong (``registry`` too)."""
        if not isinstance(registry, AfterRollingRegistry):
            raise InvalidInput(f"registry must be an AfterRollingRegistry, got {type(registry).__name__}")
        checked_group = require_id(group, "group")
        checked_poll_interval = require_seconds(poll_interval, "poll_interval")
        checked_drain_timeout = require_seconds(drain_timeout, "drain_timeout", allow_zero=True)
        checked_lease_ttl = require_seconds(lease_ttl, "lease_ttl")
        checked_consume_timeout = (
            None if consume_timeout is None else require_seconds(consume_timeout, "consume_timeout")
        )
        if start_from not in ("beginning", "now"):
            raise InvalidInput(f"start_from must be 'beginning' or 'now', got {start_from!r}")
        if source not in ("auto", "polling"):
            raise InvalidInput(f"source must be 'auto' or 'polling', got {source!r}")
        checked_max_attempts = require_count(max_attempts, "max_attempts")
        checked_max_pending = require_count(max_pending, "max_pending")
        checked_concurrency = require_count(concurrency, "concurrency", maximum=MAX_CONCURRENCY)
        if backoff is not None and not isinstance(backoff, Backoff):
            raise InvalidInput(f"backoff must be a Backoff, got {type(backoff).__name__}")
        if observer is not None and not isinstance(observer, ListenerObserver):
            raise InvalidInput(f"observer must be a ListenerObserver, got {type(observer).__name__}")
        return cls(
            group=checked_group,
            poll_interval=checked_poll_interval,
            start_from=start_from,  # one of the two, checked above
            source=source,
            max_attempts=checked_max_attempts,
            backoff=backoff or Backoff(),
            max_pending=checked_max_pending,
            consume_timeout=checked_consume_timeout,
            drain_timeout=checked_drain_timeout,
            lease_ttl=checked_lease_ttl,
            concurrency=checked_concurrency,
            observer=observer,
        )


__all__: list[str] = []  # internal to the listener: nothing here is public API

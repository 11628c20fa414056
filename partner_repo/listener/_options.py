"""The listener's options, checked: seconds, counts, and how many slices each consumer takes at once.

A consumer may declare its own ``concurrency`` (an attribute: how many slices, of different units, it can
be handed at once); it wins over the listener's ``concurrency``, which is the default for consumers that do
not say. A consumer written for one-at-a-time delivery declares ``concurrency = 1`` and stays safe whatever
the listener is started with.
"""

from __future__ import annotations

from partner_repo.errors import InvalidInput
from partner_repo.listener.delivery import AfterRolling

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


__all__: list[str] = []  # internal to the listener: nothing here is public API

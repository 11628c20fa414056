"""RollingConfig: when the window rolls, what it keeps, how often idle cores are checked, how units grow."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from partner_repo.errors import InvalidInput
from partner_repo.mongo import MAX_DOCUMENT_BYTES

DEFAULT_UNIT_SOFT_LIMIT_BYTES = 8 * 1024 * 1024
"""Half of MongoDB's 16 MiB document limit: a unit opens a continuation long before it could fail."""

DEFAULT_TRIGGER_BYTES = 4 * 1024 * 1024
"""A window this large rolls whatever its message count: a quarter of the 16 MiB a window cannot pass, so
pasted documents and tool output are rolled long before a ``record`` could fail."""
MAX_SUMMARIZE_ATTEMPTS = 10
"""The most summarizer attempts a roll may make: what a failing summarizer can hold a core up is bounded."""

MAX_SUMMARIZE_BACKOFF = timedelta(seconds=30)
"""The longest wait between two summarizer attempts (the waits double from ``summarize_backoff``)."""


@dataclass(frozen=True)
class RollingConfig:
    """Partner's DialogRolling parameters (its defaults), plus what sharing a core across processes needs.

    - ``trigger_limit``: roll when the window holds at least this many messages (the session is kept).
    - ``trigger_bytes``: roll when the window's messages take at least this many bytes (BSON), a window of one
      message included (the session is kept).
    - ``idle_after``: roll, then start a new memory session, once the window has been idle longer than this.
    - ``retain_divisor``: after a roll the window keeps the last ``1/retain_divisor`` of the rolled snapshot
      (``0`` behaves as ``1``: keep everything, as Partner's ``max(divisor, 1)``).
    - ``check_interval``: how often :meth:`RollingService.run_idle_scheduler` looks for idle cores.
    - ``unit_soft_limit_bytes``: an append that would take a unit past this opens a continuation unit first.
    - ``lease_duration``: how long a roller holds a core; it is renewed while the summarizer runs, so it only
      bounds how long a crashed roller blocks the core.
    - ``summarize_timeout``: how long one summarizer call may take before it counts as failed (the lease is
      renewed meanwhile, so this is what keeps a call that never returns from holding the core's rolls).
    - ``summarize_attempts``: calls per roll before the placeholder summary is stored and the slice marked
      unsummarized (at most :data:`MAX_SUMMARIZE_ATTEMPTS`).
    - ``summarize_backoff``: the wait before the second attempt; it doubles for each later one, at most
      :data:`MAX_SUMMARIZE_BACKOFF`, with +-25 % jitter. :attr:`summarize_budget` is the longest a roll can
      wait for its summary.
    """

    trigger_limit: int = 36
    trigger_bytes: int = DEFAULT_TRIGGER_BYTES
    idle_after: timedelta = timedelta(hours=1)
    retain_divisor: int = 6
    check_interval: timedelta = timedelta(seconds=10)
    unit_soft_limit_bytes: int = DEFAULT_UNIT_SOFT_LIMIT_BYTES
    lease_duration: timedelta = timedelta(seconds=60)
    summarize_timeout: timedelta = timedelta(minutes=2)
    summarize_attempts: int = 3
    summarize_backoff: timedelta = timedelta(seconds=1)

    def __post_init__(self) -> None:
        _integer(self.trigger_limit, "trigger_limit", minimum=2)
        _document_bytes(self.trigger_bytes, "trigger_bytes")
        _integer(self.retain_divisor, "retain_divisor", minimum=0)
        _document_bytes(self.unit_soft_limit_bytes, "unit_soft_limit_bytes")
        _duration(self.idle_after, "idle_after", allow_zero=True)
        _duration(self.check_interval, "check_interval", allow_zero=False)
        _duration(self.lease_duration, "lease_duration", allow_zero=False)
        _duration(self.summarize_timeout, "summarize_timeout", allow_zero=False)
        _integer(self.summarize_attempts, "summarize_attempts", minimum=1)
        if self.summarize_attempts > MAX_SUMMARIZE_ATTEMPTS:
            raise InvalidInput(
                f"summarize_attempts must be at most {MAX_SUMMARIZE_ATTEMPTS}, got {self.summarize_attempts}"
            )
        _duration(self.summarize_backoff, "summarize_backoff", allow_zero=True)

    def summarize_delay(self, attempt: int) -> timedelta:
        """The wait after failed attempt ``attempt`` (1-based) before the next, without jitter."""
        delay: timedelta = self.summarize_backoff * 2 ** min(attempt - 1, MAX_SUMMARIZE_ATTEMPTS)
        return min(delay, MAX_SUMMARIZE_BACKOFF)

    @property
    def summarize_budget(self) -> timedelta:
        """The longest a roll waits for its summary: every attempt timing out, every wait at its longest
        (just over 6 minutes with the defaults). The core's other rolls wait that long at most; its records
        never wait for it."""
        waits = sum((self.summarize_delay(n) * 1.25 for n in range(1, self.summarize_attempts)), timedelta(0))
        return self.summarize_timeout * self.summarize_attempts + waits

    @property
    def room_wait(self) -> timedelta:
        """How long a turn the window cannot take waits for another process's roll of the core to make
        room: the longest a live roll holds the lease (its summary budget and a beat), plus the silence
        after which a dead roller's lease is taken over."""
        return self.summarize_budget + 2 * self.lease_duration


def _document_bytes(value: object, name: str) -> None:
    """A positive byte count that a MongoDB document can hold."""
    count = _integer(value, name, minimum=1)
    if count > MAX_DOCUMENT_BYTES:
        raise InvalidInput(
            f"{name} must not exceed MongoDB's {MAX_DOCUMENT_BYTES}-byte document limit, got {count}"
        )


def _integer(value: object, name: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise InvalidInput(f"{name} must be at least {minimum}, got {value}")
    return value


def _duration(value: object, name: str, *, allow_zero: bool) -> None:
    if not isinstance(value, timedelta):
        raise InvalidInput(f"{name} must be a timedelta, got {type(value).__name__}")
    if value < timedelta(0) or (value == timedelta(0) and not allow_zero):
        raise InvalidInput(f"{name} must be {'non-negative' if allow_zero else 'positive'}, got {value}")


__all__ = [
    "DEFAULT_TRIGGER_BYTES",
    "DEFAULT_UNIT_SOFT_LIMIT_BYTES",
    "MAX_SUMMARIZE_ATTEMPTS",
    "MAX_SUMMARIZE_BACKOFF",
    "RollingConfig",
]

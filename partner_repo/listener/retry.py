"""Backoff between delivery attempts: exponential, capped, with jitter so consumers do not retry in step."""

from __future__ import annotations

import random
from dataclasses import dataclass

from partner_repo.errors import InvalidInput


@dataclass(frozen=True)
class Backoff:
    """Delay before retry ``n`` (1-based): ``initial * multiplier ** (n - 1)``, at most ``maximum``, then
    spread by up to ``jitter`` (a fraction) either way."""

    initial: float = 0.5
    multiplier: float = 2.0
    maximum: float = 30.0
    jitter: float = 0.1

    def __post_init__(self) -> None:
        if self.initial < 0 or self.maximum < 0:
            raise InvalidInput("backoff delays must not be negative")
        if self.multiplier < 1:
            raise InvalidInput(f"backoff multiplier must be at least 1, got {self.multiplier}")
        if not 0 <= self.jitter <= 1:
            raise InvalidInput(f"backoff jitter must be between 0 and 1, got {self.jitter}")

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first retry)."""
        base = min(self.initial * self.multiplier ** max(retry - 1, 0), self.maximum)
        spread = base * self.jitter
        return max(base + random.uniform(-spread, spread), 0.0)


__all__ = ["Backoff"]

"""Backoff between delivery attempts: exponential, capped, with jitter so consumers do not retry in step.

The listener retries for as long as a failure lasts (a database outage has no end it can know), so a delay
must be computable for any retry number: the exponent stops growing once the maximum is reached, and a
delay is never infinite or undefined.
"""

from __future__ import annotations

import math
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
        for name in ("initial", "multiplier", "maximum", "jitter"):
            if not math.isfinite(getattr(self, name)):
                raise InvalidInput(f"backoff {name} must be a finite number, got {getattr(self, name)}")
        if self.initial < 0 or self.maximum < 0:
            raise InvalidInput("backoff delays must not be negative")
        if self.multiplier < 1:
            raise InvalidInput(f"backoff multiplier must be at least 1, got {self.multiplier}")
        if not 0 <= self.jitter <= 1:
            raise InvalidInput(f"backoff jitter must be between 0 and 1, got {self.jitter}")

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first); bounded for any ``retry``."""
        base = self._base(max(retry - 1, 0))
        spread = base * self.jitter
        return max(base + random.uniform(-spread, spread), 0.0)

    def _base(self, steps: int) -> float:
        if steps == 0 or self.initial == 0 or self.multiplier == 1 or self.initial >= self.maximum:
            return min(self.initial, self.maximum)
        # The number of steps after which the maximum is reached; beyond it the power would only overflow.
        needed = math.ceil((math.log(self.maximum) - math.log(self.initial)) / math.log(self.multiplier))
        if steps >= needed:
            return self.maximum
        try:
            return min(self.initial * self.multiplier**steps, self.maximum)
        except OverflowError:  # initial tiny and maximum huge: the power alone exceeds a float
            return self.maximum


__all__ = ["Backoff"]

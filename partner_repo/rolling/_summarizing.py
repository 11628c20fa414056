"""Asking the summarizer, as a roll (and ``resummarize``) does: bounded in time, tried again, never fatal.

Each call may take ``summarize_timeout``; a call that raises, times out or returns something other than a
string is a failed attempt, tried again after a wait (``summarize_backoff``, doubling, at most
:data:`~partner_repo.rolling._config.MAX_SUMMARIZE_BACKOFF`, with jitter so rollers failing together do not
retry together) up to ``summarize_attempts`` calls in all. After the last failure the summary is Partner's
placeholder ``SUMMARY_ON_EXCEPTION`` and :attr:`Summary.failed` says so: the roll stores it (the messages are
never lost) with the slice marked ``unsummarized``. A blank or ``None`` answer is an answer, not a failure:
Partner's ``SUMMARY_ON_EMPTY``, not retried.

A timed-out async summarizer is cancelled. A sync one runs in a worker thread, which cannot be cancelled: the
attempt is given up at the timeout and the next one starts, while the abandoned call runs on in its thread
until it returns (its result dropped), holding that thread of the loop's default executor meanwhile. A sync
summarizer should therefore carry its own client timeout; ``summarize_timeout`` only bounds how long the roll
waits.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

from partner_repo.models import Message
from partner_repo.mongo import library_logger
from partner_repo.rolling._config import RollingConfig
from partner_repo.rolling._summarizer import SUMMARY_ON_EMPTY, SUMMARY_ON_EXCEPTION, AsyncSummarize

logger = library_logger("partner_repo.rolling.service")

JITTER = 0.25
"""Each wait between attempts is its nominal length times a random factor in ``[1 - JITTER, 1 + JITTER]``."""

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class Summary:
    """What the summarizer gave for one increment: the text to store, and whether every attempt failed (the
    text is then ``SUMMARY_ON_EXCEPTION`` and the slice is stored ``unsummarized``)."""

    text: str
    failed: bool = False
    error: str | None = None
    """The last failure, ``Type: message``, when ``failed``."""


class SummaryAttempts:
    """Calls a summarizer with the timeout, attempts and backoff of a :class:`RollingConfig`."""

    def __init__(
        self,
        summarize: AsyncSummarize,
        config: RollingConfig,
        *,
        sleep: Sleep = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._summarize = summarize
        self._config = config
        self._sleep = sleep
        self._jitter = jitter

    async def __call__(self, what: str, messages: list[Message]) -> Summary:
        """The summary of ``messages``; ``what`` names them in the log (``core 'x'``, ``slice 'y'``)."""
        attempts = self._config.summarize_attempts
        timeout = self._config.summarize_timeout.total_seconds()
        failure: Exception | None = None
        error = ""
        for attempt in range(1, attempts + 1):
            try:
                summary: object = await asyncio.wait_for(self._summarize(list(messages)), timeout)
            except TimeoutError:
                failure = TimeoutError(f"no summary within {timeout:g}s")
            except Exception as exc:
                failure = exc
            else:
                if summary is None or (isinstance(summary, str) and not summary.strip()):
                    return Summary(SUMMARY_ON_EMPTY)
                if isinstance(summary, str):
                    return Summary(summary)
                failure = TypeError(f"the summarizer returned {type(summary).__name__}, not a string")
            error = f"{type(failure).__name__}: {failure}" if str(failure) else type(failure).__name__
            if attempt == attempts:
                break
            delay = self._delay(attempt)
            logger.warning(
                "%s: summarizer attempt %d of %d failed (%s); trying again in %.2fs",
                what,
                attempt,
                attempts,
                error,
                delay,
            )
            await self._sleep(delay)
        logger.error(
            "%s: the summarizer failed %d time(s), last with %s; storing the summary %r, marked unsummarized "
            "(resummarize replaces it)",
            what,
            attempts,
            error,
            SUMMARY_ON_EXCEPTION,
            exc_info=failure,
        )
        return Summary(SUMMARY_ON_EXCEPTION, failed=True, error=error)

    def _delay(self, attempt: int) -> float:
        nominal: timedelta = self._config.summarize_delay(attempt)
        return nominal.total_seconds() * (1 - JITTER + 2 * JITTER * self._jitter())


__all__ = ["JITTER", "Summary", "SummaryAttempts"]

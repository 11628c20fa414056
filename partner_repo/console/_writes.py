"""The console's writes, each through the library's public service that owns it, and none when writes are off.

Resummarizing is :meth:`RollingService.resummarize <partner_repo.rolling.RollingService.resummarize>` (one
conditional update per slice, only while its placeholder is there); retrying dead letters is
:func:`~partner_repo.listener.replay_dead_letters` with the consumers the console was started with;
discarding one is :class:`~partner_repo.listener.DeadLetterRepository`'s; forgetting a core is
:meth:`MemoryEraser.forget <partner_repo.erasure.MemoryEraser.forget>`. So every fence of
``docs/protocol.md`` holds for them as for any other caller: the console adds no write path of its own.
A console started without ``--allow-writes`` refuses every one of them (:class:`WritesOff`), whatever a
request asks.
"""

from __future__ import annotations

from dataclasses import dataclass

from partner_repo.erasure import ErasureReport, MemoryEraser
from partner_repo.errors import InvalidInput, NotFound, PartnerRepoError
from partner_repo.listener import (
    AfterRollingRegistry,
    DeadLetterRepository,
    ReplayReport,
    replay_dead_letters,
)
from partner_repo.mongo import MongoDatabase
from partner_repo.rolling import ResummarizeReport, RollingService
from partner_repo.validation import require_id


class WritesOff(PartnerRepoError):
    """The console was started read-only (without ``--allow-writes``)."""


@dataclass(frozen=True)
class LetterKey:
    """Which dead letter: its group and consumer, and its slice (with unit and revision) or its erasure."""

    group: str
    consumer: str
    unit_id: str = ""
    slice_id: str = ""
    revision: int = 0
    erasure_seq: int | None = None


class ConsoleWrites:
    """The writes the console offers, refused unless ``allowed``."""

    def __init__(
        self,
        database: MongoDatabase,
        *,
        allowed: bool,
        rolling: RollingService | None = None,
        consumers: AfterRollingRegistry | None = None,
        resummarize_limit: int = 100,
    ) -> None:
        self._database = database
        self.allowed = allowed
        self._rolling = rolling
        self.consumers = consumers if consumers is not None else AfterRollingRegistry()
        self._resummarize_limit = resummarize_limit

    def _require(self) -> None:
        if not self.allowed:
            raise WritesOff(
                "writes are off: this console was started read-only (start it with --allow-writes)"
            )

    async def resummarize(self, core_id: str) -> ResummarizeReport:
        """Summarize again the core's slices whose summary is the placeholder (at most a run's limit)."""
        self._require()
        core_id = require_id(core_id, "core id")
        if self._rolling is None:
            raise WritesOff("this console was given no summarizer, so it cannot resummarize")
        return await self._rolling.resummarize(core_id, limit=self._resummarize_limit)

    def can_retry(self, consumer: str) -> bool:
        """Whether the console was started with this consumer, so its letters can be delivered again."""
        return self.consumers.calls(consumer) is not None

    async def retry(self, group: str, consumer: str) -> ReplayReport:
        """Deliver the consumer's letters of the group again, once each (delivered ones are removed)."""
        self._require()
        group, consumer = require_id(group, "group"), require_id(consumer, "consumer")
        if not self.can_retry(consumer):
            raise InvalidInput(
                f"consumer {consumer!r} was not given to this console: start it with --consumer MODULE:ATTR "
                "(or --recall for the recall index's) to retry its letters"
            )
        return await replay_dead_letters(self._database, self.consumers, group=group, consumer=consumer)

    async def discard(self, key: LetterKey) -> None:
        """Remove one dead letter (its slice is not delivered again)."""
        self._require()
        letters = DeadLetterRepository(self._database)
        letter = await letters.find(
            group=key.group,
            consumer=key.consumer,
            unit_id=key.unit_id,
            slice_id=key.slice_id,
            revision=key.revision,
            erasure_seq=key.erasure_seq,
        )
        if letter is None or not await letters.remove(letter):
            raise NotFound(f"no such dead letter of consumer {key.consumer!r} in group {key.group!r}")

    async def forget(self, core_id: str, confirmation: str) -> ErasureReport:
        """Erase the core, once ``confirmation`` is its id typed again (anything else erases nothing)."""
        self._require()
        core_id = require_id(core_id, "core id")
        if confirmation.strip() != core_id:
            raise InvalidInput("the confirmation is not the core id: nothing was erased")
        return await MemoryEraser(self._database).forget(core_id)


__all__ = ["ConsoleWrites", "LetterKey", "WritesOff"]

"""Replaying dead letters: one more delivery of each, with the result rebuilt from the unit.

The letters themselves are the listener's state (:mod:`partner_repo.listener.state._dead_letters`); a replay
delivers, so it lives with delivery: it hands each letter's slice (or erasure) to its consumer once more, and
removes the letter on success or records the failure on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from partner_repo.errors import UnreadableUnit
from partner_repo.listener.delivery._registry import AfterRollingRegistry, Call, raised_by_consumer
from partner_repo.listener.delivery._results import load_stored_result
from partner_repo.listener.state import DeadLetter, DeadLetterRepository, ErasureLog, describe
from partner_repo.mongo import MongoDatabase, library_logger
from partner_repo.units import MemoryUnitRepository
from partner_repo.validation import require_id

logger = library_logger("partner_repo.listener.dead_letters")  # its 0.4 name, which operators filter on


@dataclass
class ReplayReport:
    """What a replay did: letters delivered (and removed), failed again (kept), or left alone because their
    consumer is not registered or their slice no longer exists."""

    delivered: list[DeadLetter] = field(default_factory=list)
    failed: list[DeadLetter] = field(default_factory=list)
    no_consumer: list[DeadLetter] = field(default_factory=list)
    slice_gone: list[DeadLetter] = field(default_factory=list)


async def replay_dead_letters(
    database: MongoDatabase,
    registry: AfterRollingRegistry,
    *,
    group: str = "default",
    consumer: str | None = None,
) -> ReplayReport:
    """Deliver the group's dead letters again (those of ``consumer`` only, when given), oldest first.

    Each letter gets one attempt with the result rebuilt from the unit: success removes the letter, failure
    updates it (error, one more attempt, one more replay); a letter whose unit still cannot be read counts
    as failed again (its error says why). Letters whose consumer is not in ``registry`` or whose slice was
    deleted are kept and reported.
    """
    group = require_id(group, "group")
    letters_repo = DeadLetterRepository(database)
    units = MemoryUnitRepository(database, majority_reads=True)
    report = ReplayReport()
    for letter in await letters_repo.list(group=group, consumer=consumer):
        calls = registry.calls(letter.consumer)  # sync or async, decided when it was registered
        if calls is None or (letter.erasure_seq is not None and calls.on_erased is None):
            report.no_consumer.append(letter)
            continue
        if letter.erasure_seq is not None:
            assert calls.on_erased is not None
            await _replay_erasure(ErasureLog(database), letters_repo, letter, calls.on_erased, report)
            continue
        try:
            result = await load_stored_result(units, letter.unit_id, letter.core_id, letter.slice_id)
        except UnreadableUnit as exc:  # not repaired yet: kept, with the reason
            report.failed.append(await _failed_again(letters_repo, letter, exc, attempts=0))
            continue
        if result is None:
            logger.warning(
                "dead letter for slice %s of unit %s: the slice no longer exists; kept",
                letter.slice_id,
                letter.unit_id,
            )
            report.slice_gone.append(letter)
            continue
        try:
            await calls.consume(result)
        except BaseException as exc:
            if not raised_by_consumer(exc):
                raise
            report.failed.append(await _failed_again(letters_repo, letter, exc, attempts=1))
            continue
        await letters_repo.remove(letter)
        logger.info("replayed slice %s to consumer %r", letter.slice_id, letter.consumer)
        report.delivered.append(letter)
    return report


async def _replay_erasure(
    log: ErasureLog, letters: DeadLetterRepository, letter: DeadLetter, on_erased: Call, report: ReplayReport
) -> None:
    """One more ``on_erased`` of the erasure a letter names (the log keeps every erasure)."""
    assert letter.erasure_seq is not None
    erasure = await log.get(letter.erasure_seq)
    if erasure is None:
        report.slice_gone.append(letter)
        return
    try:
        await on_erased(erasure)
    except BaseException as exc:
        if not raised_by_consumer(exc):
            raise
        logger.warning(
            "replay of erasure %s to consumer %r failed again: %s",
            erasure.seq,
            letter.consumer,
            describe(exc),
        )
        failed = await letters.record_erasure(
            group=letter.group,
            consumer=letter.consumer,
            core_id=letter.core_id,
            erasure_seq=erasure.seq,
            error=exc,
            attempts=1,
            replay=True,
        )
        report.failed.append(failed)
        return
    await letters.remove(letter)
    logger.info("replayed erasure %s to consumer %r", erasure.seq, letter.consumer)
    report.delivered.append(letter)


async def _failed_again(
    letters: DeadLetterRepository, letter: DeadLetter, error: BaseException, *, attempts: int
) -> DeadLetter:
    logger.warning(
        "replay of slice %s to consumer %r failed again: %s",
        letter.slice_id,
        letter.consumer,
        describe(error),
    )
    return await letters.record(
        group=letter.group,
        consumer=letter.consumer,
        unit_id=letter.unit_id,
        core_id=letter.core_id,
        slice_id=letter.slice_id,
        error=error,
        attempts=attempts,
        replay=True,
        revision=letter.revision,
    )


__all__ = ["ReplayReport", "replay_dead_letters"]

"""Dead letters: deliveries a consumer failed every attempt at, kept in ``rolling_dead_letters``.

A dead letter names the group, the consumer and the slice (plus its unit and core), the last error, how many
attempts were made and when. It holds no copy of the result: a replay rebuilds the result from the unit, the
source of truth. One letter per (group, consumer, unit, slice, revision): failing the same slice again (a
failed replay) updates it instead of adding another, while a revision (a summary ``resummarize`` replaced)
that fails is a letter of its own (its key and ``revision`` say which; absent for a slice as rolled). The key
names the unit as well as the slice: a slice id alone is not a delivery's identity (the library keeps ids
unique, but a unit written by another tool may repeat one until ``repair``), and the unit is the shard key
of ``memory_units``. Letters stored keyed on the slice alone are rekeyed by the
``20261204090100_dead_letter_keys`` migration.

A consumer's failed ``on_erased`` is a letter too: it names the erasure's position in the erasure log
(``erasure_seq``) and its core, with empty slice and unit ids; a replay hands the consumer that erasure again.
An erasure removes the slice letters of the units it erased (:meth:`DeadLetterRepository.remove_for_units`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from pymongo import ReturnDocument

from partner_repo import driver
from partner_repo.clock import UtcDatetime, utc_now
from partner_repo.database import MongoDatabase
from partner_repo.errors import UnreadableUnit
from partner_repo.indexes import DEAD_LETTERS
from partner_repo.listener.erasure_log import ErasureLog
from partner_repo.listener.registry import AfterRollingRegistry, Call, raised_by_consumer
from partner_repo.listener.results import load_stored_result
from partner_repo.masking import scrub
from partner_repo.units.repository import MemoryUnitRepository
from partner_repo.validation import require_id

logger = logging.getLogger(__name__)

ERROR_TEXT_LIMIT = 4000
"""Characters of the error text kept in a letter (a traceback can be long)."""


class DeadLetter(BaseModel):
    """A delivery that failed ``attempts`` times; ``error`` is the last failure (type and message)."""

    model_config = ConfigDict(frozen=True)

    group: str
    consumer: str
    slice_id: str
    unit_id: str
    core_id: str
    error: str
    attempts: int
    first_failed_at: UtcDatetime
    failed_at: UtcDatetime
    replays: int = 0
    erasure_seq: int | None = None
    """For a failed ``on_erased``: the erasure's position in the erasure log (None for a slice)."""
    revision: int = 0
    """The revision of the slice's summary that failed (0: as rolled). A replay delivers the slice as it is
    now, its latest revision."""


class DeadLetterRepository:
    """Records, lists and removes dead letters on the database it is given."""

    def __init__(self, database: MongoDatabase) -> None:
        self._collection = database[DEAD_LETTERS]

    async def record(
        self,
        *,
        group: str,
        consumer: str,
        unit_id: str,
        core_id: str,
        slice_id: str,
        error: BaseException | str,
        attempts: int,
        replay: bool = False,
        at: datetime | None = None,
        revision: int = 0,
    ) -> DeadLetter:
        """Write (or update) the letter for this consumer and slice (at ``revision``); returns what is
        stored."""
        stamp = at or utc_now()
        document = await self._collection.find_one_and_update(
            {"_id": _key(group, consumer, unit_id, slice_id, revision)},
            {
                "$set": {
                    "error": describe(error),
                    "failed_at": stamp,
                    "core_id": core_id,
                },
                "$inc": {"attempts": attempts, "replays": 1 if replay else 0},
                "$setOnInsert": {
                    "group": group,
                    "consumer": consumer,
                    "unit_id": unit_id,
                    "slice_id": slice_id,
                    "first_failed_at": stamp,
                    **({"revision": revision} if revision > 0 else {}),
                },
            },
            upsert=True,
            return_document=ReturnDocument.AFTER,
        )
        return _letter(document)

    async def record_erasure(
        self,
        *,
        group: str,
        consumer: str,
        core_id: str,
        erasure_seq: int,
        error: BaseException | str,
        attempts: int,
        replay: bool = False,
    ) -> DeadLetter:
        """Write (or update) the letter for this consumer's failed ``on_erased`` of the erasure at
        ``erasure_seq``."""
        stamp = utc_now()
        document = await self._collection.find_one_and_update(
            {"_id": {"group": group, "consumer": consumer, "erasure_seq": erasure_seq}},
            {
                "$set": {"error": describe(error), "failed_at": stamp, "core_id": core_id},
                "$inc": {"attempts": attempts, "replays": 1 if replay else 0},
                "$setOnInsert": {
                    "group": group,
                    "consumer": consumer,
                    "erasure_seq": erasure_seq,
                    "slice_id": "",
                    "unit_id": "",
                    "first_failed_at": stamp,
                },
            },
            upsert=True,
            return_document=ReturnDocument.AFTER,
        )
        return _letter(document)

    async def remove_for_units(self, unit_ids: Collection[Any], *, group: str | None = None) -> int:
        """Remove the slice letters of these units (of one group, when given); returns how many went."""
        if not unit_ids:
            return 0
        query: dict[str, Any] = {"unit_id": {"$in": list(unit_ids)}}
        if group is not None:
            query["group"] = group
        result = await self._collection.delete_many(query)
        return int(result.deleted_count)

    async def list(
        self, *, group: str | None = None, consumer: str | None = None, limit: int | None = None
    ) -> list[DeadLetter]:
        """Letters, oldest failure first, optionally for one group and/or consumer."""
        cursor = self._collection.find(_filter(group, consumer)).sort([("failed_at", 1), ("slice_id", 1)])
        if limit is not None:
            cursor = cursor.limit(limit)
        return [_letter(document) async for document in cursor]

    async def count(self, *, group: str | None = None, consumer: str | None = None) -> int:
        return int(await self._collection.count_documents(_filter(group, consumer)))

    async def counts(self, *, group: str | None = None) -> dict[tuple[str, str], int]:
        """(group, consumer) -> how many letters it has, counted by the server."""
        pipeline: list[dict[str, Any]] = [
            {"$match": _filter(group, None)},
            {"$group": {"_id": {"group": "$group", "consumer": "$consumer"}, "letters": {"$sum": 1}}},
        ]
        rows = await driver.aggregate_list(self._collection, pipeline)
        return {(row["_id"]["group"], row["_id"]["consumer"]): int(row["letters"]) for row in rows}

    async def remove(self, letter: DeadLetter) -> bool:
        """Delete a letter (after a successful replay); True when it existed."""
        key = _key(letter.group, letter.consumer, letter.unit_id, letter.slice_id, letter.revision)
        if letter.erasure_seq is not None:
            key = {"group": letter.group, "consumer": letter.consumer, "erasure_seq": letter.erasure_seq}
        result = await self._collection.delete_one({"_id": key})
        return bool(result.deleted_count)


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


def describe(error: BaseException | str) -> str:
    """``Type: message`` of an error (``Type`` alone when it has no message), cut to
    :data:`ERROR_TEXT_LIMIT` characters."""
    if isinstance(error, str):
        text = error
    else:
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return scrub(text)[:ERROR_TEXT_LIMIT]


def _key(group: str, consumer: str, unit_id: str, slice_id: str, revision: int = 0) -> dict[str, Any]:
    key: dict[str, Any] = {"group": group, "consumer": consumer, "unit_id": unit_id, "slice_id": slice_id}
    if revision > 0:  # a revision's letter is its own; a letter as rolled keeps the key it always had
        key["revision"] = revision
    return key


def _filter(group: str | None, consumer: str | None) -> dict[str, Any]:
    query: dict[str, Any] = {}
    if group is not None:
        query["group"] = group
    if consumer is not None:
        query["consumer"] = consumer
    return query


def _letter(document: Mapping[str, Any]) -> DeadLetter:
    return DeadLetter.model_validate({k: v for k, v in document.items() if k != "_id"})


__all__ = ["DeadLetter", "DeadLetterRepository", "ReplayReport", "replay_dead_letters"]

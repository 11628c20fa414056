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
Replaying letters delivers, so it lives with delivery (:mod:`partner_repo.listener.delivery._replay`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from partner_repo.clock import UtcDatetime, utc_now
from partner_repo.mongo import DEAD_LETTERS, MongoDatabase, driver, library_logger, scrub

logger = library_logger("partner_repo.listener.dead_letters")

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
        document = await driver.upserted(
            self._collection,
            _key(group, consumer, unit_id, slice_id, revision),
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
        document = await driver.upserted(
            self._collection,
            {"group": group, "consumer": consumer, "erasure_seq": erasure_seq},
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

    async def find(
        self,
        *,
        group: str,
        consumer: str,
        unit_id: str = "",
        slice_id: str = "",
        revision: int = 0,
        erasure_seq: int | None = None,
    ) -> DeadLetter | None:
        """The letter of this consumer for this slice (at ``revision``), or for the erasure at
        ``erasure_seq``; None when there is none. One read by key."""
        key = _key(group, consumer, unit_id, slice_id, revision)
        if erasure_seq is not None:
            key = {"group": group, "consumer": consumer, "erasure_seq": erasure_seq}
        document = await self._collection.find_one({"_id": key})
        return None if document is None else _letter(document)

    async def remove(self, letter: DeadLetter) -> bool:
        """Delete a letter (after a successful replay); True when it existed."""
        key = _key(letter.group, letter.consumer, letter.unit_id, letter.slice_id, letter.revision)
        if letter.erasure_seq is not None:
            key = {"group": letter.group, "consumer": letter.consumer, "erasure_seq": letter.erasure_seq}
        result = await self._collection.delete_one({"_id": key})
        return bool(result.deleted_count)


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


__all__ = ["ERROR_TEXT_LIMIT", "DeadLetter", "DeadLetterRepository", "describe"]

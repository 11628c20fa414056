"""The migration that keys dead letters on their unit and slice (not the slice alone)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from partner_repo import DeadLetterRepository, run_migrations
from partner_repo.mongo import DEAD_LETTERS
from tests.unit.migrations.support import fresh_database, migration_file, shipped_before, shipped_from

KEYS = migration_file("dead_letter_keys")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def letter_keyed_on_its_slice(slice_id: str, unit_id: str = "u1", **extra: Any) -> dict[str, Any]:
    """A slice's letter as stored before the migration: keyed on the group, consumer and slice alone."""
    key = {"group": "default", "consumer": "indexer", "slice_id": slice_id, **extra}
    return {
        "_id": key,
        "group": "default",
        "consumer": "indexer",
        "slice_id": slice_id,
        "unit_id": unit_id,
        "core_id": "c",
        "error": "RuntimeError: down",
        "attempts": 5,
        "replays": 0,
        "first_failed_at": T0,
        "failed_at": T0,
        **extra,
    }


async def migrated_from(*letters: dict[str, Any]) -> Any:
    database = await fresh_database()
    await run_migrations(database, distance=len(shipped_before(KEYS)))
    for letter in letters:
        await database[DEAD_LETTERS].insert_one(letter)
    await run_migrations(database)
    return database


async def keys(database: Any) -> list[Any]:
    return [d["_id"] async for d in database[DEAD_LETTERS].find({}).sort("slice_id", 1)]


async def test_forward_keys_a_letter_on_its_unit_and_keeps_every_field() -> None:
    old = letter_keyed_on_its_slice
    database = await migrated_from(old("s1"), old("s2", revision=2))

    assert await keys(database) == [
        {"group": "default", "consumer": "indexer", "unit_id": "u1", "slice_id": "s1"},
        {"group": "default", "consumer": "indexer", "unit_id": "u1", "slice_id": "s2", "revision": 2},
    ]
    (first, second) = await DeadLetterRepository(database).list()
    assert (first.attempts, first.error, second.revision) == (5, "RuntimeError: down", 2)


async def test_a_letter_migrated_is_the_one_the_repository_updates_and_removes() -> None:
    database = await migrated_from(letter_keyed_on_its_slice("s1"))
    letters = DeadLetterRepository(database)

    await letters.record(
        group="default",
        consumer="indexer",
        unit_id="u1",
        core_id="c",
        slice_id="s1",
        error="again",
        attempts=1,
    )

    (letter,) = await letters.list()
    assert letter.attempts == 6 and await letters.remove(letter) and await letters.list() == []


async def test_a_letter_already_under_its_new_key_is_kept_and_the_old_one_dropped() -> None:
    newer = {**letter_keyed_on_its_slice("s1"), "error": "newer", "attempts": 1}
    newer["_id"] = {"group": "default", "consumer": "indexer", "unit_id": "u1", "slice_id": "s1"}

    database = await migrated_from(letter_keyed_on_its_slice("s1"), newer)

    (letter,) = await DeadLetterRepository(database).list()
    assert (letter.error, letter.attempts) == ("newer", 1)


async def test_an_erasures_letter_is_left_alone() -> None:
    erasure = {"_id": {"group": "default", "consumer": "indexer", "erasure_seq": 3}, "erasure_seq": 3}

    database = await migrated_from({**erasure, "slice_id": "", "unit_id": ""})

    assert await keys(database) == [erasure["_id"]]


async def test_backward_restores_the_keys_on_the_slice_alone() -> None:
    database = await migrated_from(letter_keyed_on_its_slice("s1"))

    await run_migrations(database, backward=True, distance=len(shipped_from(KEYS)))  # and later ones

    assert await keys(database) == [letter_keyed_on_its_slice("s1")["_id"]]

"""The ``unsummarized`` migration: the index, and the mark on placeholder slices stored before 0.4.0 (so
``resummarize`` finds them too), sizes kept exact; a rerun changes nothing; Backward unmarks and drops the
index, and Forward marks them again."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from partner_repo import (
    SUMMARY_ON_EXCEPTION,
    MemoryUnitRepository,
    Message,
    RollingService,
    UnitChecker,
    run_migrations,
)
from partner_repo.mongo import UNITS
from tests.unit.migrations.support import UNSUMMARIZED, bound, fresh_database, shipped_from

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


async def summarize(messages: list[Message]) -> str:
    return f"again: {len(messages)} messages"


async def database_of_0_3() -> Any:
    """Units as 0.3 stored a failed summary: Partner's placeholder text and no mark (next to a real one), in
    a database migrated up to 0.3."""
    database = await fresh_database()
    await run_migrations(database, distance=5)
    units = MemoryUnitRepository(database)
    for unit_id, summaries in (("a", [SUMMARY_ON_EXCEPTION, "real", SUMMARY_ON_EXCEPTION]), ("b", ["real"])):
        for number, summary in enumerate(summaries):
            batch = [Message(role="user", content=f"{unit_id} {number}")]
            await units.append(unit_id, batch, summary, core_id="c", created_at=T0)
    return database


async def marks(database: Any) -> dict[str, list[bool]]:
    return {
        document["_id"]: [piece.get("unsummarized", False) for piece in document["slices"]]
        async for document in database[UNITS].find({}, {"slices": 1}).sort("_id", 1)
    }


async def test_forward_marks_the_placeholder_slices_stored_before_keeping_sizes_exact() -> None:
    database = await database_of_0_3()
    version = (await database[UNITS].find_one({"_id": "a"}))["version"]

    await run_migrations(database)

    assert await marks(database) == {"a": [True, False, True], "b": [False]}
    assert (await database[UNITS].find_one({"_id": "a"}))["version"] == version + 2
    assert (await UnitChecker(database).check()).ok  # size_bytes still exact
    assert "unsummarized" in await database[UNITS].index_information()


async def test_the_marked_slices_are_summarized_again() -> None:
    database = await database_of_0_3()
    await run_migrations(database)

    report = await RollingService(database, summarize).resummarize()

    assert len(report.replaced) == 2 and await marks(database) == {"a": [False] * 3, "b": [False]}


async def test_running_it_again_changes_nothing() -> None:
    database = await database_of_0_3()
    await run_migrations(database)
    before = [document async for document in database[UNITS].find({})]
    migration = await bound(UNSUMMARIZED, database)

    assert await migration.mark_all(marked=True) == 0
    assert [document async for document in database[UNITS].find({})] == before


async def test_backward_unmarks_and_drops_the_index_and_forward_marks_them_again() -> None:
    database = await database_of_0_3()
    await run_migrations(database)

    await run_migrations(database, backward=True, distance=len(shipped_from(UNSUMMARIZED)))  # and later ones

    assert await marks(database) == {"a": [False] * 3, "b": [False]}
    assert "unsummarized" not in await database[UNITS].index_information()
    assert (await UnitChecker(database).check()).ok
    await run_migrations(database)
    assert await marks(database) == {"a": [True, False, True], "b": [False]}

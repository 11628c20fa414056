"""The recall-indexes migration: the recall collections' indexes forward, exactly those backward."""

from __future__ import annotations

from typing import Any

from partner_repo import run_migrations
from tests.unit.migrations.support import (
    RECALL_INDEXES,
    bound,
    fresh_database,
    load,
    shipped_before,
    shipped_from,
)
from tests.unit.migrations.support import names as migration_names

MIGRATION = load(RECALL_INDEXES)
RECALL_SLICES, RECALL_VOCABULARY = "recall_slices", "recall_vocabulary"
RECALL = (RECALL_SLICES, RECALL_VOCABULARY)
UP_TO_IT = len(shipped_before(RECALL_INDEXES)) + 1
"""0.4's recall collections exist until 0.5's migration moves them into ``recall_index``."""


async def recall_index_names(database: Any) -> dict[str, set[str]]:
    return {collection: set(await database[collection].index_information()) for collection in RECALL}


async def test_forward_creates_the_recall_collections_indexes() -> None:
    database = await fresh_database()

    run = await run_migrations(database, distance=UP_TO_IT, use_transaction=False)

    assert RECALL_INDEXES.name in run.ran
    assert await recall_index_names(database) == {
        RECALL_SLICES: {"_id_", "core_terms", "core_ended", "core_ancestors", "core_related", "unit"},
        RECALL_VOCABULARY: {"_id_", "core_kind_words", "core_kind_depth"},
    }


def test_every_recall_index_starts_with_the_core_except_the_erasures_one() -> None:
    """Each recall reads its own core's keys only; an erasure finds a unit's slices by unit."""
    for models in MIGRATION.INDEXES.values():
        for model in models:
            first = next(iter(model.document["key"]))
            assert first == ("unit_id" if model.document["name"] == "unit" else "core_id"), model.document


async def test_backward_drops_the_recall_indexes_and_nothing_else() -> None:
    database = await fresh_database()
    await run_migrations(database, distance=UP_TO_IT, use_transaction=False)
    await database[RECALL_SLICES].create_index("custom_field", name="a_teams_own_index")

    reverted = shipped_from(RECALL_INDEXES)[:1]  # this migration (the later ones are not applied)
    run = await run_migrations(database, backward=True, distance=len(reverted), use_transaction=False)

    assert run.ran == migration_names(reverted)[::-1]
    left = await recall_index_names(database)
    assert left[RECALL_SLICES] == {"_id_", "a_teams_own_index"} and left[RECALL_VOCABULARY] <= {"_id_"}


async def test_dropping_recall_indexes_that_are_already_gone_succeeds() -> None:
    database = await fresh_database()
    await database[RECALL_SLICES].insert_one({"_id": {"u": "u", "s": "s"}, "core_id": "c"})
    migration = await bound(RECALL_INDEXES, database)

    await migration.drop_all()
    await migration.drop_all()

    left = await recall_index_names(database)
    assert left[RECALL_SLICES] == {"_id_"} and left[RECALL_VOCABULARY] <= {"_id_"}

"""The recall-index migration: 0.4's ``recall_slices`` and ``recall_vocabulary`` move into 0.5's
``recall_index`` (nothing indexed again, no topic extractor asked), a rerun continues, and Backward brings
0.4's two collections back as they were."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from partner_repo import run_migrations
from partner_repo.recall import MemoryRecall, RecallIndexCheck, TopicCue
from partner_repo.units import MemoryUnitRepository
from tests.recall_support import index_state
from tests.unit.migrations.support import RECALL_INDEX, bound, fresh_database, shipped_before

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
BEFORE_IT = len(shipped_before(RECALL_INDEX))


def old_slice(core: str, unit: str, piece: str, words: list[str], topic: str, day: int) -> dict[str, Any]:
    """A slice as 0.4's indexer wrote it to ``recall_slices``."""
    at = T0 + timedelta(days=day)
    return {
        "_id": {"u": unit, "s": piece},
        "core_id": core,
        "unit_id": unit,
        "slice_id": piece,
        "revision": 0,
        "summary": " ".join(words),
        "start": 0,
        "end": 1,
        "first_position": 0,
        "created_at": at,
        "began_at": at,
        "ended_at": at + timedelta(minutes=5),
        "topic": topic,
        "ancestors": [topic.split("->")[0], topic] if "->" in topic else [topic],
        "related": [],
        "profile": {"activation": 0.5, "diffusion": 0.5, "independence": 0.5},
        "terms": sorted(words),
        "weights": dict.fromkeys(words, 1.0),
        "marks": {word: [[0, 1.0], [3, 0.4521]] for word in words},
        "length": len(words),
        "indexed_at": at,
    }


OLD_SLICES = [
    old_slice("agent", "u1", "s1", ["lighthous", "whale"], "coast->lighthous", 0),
    old_slice("agent", "u2", "s2", ["sourdough", "starter"], "kitchen->bread", 4),
    old_slice("agent", "u1", "s0", ["hike", "trail"], "coast->trail", -1),
    old_slice("other", "u3", "s3", ["sourdough"], "kitchen", 1),
]


def vocabulary(slices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """0.4's ``recall_vocabulary`` for ``slices``: every term, node and core with the keys of its slices."""
    entries: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in slices:
        key = [row["unit_id"], row["slice_id"]]
        held = [("term", t) for t in row["terms"]] + [("node", n) for n in row["ancestors"]] + [("core", "")]
        for kind, value in held:
            entry = entries.setdefault(
                (row["core_id"], kind, value),
                {"_id": {"c": row["core_id"], "k": kind, "v": value}, "core_id": row["core_id"], "kind": kind,
                 "value": value, "slices": []},
            )  # fmt: skip
            entry["slices"].append(key)
            if kind == "node":
                entry.update(depth=len(value.split("->")), words=[value.split("->")[-1]])
    return list(entries.values())


async def database_of_0_4() -> Any:
    """A database migrated up to 0.4, holding 0.4's recall index of four slices (and a write 0.4 left
    pending on an entry that has no terms yet: its listener group delivers it again)."""
    database = await fresh_database()
    await run_migrations(database, distance=BEFORE_IT, use_transaction=False)
    await database["recall_slices"].insert_many([dict(row) for row in OLD_SLICES])
    await database["recall_slices"].insert_one(
        {"_id": {"u": "u9", "s": "s9"}, "unit_id": "u9", "pending": {}}
    )
    await database["recall_vocabulary"].insert_many(vocabulary(OLD_SLICES))
    units = MemoryUnitRepository(database)
    for unit, core in (("u1", "agent"), ("u2", "agent"), ("u3", "other")):
        await units.append(unit, [{"role": "user", "content": "x"}], "s", core_id=core)
    return database


async def test_forward_moves_every_slice_and_counts_its_core_and_nodes() -> None:
    database = await database_of_0_4()

    run = await run_migrations(database, distance=1, use_transaction=False)

    assert run.ran == (RECALL_INDEX.name,)
    assert set(await database.list_collection_names()) >= {"recall_index"}
    assert not {"recall_slices", "recall_vocabulary"} & set(await database.list_collection_names())
    counters, slices = await index_state(database)
    assert [(row["slice_id"], row["seq"]) for row in slices] == [("s0", 1), ("s1", 2), ("s2", 3), ("s3", 1)]
    assert counters[("agent", "core", "")] == (3, 3) and counters[("other", "core", "")] == (1, 1)
    assert counters[("agent", "node", "coast")] == (2, "coast")
    assert slices[0]["marks"] == {"hike": "0:1.0 3:0.4521", "trail": "0:1.0 3:0.4521"}  # one string a term
    assert all(report.ok for report in await RecallIndexCheck(database).check())


async def test_moved_slices_are_found_by_words_topics_and_dates() -> None:
    database = await database_of_0_4()
    await run_migrations(database, use_transaction=False)
    recall = MemoryRecall(database, clock=lambda: T0 + timedelta(days=10))

    [by_words] = await recall.recall("agent", "sourdough")
    [by_topic, *under_its_parent] = await recall.recall(
        "agent", "anything", cues=[TopicCue("coast->lighthous")]
    )
    by_node = await recall.recall("agent", "trail")  # the node coast->trail is named by its own word

    assert by_words.slice_id == "s2" and (by_topic.slice_id, by_topic.sources) == ("s1", ("topic", "parent"))
    assert [piece.slice_id for piece in under_its_parent] == ["s0"] and "topic" in by_node[0].sources


async def test_running_forward_again_after_a_stop_moves_nothing_twice() -> None:
    database = await database_of_0_4()
    migration = await bound(RECALL_INDEX, database)
    await migration.create_indexes(database, migration.INDEXES)
    await migration.move_slices(database)  # stopped before counting and dropping

    await migration.forward(database)
    await migration.forward(database)

    counters, slices = await index_state(database)
    assert len(slices) == 4 and counters[("agent", "core", "")] == (3, 3)
    assert all(report.ok for report in await RecallIndexCheck(database).check())


async def test_backward_brings_0_4s_collections_back_as_they_were() -> None:
    database = await database_of_0_4()
    await run_migrations(database, distance=1, use_transaction=False)

    await run_migrations(database, backward=True, distance=1, use_transaction=False)

    assert "recall_index" not in await database.list_collection_names()
    slices = {str(row["_id"]): row async for row in database["recall_slices"].find({})}
    assert slices == {str(row["_id"]): row for row in OLD_SLICES}  # the pending-only entry is not back
    restored = {str(row["_id"]): row async for row in database["recall_vocabulary"].find({})}
    assert restored == {
        str(row["_id"]): {**row, "slices": sorted(row["slices"])} for row in vocabulary(OLD_SLICES)
    }
    indexes = set(await database["recall_slices"].index_information())
    assert {"core_terms", "core_ended", "core_ancestors", "core_related", "unit"} <= indexes

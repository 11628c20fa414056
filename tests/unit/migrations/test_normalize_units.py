"""The normalize-units migration: legacy units are stored as ``normalize_unit`` would store them, nothing else
changes, concurrent writes are never overwritten, and Backward puts back exactly what Forward rewrote."""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import bson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partner_repo import MemoryUnit, MemoryUnitRepository, Message, normalize_unit, run_migrations
from partner_repo.mongo import UNITS, unit_document
from tests.unit.migrations.support import NORMALIZE, SLICE_IDS, bound, fresh_database, load

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
MIGRATION = load(NORMALIZE)
LAYOUT_0_2 = load(SLICE_IDS)


def messages(n: int) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"} for i in range(n)]


def legacy_unit(unit_id: str = "legacy") -> dict[str, Any]:
    """A unit as another tool wrote it: null entries, missing and repeated ids, out-of-range intervals."""
    return {
        "_id": unit_id,
        "core_id": "core",
        "conversation_messages": messages(5),
        "slices": [
            None,
            {"summary": "no id, starts before 0", "start_index": -2, "end_index": 3, "created_at": T0},
            {"id": "twice", "summary": "ends past the messages", "start_index": 1, "end_index": 99},
            {
                "id": "twice",
                "summary": "older, repeated id",
                "start_index": 4,
                "end_index": 2,
                "created_at": T0 - timedelta(hours=1),
            },
        ],
        "updated_at": T0 + timedelta(hours=1),
        "tags": ["kept", "as", "stored"],
    }


@contextmanager
def same_ids() -> Iterator[None]:
    """Generated slice ids restart from one sequence, so the library's and the migration's results compare."""
    counter = itertools.count()
    with mock.patch.object(uuid, "uuid4", lambda: uuid.UUID(int=next(counter))):
        yield


def library_form(document: dict[str, Any], now: datetime) -> dict[str, Any]:
    """What the library's ``save`` would store for this raw unit (normalized, derived fields, version + 1)."""
    unit = MemoryUnit.model_validate(document)
    normalized = normalize_unit(unit, now=now)
    return unit_document(normalized.model_copy(update={"version": unit.version + 1}))


async def forward(database: Any) -> None:
    run = await run_migrations(database, distance=1, use_transaction=False)
    assert run.ran == (NORMALIZE.name,)


async def stored(database: Any, unit_id: str = "legacy") -> dict[str, Any]:
    document = await database[UNITS].find_one({"_id": unit_id})
    assert document is not None
    return dict(document)


async def test_forward_stores_a_legacy_unit_exactly_as_the_library_would() -> None:
    database = await fresh_database()
    await database[UNITS].insert_one(legacy_unit())
    with same_ids():
        expected = library_form(legacy_unit(), now=T0)

    with same_ids():
        await forward(database)

    after = await stored(database)
    owned = ("slices", "updated_at", "message_count", "slice_count", "version")
    assert {k: after[k] for k in owned} == {k: expected[k] for k in owned}


async def test_forward_leaves_an_erasure_tombstone_as_it_is() -> None:
    """``{_id, erased_at}`` fences an erased unit's id (0.4.0): it is no unit, and never made into one."""
    database = await fresh_database()
    await database[UNITS].insert_many([legacy_unit(), {"_id": "erased", "erased_at": T0}])

    await forward(database)

    assert await stored(database, "erased") == {"_id": "erased", "erased_at": T0}
    assert (await stored(database))["message_count"] == 5


async def test_forward_records_the_stored_documents_exact_bson_size() -> None:
    database = await fresh_database()
    await database[UNITS].insert_one(legacy_unit())

    await forward(database)

    after = await stored(database)
    assert after["size_bytes"] == len(bson.encode(after))


async def test_forward_keeps_the_messages_and_every_field_it_does_not_own() -> None:
    database = await fresh_database()
    await database[UNITS].insert_one(legacy_unit())

    await forward(database)

    after = await stored(database)
    assert after["conversation_messages"] == messages(5)
    assert after["tags"] == ["kept", "as", "stored"]
    assert after["core_id"] == "core"


async def test_forward_gives_every_slice_a_distinct_id_and_an_interval_inside_the_messages() -> None:
    database = await fresh_database()
    await database[UNITS].insert_one(legacy_unit())

    await forward(database)

    unit = await MemoryUnitRepository(database).get("legacy")
    assert unit is not None
    ids = [s.id for s in unit.complete_slices()]
    assert len(ids) == 3 and len(set(ids)) == 3 and all(ids)
    assert all(0 <= (s.start_index or 0) <= (s.end_index or 0) <= 5 for s in unit.complete_slices())
    times = [s.created_at for s in unit.complete_slices()]
    assert times == sorted(times)  # type: ignore[type-var]


async def test_forward_does_not_rewrite_units_the_library_wrote() -> None:
    database = await fresh_database()
    units = MemoryUnitRepository(database)
    await units.append("written", [Message(role="user", content="hi")], "greeting", core_id="core")
    before = await stored(database, "written")

    await forward(database)

    assert await stored(database, "written") == before
    assert await database[MIGRATION.BACKUP].count_documents({}) == 0


async def test_times_read_back_naive_by_another_client_count_as_already_normalized() -> None:
    database = await fresh_database()
    units = MemoryUnitRepository(database)
    await units.append("written", [Message(role="user", content="hi")], "greeting", core_id="core")
    document = await stored(database, "written")
    naive = {**document, "updated_at": document["updated_at"].replace(tzinfo=None)}
    naive["slices"] = [{**s, "created_at": s["created_at"].replace(tzinfo=None)} for s in document["slices"]]

    assert not MIGRATION.needs_write(naive, MIGRATION.normalized_fields(naive, T0))


async def test_the_library_appends_to_a_migrated_unit_without_repairing_it_first() -> None:
    database = await fresh_database()
    await database[UNITS].insert_one(legacy_unit())
    await run_migrations(database, use_transaction=False)  # the whole chain: the library's layout
    version = (await stored(database))["version"]

    piece = await MemoryUnitRepository(database).append(
        "legacy", [Message(role="user", content="more")], "later", core_id="core"
    )

    assert (piece.start_index, piece.end_index) == (5, 6)
    assert (await stored(database))["version"] == version + 1


async def test_forward_leaves_a_unit_it_cannot_read_as_stored_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    database = await fresh_database()
    broken = {
        "_id": "broken",
        "core_id": "core",
        "conversation_messages": [],
        "slices": [{"start_index": "x"}],
    }
    await database[UNITS].insert_one(broken)

    with caplog.at_level(logging.WARNING, logger="partner_repo.migrations"):
        await forward(database)

    assert await stored(database, "broken") == broken
    assert any("'broken'" in record.getMessage() for record in caplog.records)


async def test_normalizing_again_changes_nothing() -> None:
    database = await fresh_database()
    await database[UNITS].insert_one(legacy_unit())
    await forward(database)
    after_first = await stored(database)
    migration = await bound(NORMALIZE, database)

    counts = await migration.normalize_all(None)

    assert counts["normalized"] == 0
    assert await stored(database) == after_first


async def test_a_write_that_lands_during_normalization_is_kept_and_normalized_too() -> None:
    database = await fresh_database()
    await database[UNITS].insert_one(legacy_unit())
    migration = await bound(NORMALIZE, database)
    stale = await stored(database)  # the migration read this, then another writer got in first
    await database[UNITS].update_one(
        {"_id": "legacy"},
        {"$push": {"conversation_messages": {"role": "user", "content": "late"}}, "$set": {"version": 7}},
    )

    outcome = await migration._normalize_one(database[UNITS], database[migration.BACKUP], stale, None)

    after = await stored(database)
    assert outcome == "normalized"
    assert after["conversation_messages"][-1] == {"role": "user", "content": "late"}
    assert after["message_count"] == 6 and after["version"] == 8


async def test_backward_restores_every_unit_forward_rewrote_exactly() -> None:
    database = await fresh_database()
    await database[UNITS].insert_many([legacy_unit("a"), legacy_unit("b")])
    originals = [await stored(database, "a"), await stored(database, "b")]
    await forward(database)

    run = await run_migrations(database, backward=True, use_transaction=False)

    assert run.ran == (NORMALIZE.name,) and run.after is None
    assert [await stored(database, "a"), await stored(database, "b")] == originals
    assert await database[MIGRATION.BACKUP].count_documents({}) == 0


async def test_backward_keeps_a_unit_written_after_the_migration_and_its_pre_image(
    caplog: pytest.LogCaptureFixture,
) -> None:
    database = await fresh_database()
    await database[UNITS].insert_many([legacy_unit("a"), legacy_unit("b")])
    original_b = await stored(database, "b")
    await forward(database)
    await MemoryUnitRepository(database).append(
        "b", [Message(role="user", content="new")], "s", core_id="core"
    )
    written_since = await stored(database, "b")

    with caplog.at_level(logging.WARNING, logger="partner_repo.migrations"):
        await run_migrations(database, backward=True, use_transaction=False)

    assert await stored(database, "b") == written_since
    assert await database[MIGRATION.BACKUP].find_one({"_id": "b"}) == original_b
    assert any("'b'" in record.getMessage() for record in caplog.records)


# -- the frozen copy of the rules against the library ------------------------------------------------------

TIMES = st.sampled_from([T0, T0 + timedelta(minutes=5), (T0 - timedelta(days=1)).replace(tzinfo=None)])
INDEXES = st.one_of(st.none(), st.integers(min_value=-3, max_value=12))
RAW_SLICES = st.lists(
    st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {"summary": st.sampled_from(["", "s"])},
            optional={
                "id": st.sampled_from([None, "", " ", "a", "b"]),
                "start_index": INDEXES,
                "end_index": INDEXES,
                "created_at": st.one_of(st.none(), TIMES),
                "rolling_size": st.one_of(st.none(), st.integers(min_value=0, max_value=40)),
            },
        ),
    ),
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(
    raw_slices=RAW_SLICES, count=st.integers(min_value=0, max_value=8), updated=st.one_of(st.none(), TIMES)
)
def test_the_frozen_rules_agree_with_the_library(
    raw_slices: list[Any], count: int, updated: datetime | None
) -> None:
    """The migrations carry a copy of the rules and layouts; this fails when the library drifts from them
    (then ship a new migration for the new rules, and pin this test to the copy it replaces). The library's
    layout is 0.1.0's normalization (this migration) followed by 0.2.0's ``slice_ids`` (the next one)."""
    unit = MemoryUnit(id="u", core_id="c", conversation_messages=messages(count), updated_at=updated)
    raw = {**unit.model_dump(by_alias=True), "slices": raw_slices}

    with same_ids():
        fields = MIGRATION.normalized_fields(raw, T0)
    normalized = {**raw, **fields, "version": MIGRATION.written_version(raw)}
    fields.update(LAYOUT_0_2.with_slice_ids(normalized))
    with same_ids():
        expected = library_form(raw, now=T0)

    assert fields == {name: expected[name] for name in fields}
    assert set(expected) - set(fields) <= set(raw) | {"version"}

"""MemoryUnitRepository on the embedded backend: every public method, one behaviour per test."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import bson
import pytest

from partner_repo import (
    ConflictError,
    MemorySlice,
    MemoryUnit,
    MemoryUnitRepository,
    Message,
    NotFound,
    UnitHead,
    normalize_unit,
)

T0 = datetime(2024, 1, 1, 8, 0, tzinfo=UTC)


def say(*contents: str) -> list[Message]:
    return [Message(role="user" if i % 2 == 0 else "assistant", content=c) for i, c in enumerate(contents)]


# -- get / save ---------------------------------------------------------------------------------------------


async def test_get_of_a_missing_unit_is_none(units: MemoryUnitRepository) -> None:
    assert await units.get("nobody") is None
    assert await units.head("nobody") is None


async def test_require_of_a_missing_unit_raises_not_found(units: MemoryUnitRepository) -> None:
    with pytest.raises(NotFound, match="no unit 'nobody'"):
        await units.require("nobody")


async def test_require_of_a_unit_is_what_get_answers(units: MemoryUnitRepository) -> None:
    saved = await units.save(MemoryUnit(id="u", core_id="c"), now=T0)

    assert await units.require("u") == saved == await units.get("u")


async def test_save_returns_the_normalized_unit_and_get_reads_it_back(units: MemoryUnitRepository) -> None:
    unit = MemoryUnit(
        id="u", core_id="c", conversation_messages=say("a", "b"), slices=[MemorySlice(summary="s")]
    )

    saved = await units.save(unit, now=T0)

    assert saved.version == 1 and saved.updated_at == T0
    assert saved.slices[0] is not None and saved.slices[0].end_index == 2
    assert await units.get("u") == saved


async def test_saving_the_loaded_copy_bumps_the_version(units: MemoryUnitRepository) -> None:
    await units.save(MemoryUnit(id="u", core_id="c"))
    loaded = await units.get("u")
    assert loaded is not None
    loaded.conversation_messages.append(Message(role="user", content="new"))

    saved = await units.save(loaded)

    assert saved.version == 2
    stored = await units.get("u")
    assert stored is not None and stored.conversation_messages == say("new") and stored.version == 2


async def test_saving_a_stale_copy_raises_conflict_and_keeps_the_newer_data(
    units: MemoryUnitRepository,
) -> None:
    await units.save(MemoryUnit(id="u", core_id="c"))
    first, second = await units.get("u"), await units.get("u")
    assert first is not None and second is not None
    first.conversation_messages.append(Message(role="user", content="first writer"))
    await units.save(first)
    second.conversation_messages.append(Message(role="user", content="second writer"))

    with pytest.raises(ConflictError, match="changed since version 1"):
        await units.save(second)

    stored = await units.get("u")
    assert stored is not None and stored.conversation_messages == say("first writer")


async def test_saving_a_copy_older_than_an_append_raises_conflict(units: MemoryUnitRepository) -> None:
    await units.append("u", say("a"), "first", core_id="c")
    stale = await units.get("u")
    assert stale is not None
    await units.append("u", say("b"), "second", core_id="c")

    with pytest.raises(ConflictError):
        await units.save(stale)
    stored = await units.get("u")
    assert stored is not None and [m.content for m in stored.conversation_messages] == ["a", "b"]


async def test_saving_a_new_unit_under_an_existing_id_raises_conflict(units: MemoryUnitRepository) -> None:
    await units.append("u", say("kept"), "s", core_id="c")
    with pytest.raises(ConflictError, match="exists already"):
        await units.save(MemoryUnit(id="u", core_id="c"))
    stored = await units.get("u")
    assert stored is not None and stored.conversation_messages == say("kept")


async def test_saving_a_unit_deleted_meanwhile_raises_conflict(units: MemoryUnitRepository) -> None:
    await units.save(MemoryUnit(id="u", core_id="c"))
    loaded = await units.get("u")
    assert loaded is not None
    await units.delete("u")
    with pytest.raises(ConflictError):
        await units.save(loaded)
    assert await units.get("u") is None


async def test_save_does_not_modify_the_callers_unit(units: MemoryUnitRepository) -> None:
    unit = MemoryUnit(id="u", core_id="c", slices=[None, MemorySlice(summary="s")])
    before = unit.model_dump()
    await units.save(unit)
    assert unit.model_dump() == before


# -- append -------------------------------------------------------------------------------------------------


async def test_append_creates_the_unit_with_one_slice_over_the_messages(units: MemoryUnitRepository) -> None:
    piece = await units.append("u", say("a", "b", "c"), "first turn", core_id="c", created_at=T0)

    assert (piece.start_index, piece.end_index, piece.summary, piece.created_at) == (0, 3, "first turn", T0)
    unit = await units.get("u")
    assert unit is not None
    assert (unit.core_id, unit.updated_at, unit.version) == ("c", T0, 1)
    assert unit.conversation_messages == say("a", "b", "c")
    assert unit.slices == [piece]


async def test_append_adds_a_slice_covering_exactly_the_new_messages(units: MemoryUnitRepository) -> None:
    await units.append("u", say("a", "b"), "one", core_id="c", created_at=T0)
    later = T0 + timedelta(minutes=5)

    piece = await units.append("u", say("c", "d", "e"), "two", core_id="c", created_at=later)

    assert (piece.start_index, piece.end_index) == (2, 5)
    unit = await units.get("u")
    assert unit is not None
    assert [m.content for m in unit.conversation_messages] == ["a", "b", "c", "d", "e"]
    assert unit.slices[-1] == piece and unit.updated_at == later and unit.version == 2


async def test_append_accepts_messages_as_mappings(units: MemoryUnitRepository) -> None:
    piece = await units.append("u", [{"role": "system", "content": "be brief"}], "s", core_id="c")
    assert piece.id is not None
    assert await units.slice_messages("u", piece.id) == [Message(role="system", content="be brief")]


async def test_append_without_created_at_stamps_now(units: MemoryUnitRepository) -> None:
    before = datetime.now(UTC) - timedelta(seconds=1)
    piece = await units.append("u", say("a"), "s", core_id="c")
    assert piece.created_at is not None and before <= piece.created_at <= datetime.now(UTC)
    assert piece.id is not None and len(piece.id) == 36


async def test_append_with_an_older_time_keeps_slices_sorted(units: MemoryUnitRepository) -> None:
    """A writer whose clock is behind: its slice goes where its time sorts, its interval is still the tail."""
    await units.append("u", say("a"), "one", core_id="c", created_at=T0)
    await units.append("u", say("b"), "three", core_id="c", created_at=T0 + timedelta(hours=2))

    late = await units.append("u", say("c"), "two", core_id="c", created_at=T0 + timedelta(hours=1))

    assert (late.start_index, late.end_index) == (2, 3)
    unit = await units.get("u")
    assert unit is not None
    assert [s.summary for s in unit.complete_slices()] == ["one", "two", "three"]
    assert normalize_unit(unit) == unit


async def test_append_never_moves_updated_at_back(units: MemoryUnitRepository) -> None:
    await units.append("u", say("a"), "now", core_id="c", created_at=T0 + timedelta(hours=2))
    await units.append("u", say("b"), "from a slow clock", core_id="c", created_at=T0)
    unit = await units.get("u")
    assert unit is not None and unit.updated_at == T0 + timedelta(hours=2)


async def test_append_records_the_roll_parameters_and_the_previous_unit(units: MemoryUnitRepository) -> None:
    piece = await units.append(
        "u2", say("a"), "s", core_id="c", rolling_size=36, retain_divisor=6, previous_unit_id="u1"
    )
    assert (piece.rolling_size, piece.retain_divisor) == (36, 6)
    plain = await units.append("u2", say("b"), "s", core_id="c", previous_unit_id="ignored")
    assert (plain.rolling_size, plain.retain_divisor) == (None, None)
    unit = await units.get("u2")
    assert unit is not None and unit.previous_unit_id == "u1"


async def test_append_retry_with_the_same_slice_id_returns_the_stored_slice(
    units: MemoryUnitRepository,
) -> None:
    await units.append("u", say("a"), "earlier", core_id="c")
    first = await units.append("u", say("b", "c"), "turn", core_id="c", slice_id="turn-1", created_at=T0)

    retry = await units.append(
        "u", say("b", "c"), "turn", core_id="c", slice_id="turn-1", created_at=T0 + timedelta(seconds=9)
    )

    assert retry == first
    unit = await units.get("u")
    assert unit is not None
    assert [m.content for m in unit.conversation_messages] == ["a", "b", "c"]
    assert [s.id for s in unit.complete_slices()].count("turn-1") == 1
    assert unit.version == 2


async def test_a_retry_with_a_fresh_slice_id_is_still_idempotent(units: MemoryUnitRepository) -> None:
    await units.append("u", say("a"), "earlier", core_id="c")
    first = await units.append("u", say("b"), "turn", core_id="c", slice_id="minted", fresh_slice_id=True)

    retry = await units.append("u", say("b"), "turn", core_id="c", slice_id="minted", fresh_slice_id=True)

    assert retry == first
    unit = await units.get("u")
    assert unit is not None and [m.content for m in unit.conversation_messages] == ["a", "b"]


async def test_append_retry_after_the_first_call_created_the_unit(units: MemoryUnitRepository) -> None:
    first = await units.append("u", say("a"), "s", core_id="c", slice_id="k")
    for _ in range(3):
        assert await units.append("u", say("a"), "s", core_id="c", slice_id="k") == first
    unit = await units.get("u")
    assert unit is not None and len(unit.conversation_messages) == 1 and len(unit.slices) == 1


# -- reads --------------------------------------------------------------------------------------------------


@pytest.fixture
async def three_turns(units: MemoryUnitRepository) -> list[MemorySlice]:
    return [
        await units.append("u", say("a", "b"), "one", core_id="c", slice_id="s1", created_at=T0),
        await units.append("u", say("c", "d", "e"), "two", core_id="c", slice_id="s2", created_at=T0),
        await units.append("u", say("f"), "three", core_id="c", slice_id="s3", created_at=T0),
    ]


async def test_get_slice_returns_one_slice(
    units: MemoryUnitRepository, three_turns: list[MemorySlice]
) -> None:
    assert await units.get_slice("u", "s2") == three_turns[1]
    assert await units.get_slice("u", "missing") is None
    assert await units.get_slice("no-unit", "s2") is None


async def test_slice_messages_are_exactly_the_slices_interval(
    units: MemoryUnitRepository, three_turns: list[MemorySlice]
) -> None:
    assert [m.content for m in await units.slice_messages("u", "s1")] == ["a", "b"]
    assert [m.content for m in await units.slice_messages("u", "s2")] == ["c", "d", "e"]
    assert [m.content for m in await units.slice_messages("u", "s3")] == ["f"]


async def test_slice_messages_of_an_unknown_slice_is_not_found(
    units: MemoryUnitRepository, three_turns: list[MemorySlice]
) -> None:
    with pytest.raises(NotFound, match="missing"):
        await units.slice_messages("u", "missing")
    with pytest.raises(NotFound):
        await units.slice_messages("no-unit", "s1")


async def test_slice_messages_of_an_empty_interval_is_empty(units: MemoryUnitRepository) -> None:
    await units.save(
        MemoryUnit(
            id="u",
            core_id="c",
            conversation_messages=say("a"),
            slices=[MemorySlice(id="empty", start_index=1, end_index=1)],
        )
    )
    assert await units.slice_messages("u", "empty") == []


async def test_messages_between_is_a_half_open_range(
    units: MemoryUnitRepository, three_turns: list[MemorySlice]
) -> None:
    assert [m.content for m in await units.messages_between("u", 1, 4)] == ["b", "c", "d"]
    assert [m.content for m in await units.messages_between("u", 4, 99)] == ["e", "f"]
    assert await units.messages_between("u", 3, 3) == []
    with pytest.raises(NotFound):
        await units.messages_between("no-unit", 0, 1)


@pytest.mark.parametrize(
    ("n", "expected"), [(0, []), (1, ["f"]), (3, ["d", "e", "f"]), (6, list("abcdef")), (50, list("abcdef"))]
)
async def test_tail_messages_returns_the_last_n(
    units: MemoryUnitRepository, three_turns: list[MemorySlice], n: int, expected: list[str]
) -> None:
    assert [m.content for m in await units.tail_messages("u", n)] == expected


async def test_tail_messages_of_a_missing_unit_is_empty(units: MemoryUnitRepository) -> None:
    assert await units.tail_messages("nobody", 5) == []


async def test_head_describes_the_unit_without_its_messages(
    units: MemoryUnitRepository, three_turns: list[MemorySlice]
) -> None:
    head = await units.head("u")
    assert isinstance(head, UnitHead)
    assert (head.id, head.core_id, head.message_count, head.slice_count, head.version) == ("u", "c", 6, 3, 3)
    assert head.last_slice == three_turns[-1] and head.updated_at == T0


async def test_list_units_returns_a_cores_units_oldest_update_first(units: MemoryUnitRepository) -> None:
    await units.append("late", say("a"), "s", core_id="c", created_at=T0 + timedelta(days=2))
    await units.append("early", say("a"), "s", core_id="c", created_at=T0)
    await units.append("elsewhere", say("a"), "s", core_id="other", created_at=T0 + timedelta(days=1))

    listed = await units.list_units("c")

    assert [u.id for u in listed] == ["early", "late"]
    assert all(isinstance(u, MemoryUnit) for u in listed)
    assert await units.list_units("nobody") == []


async def test_unit_ids_is_the_cores_memory_unit_uuid_set(units: MemoryUnitRepository) -> None:
    for unit_id in ("a", "b", "c"):
        await units.append(unit_id, say("x"), "s", core_id="core")
    await units.append("d", say("x"), "s", core_id="another")

    assert await units.unit_ids("core") == {"a", "b", "c"}
    assert await units.unit_ids("nobody") == set()


async def test_delete_removes_the_unit_and_reports_whether_it_existed(units: MemoryUnitRepository) -> None:
    await units.append("u", say("a"), "s", core_id="c")
    assert await units.delete("u") is True
    assert await units.get("u") is None
    assert await units.delete("u") is False


# -- stored layout ------------------------------------------------------------------------------------------


async def test_derived_fields_stay_exact_through_every_write(
    memory_db: Any, units: MemoryUnitRepository
) -> None:
    """``append`` maintains ``message_count``/``slice_count``/``size_bytes`` by increments; they must equal
    what a full recount gives, including past ten slices (two-digit array keys) and positioned inserts."""
    await units.save(MemoryUnit(id="u", core_id="c", conversation_messages=say("a"), slices=[MemorySlice()]))
    for i in range(12):
        await units.append(
            "u", say(f"m{i}", "é" * i), f"turn {i}", core_id="c", created_at=T0 + timedelta(hours=i)
        )
    await units.append("u", say("late"), "slow clock", core_id="c", created_at=T0 - timedelta(days=1))

    raw = await memory_db["memory_units"].find_one({"_id": "u"})

    assert raw["message_count"] == len(raw["conversation_messages"]) == 26
    assert raw["slice_count"] == len(raw["slices"]) == 14
    assert raw["size_bytes"] == len(bson.encode(raw))
    loaded = await units.get("u")
    assert loaded is not None
    await units.save(loaded)
    resaved = await memory_db["memory_units"].find_one({"_id": "u"})
    assert resaved["size_bytes"] == len(bson.encode(resaved))


async def test_a_unit_written_without_derived_fields_is_completed_before_appending(
    memory_db: Any, units: MemoryUnitRepository
) -> None:
    """Units written by Partner or another tool have no version or derived fields: the first append
    normalizes and completes them once, then lands after their messages; nothing they held is lost."""
    await memory_db["memory_units"].insert_one(
        {
            "_id": "legacy",
            "core_id": "c",
            "conversation_messages": [
                {"role": "user", "content": "old 1"},
                {"role": "assistant", "content": "old 2"},
            ],
            "slices": [
                {"id": "old-slice", "start_index": 0, "end_index": 2, "summary": "old", "created_at": T0}
            ],
            "updated_at": T0,
        }
    )

    piece = await units.append("legacy", say("new"), "new", core_id="c", created_at=T0 + timedelta(hours=1))

    assert (piece.start_index, piece.end_index) == (2, 3)
    unit = await units.get("legacy")
    assert unit is not None
    assert [m.content for m in unit.conversation_messages] == ["old 1", "old 2", "new"]
    assert [s.id for s in unit.complete_slices()] == ["old-slice", piece.id]
    raw = await memory_db["memory_units"].find_one({"_id": "legacy"})
    assert (raw["message_count"], raw["slice_count"], raw["version"]) == (3, 2, 2)
    assert raw["size_bytes"] == len(bson.encode(raw))


async def test_a_unit_written_without_derived_fields_gets_a_head(
    memory_db: Any, units: MemoryUnitRepository
) -> None:
    await memory_db["memory_units"].insert_one(
        {"_id": "legacy", "core_id": "c", "conversation_messages": [{"role": "user", "content": "x"}]}
    )
    head = await units.head("legacy")
    assert head is not None and (head.message_count, head.slice_count, head.version) == (1, 0, 1)
    unit = await units.get("legacy")
    assert unit is not None and unit.updated_at is not None

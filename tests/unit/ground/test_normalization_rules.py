"""Partner's slice normalization rules (``MemoryCore.normalizeMemoryUnit``), one table row per case.

Each row gives the slices of a three-message unit (``updated_at`` is ``UNIT_TIME`` unless the row says
otherwise) and the slices normalization must produce, identified by their summaries, in the order expected.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from partner_repo import (
    DuplicateSliceId,
    MemorySlice,
    MemoryUnit,
    MemoryUnitRepository,
    Message,
    normalize_unit,
)

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
UNIT_TIME = datetime(2024, 4, 1, 9, 30, 0, tzinfo=UTC)
T1 = datetime(2024, 3, 1, tzinfo=UTC)
T2 = T1 + timedelta(hours=1)
T3 = T1 + timedelta(hours=2)
NEW = "<a new uuid4>"
"""Expected id placeholder: a fresh UUID4 that no input slice carried."""
KEEP = object()
"""Expected ``updated_at`` placeholder: the unit's own ``UNIT_TIME``."""


@dataclass
class Row:
    name: str
    slices: list[dict[str, Any] | None]
    expected: list[tuple[str, str, int, int, datetime]]  # (summary, id, start, end, created_at)
    messages: int = 3
    updated_at: datetime | None = UNIT_TIME
    expected_updated_at: Any = KEEP
    extra: dict[str, Any] = field(default_factory=dict)


def piece(summary: str, **fields: Any) -> dict[str, Any]:
    return {"summary": summary, **fields}


def full(summary: str, slice_id: str, start: int, end: int, created_at: datetime = T1) -> dict[str, Any]:
    return piece(summary, id=slice_id, start_index=start, end_index=end, created_at=created_at)


ROWS = [
    # 1. unit updated_at missing -> now
    Row(
        "1 missing updated_at becomes now",
        [full("a", "a", 0, 1)],
        [("a", "a", 0, 1, T1)],
        updated_at=None,
        expected_updated_at=NOW,
    ),
    Row("1 present updated_at is kept", [full("a", "a", 0, 1)], [("a", "a", 0, 1, T1)]),
    # 2. max_end = number of conversation messages
    Row("2 max_end is the message count", [full("a", "a", 1, 50)], [("a", "a", 1, 5, T1)], messages=5),
    Row(
        "2 a unit without messages clamps every interval to [0, 0)",
        [full("a", "a", 2, 3)],
        [("a", "a", 0, 0, T1)],
        messages=0,
    ),
    # 3. None entries in slices are dropped
    Row(
        "3 None entries are dropped",
        [None, full("a", "a", 0, 1), None, full("b", "b", 1, 2), None],
        [("a", "a", 0, 1, T1), ("b", "b", 1, 2, T1)],
    ),
    Row("3 only None entries leave no slices", [None, None], []),
    # 4. slice id missing or blank -> a new UUID4
    Row(
        "4 missing id gets a new uuid4",
        [piece("a", start_index=0, end_index=1, created_at=T1)],
        [("a", NEW, 0, 1, T1)],
    ),
    Row("4 None id gets a new uuid4", [full("a", None, 0, 1)], [("a", NEW, 0, 1, T1)]),  # type: ignore[arg-type]
    Row("4 empty id gets a new uuid4", [full("a", "", 0, 1)], [("a", NEW, 0, 1, T1)]),
    Row("4 blank id gets a new uuid4", [full("a", " \t ", 0, 1)], [("a", NEW, 0, 1, T1)]),
    Row(
        "4 a present id is kept even if not a uuid",
        [full("a", "legacy-7", 0, 1)],
        [("a", "legacy-7", 0, 1, T1)],
    ),
    # 5. slice created_at missing -> the unit's updated_at
    Row(
        "5 missing created_at becomes the unit's updated_at",
        [piece("a", id="a", start_index=0, end_index=1)],
        [("a", "a", 0, 1, UNIT_TIME)],
    ),
    Row(
        "5 missing created_at and updated_at both become now",
        [piece("a", id="a", start_index=0, end_index=1)],
        [("a", "a", 0, 1, NOW)],
        updated_at=None,
        expected_updated_at=NOW,
    ),
    # 6. start_index missing or < 0 -> 0; otherwise min(start_index, max_end)
    Row(
        "6 missing start becomes 0", [piece("a", id="a", end_index=2, created_at=T1)], [("a", "a", 0, 2, T1)]
    ),
    Row("6 negative start becomes 0", [full("a", "a", -4, 2)], [("a", "a", 0, 2, T1)]),
    Row("6 start past the messages becomes max_end", [full("a", "a", 7, 9)], [("a", "a", 3, 3, T1)]),
    Row("6 start equal to max_end is kept", [full("a", "a", 3, 3)], [("a", "a", 3, 3, T1)]),
    Row("6 start inside the messages is kept", [full("a", "a", 2, 3)], [("a", "a", 2, 3, T1)]),
    # 7. end_index missing or < normalized start -> max_end; otherwise min(end_index, max_end)
    Row(
        "7 missing end becomes max_end",
        [piece("a", id="a", start_index=1, created_at=T1)],
        [("a", "a", 1, 3, T1)],
    ),
    Row("7 end before start becomes max_end", [full("a", "a", 2, 1)], [("a", "a", 2, 3, T1)]),
    Row("7 negative end becomes max_end", [full("a", "a", 0, -1)], [("a", "a", 0, 3, T1)]),
    Row("7 end past the messages becomes max_end", [full("a", "a", 1, 10)], [("a", "a", 1, 3, T1)]),
    Row("7 end equal to start is kept (empty interval)", [full("a", "a", 2, 2)], [("a", "a", 2, 2, T1)]),
    Row("7 end is compared with the normalized start", [full("a", "a", -5, -2)], [("a", "a", 0, 3, T1)]),
    Row("7 a start clamped to max_end keeps end at max_end", [full("a", "a", 9, 4)], [("a", "a", 3, 3, T1)]),
    Row(
        "6+7 missing start and end cover every message",
        [piece("a", id="a", created_at=T1)],
        [("a", "a", 0, 3, T1)],
    ),
    # 8. slices sorted by created_at ascending; ties keep their order (stable)
    Row(
        "8 slices are sorted by created_at",
        [full("c", "c", 2, 3, T3), full("a", "a", 0, 1, T1), full("b", "b", 1, 2, T2)],
        [("a", "a", 0, 1, T1), ("b", "b", 1, 2, T2), ("c", "c", 2, 3, T3)],
    ),
    Row(
        "8 ties keep their input order",
        [
            full("y", "y", 1, 2, T2),
            full("x", "x", 0, 1, T2),
            full("w", "w", 2, 3, T1),
            full("z", "z", 0, 3, T2),
        ],
        [("w", "w", 2, 3, T1), ("y", "y", 1, 2, T2), ("x", "x", 0, 1, T2), ("z", "z", 0, 3, T2)],
    ),
    Row(
        "8 a slice filled by rule 5 sorts by the unit's updated_at",
        [full("late", "late", 0, 1, NOW), piece("filled", id="f", start_index=1, end_index=2)],
        [("filled", "f", 1, 2, UNIT_TIME), ("late", "late", 0, 1, NOW)],
    ),
    # Beyond Partner: a repeated id keeps the first occurrence's id (in input order), later ones get new ids
    Row(
        "extra: a repeated id keeps the first occurrence's id",
        [full("first", "dup", 0, 1, T1), full("second", "dup", 1, 2, T2)],
        [("first", "dup", 0, 1, T1), ("second", NEW, 1, 2, T2)],
    ),
    Row(
        "extra: the first occurrence is by input order, not by sorted order",
        [full("first", "dup", 0, 1, T3), full("second", "dup", 1, 2, T1), full("third", "dup", 2, 3, T2)],
        [("second", NEW, 1, 2, T1), ("third", NEW, 2, 3, T2), ("first", "dup", 0, 1, T3)],
    ),
    Row(
        "extra: a None entry before the first occurrence does not count",
        [None, full("first", "dup", 0, 1), full("second", "dup", 1, 2)],
        [("first", "dup", 0, 1, T1), ("second", NEW, 1, 2, T1)],
    ),
]


def unit_for(row: Row) -> MemoryUnit:
    unit: MemoryUnit = MemoryUnit.model_validate(
        {
            "id": "unit-1",
            "core_id": "core-1",
            "conversation_messages": [{"role": "user", "content": f"m{i}"} for i in range(row.messages)],
            "slices": row.slices,
            "updated_at": row.updated_at,
        }
    )
    return unit


def is_uuid4(value: str) -> bool:
    try:
        return uuid.UUID(value).version == 4 and str(uuid.UUID(value)) == value
    except ValueError:
        return False


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_normalization_rule(row: Row) -> None:
    normalized = normalize_unit(unit_for(row), now=NOW)

    expected_updated_at = UNIT_TIME if row.expected_updated_at is KEEP else row.expected_updated_at
    assert normalized.updated_at == expected_updated_at
    got = [(s.summary, s.id, s.start_index, s.end_index, s.created_at) for s in normalized.slices if s]
    assert len(got) == len(normalized.slices) == len(row.expected)
    input_ids = {s.get("id") for s in row.slices if s is not None}
    for (summary, slice_id, start, end, created_at), want in zip(got, row.expected, strict=True):
        assert (summary, start, end, created_at) == (want[0], want[2], want[3], want[4])
        if want[1] == NEW:
            assert slice_id is not None and is_uuid4(slice_id) and slice_id not in input_ids
        else:
            assert slice_id == want[1]
    ids = [s[1] for s in got]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_normalizing_twice_changes_nothing(row: Row) -> None:
    once = normalize_unit(unit_for(row), now=NOW)
    twice = normalize_unit(once, now=NOW + timedelta(days=1))
    assert twice.model_dump() == once.model_dump()


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_normalization_does_not_mutate_its_input(row: Row) -> None:
    unit = unit_for(row)
    before = unit.model_dump()
    slice_objects = list(unit.slices)
    normalize_unit(unit, now=NOW)
    assert unit.model_dump() == before
    assert all(a is b for a, b in zip(unit.slices, slice_objects, strict=True))


def test_normalized_unit_shares_no_mutable_state_with_its_input() -> None:
    unit = unit_for(ROWS[0])
    normalized = normalize_unit(unit, now=NOW)
    normalized.conversation_messages.append(Message(role="user", content="later"))
    assert normalized.slices[0] is not None
    normalized.slices[0].summary = "changed"
    assert len(unit.conversation_messages) == 3
    assert unit.slices[0] is not None and unit.slices[0].summary == "a"


def test_missing_updated_at_defaults_to_the_current_time() -> None:
    unit = MemoryUnit(id="u", core_id="c")
    before = datetime.now(UTC) - timedelta(seconds=1)
    normalized = normalize_unit(unit)
    assert normalized.updated_at is not None
    assert before <= normalized.updated_at <= datetime.now(UTC)
    assert normalized.updated_at.microsecond % 1000 == 0


def test_new_ids_differ_between_slices_and_between_runs() -> None:
    unit = unit_for(Row("", [piece("a"), piece("b"), piece("c")], []))
    first = [s.id for s in normalize_unit(unit, now=NOW).slices if s]
    second = [s.id for s in normalize_unit(unit, now=NOW).slices if s]
    assert len(set(first)) == 3
    assert not set(first) & set(second)


# Beyond Partner, across units: a slice id already used by another unit is refused, on every write path.


async def _unit_holding(repository: MemoryUnitRepository, slice_id: str) -> None:
    await repository.append(
        "holder", [Message(role="user", content="x")], "held", core_id="c", slice_id=slice_id
    )


async def _save_new_unit_with(repository: MemoryUnitRepository, slice_id: str) -> None:
    unit = MemoryUnit.model_validate(
        {
            "id": "other",
            "core_id": "c",
            "conversation_messages": [{"role": "user", "content": "y"}],
            "slices": [{"id": slice_id, "summary": "mine"}],
        }
    )
    await repository.save(unit)


async def _save_loaded_unit_with(repository: MemoryUnitRepository, slice_id: str) -> None:
    unit = await repository.get("other")
    assert unit is not None
    unit.slices.append(MemorySlice(id=slice_id, summary="mine"))
    await repository.save(unit)


async def _append_with(repository: MemoryUnitRepository, slice_id: str) -> None:
    await repository.append(
        "other", [Message(role="user", content="y")], "mine", core_id="c", slice_id=slice_id
    )


WRITES = {
    "save a new unit": (False, _save_new_unit_with),
    "save a loaded unit": (True, _save_loaded_unit_with),
    "append creating the unit": (False, _append_with),
    "append to an existing unit": (True, _append_with),
}


@pytest.mark.parametrize("path", list(WRITES))
async def test_slice_id_of_another_unit_is_refused(memory_db: Any, path: str) -> None:
    other_exists, write = WRITES[path]
    repository = MemoryUnitRepository(memory_db)
    await _unit_holding(repository, "taken")
    if other_exists:
        await repository.append("other", [Message(role="user", content="y0")], "first", core_id="c")
    before = await repository.get("other")

    with pytest.raises(DuplicateSliceId) as refused:
        await write(repository, "taken")

    assert refused.value.slice_id == "taken"
    assert refused.value.other_unit_id == "holder"
    assert "taken" in str(refused.value) and "holder" in str(refused.value)
    after = await repository.get("other")
    assert (after.model_dump() if after else None) == (before.model_dump() if before else None)
    holder = await repository.get("holder")
    assert holder is not None and [s.id for s in holder.complete_slices()] == ["taken"]

"""Concurrent writers on one unit or core, with interleaving forced by the ``racy_db`` wrapper.

mongomock-motor runs every call synchronously, so without the wrapper concurrent tasks would never interleave
between a read and a write. The naive read-modify-write append below is the control: it loses messages
through the same wrapper, which shows the wrapper really forces the interleavings a network would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from partner_repo import (
    ConflictError,
    MemoryCoreRepository,
    MemorySlice,
    MemoryUnit,
    MemoryUnitRepository,
    Message,
)
from partner_repo.mongo import unit_document, unit_from_document

WRITERS = 50
PER_CALL = 3

AppendFn = Callable[[Any, int], Awaitable[None]]


def messages_of(call: int) -> list[Message]:
    """Distinct content per call, so each slice can be checked against the messages of its own call."""
    return [
        Message(role="user" if i % 2 == 0 else "assistant", content=f"call {call} msg {i}")
        for i in range(PER_CALL)
    ]


async def repository_append(database: Any, call: int) -> None:
    await MemoryUnitRepository(database).append("u", messages_of(call), f"summary {call}", core_id="c")


async def naive_append(database: Any, call: int) -> None:
    """The obvious implementation: read the whole unit, add to it, write it back without a guard."""
    units = database["memory_units"]
    document = await units.find_one({"_id": "u"})
    unit = unit_from_document(document)
    start = len(unit.conversation_messages)
    unit.conversation_messages.extend(messages_of(call))
    unit.slices.append(MemorySlice(summary=f"summary {call}", start_index=start, end_index=start + PER_CALL))
    await units.replace_one({"_id": "u"}, unit_document(unit))


async def run_writers(database: Any, append: AppendFn) -> MemoryUnit:
    await asyncio.gather(*(append(database, call) for call in range(WRITERS)))
    stored = await MemoryUnitRepository(database).get("u")
    assert stored is not None
    return stored


def tiling_problems(unit: MemoryUnit) -> list[str]:
    """Everything that breaks "disjoint, contiguous, every message once, each slice exactly its own call"."""
    problems: list[str] = []
    slices = unit.complete_slices()
    if len(slices) != WRITERS:
        problems.append(f"{len(slices)} slices, expected {WRITERS}")
    if len(unit.conversation_messages) != WRITERS * PER_CALL:
        problems.append(f"{len(unit.conversation_messages)} messages, expected {WRITERS * PER_CALL}")
    position = 0
    for piece in sorted(slices, key=lambda s: s.start_index or 0):
        if piece.start_index != position:
            problems.append(f"slice {piece.summary!r} starts at {piece.start_index}, expected {position}")
        call = int(piece.summary.split()[-1])
        covered = unit.conversation_messages[piece.start_index or 0 : piece.end_index or 0]
        if covered != messages_of(call):
            problems.append(f"slice {piece.summary!r} does not cover exactly the messages of call {call}")
        position = piece.end_index or 0
    if position != len(unit.conversation_messages):
        problems.append(f"slices end at {position}, the unit has {len(unit.conversation_messages)} messages")
    return problems


@pytest.mark.parametrize("unit_exists", [True, False], ids=["existing unit", "unit created by the race"])
async def test_concurrent_appends_tile_the_unit_exactly(racy_db: Any, unit_exists: bool) -> None:
    if unit_exists:
        await MemoryUnitRepository(racy_db).save(MemoryUnit(id="u", core_id="c"))

    unit = await run_writers(racy_db, repository_append)

    assert tiling_problems(unit) == []
    assert len({s.id for s in unit.complete_slices()}) == WRITERS
    assert sorted(int(s.summary.split()[-1]) for s in unit.complete_slices()) == list(range(WRITERS))


async def test_naive_read_modify_write_append_loses_data_under_the_same_interleaving(racy_db: Any) -> None:
    await MemoryUnitRepository(racy_db).save(MemoryUnit(id="u", core_id="c"))

    unit = await run_writers(racy_db, naive_append)

    assert len(unit.conversation_messages) < WRITERS * PER_CALL
    assert tiling_problems(unit) != []


async def test_the_naive_append_is_correct_when_calls_do_not_overlap(memory_db: Any) -> None:
    """The control is a faithful append: sequentially it tiles the unit, so only the race breaks it."""
    await MemoryUnitRepository(memory_db).save(MemoryUnit(id="u", core_id="c"))
    for call in range(WRITERS):
        await naive_append(memory_db, call)
    unit = await MemoryUnitRepository(memory_db).get("u")
    assert unit is not None and tiling_problems(unit) == []


async def test_concurrent_retries_with_one_slice_id_append_once(racy_db: Any) -> None:
    units = MemoryUnitRepository(racy_db)
    await units.append("u", messages_of(0), "before", core_id="c")

    results = await asyncio.gather(
        *(units.append("u", messages_of(1), "retried", core_id="c", slice_id="once") for _ in range(10))
    )

    assert len({r.model_dump_json() for r in results}) == 1
    unit = await units.get("u")
    assert unit is not None
    assert len(unit.conversation_messages) == 2 * PER_CALL
    assert [s.id for s in unit.complete_slices()].count("once") == 1


async def test_concurrent_saves_of_one_version_let_exactly_one_win(racy_db: Any) -> None:
    units = MemoryUnitRepository(racy_db)
    await units.save(MemoryUnit(id="u", core_id="c"))
    copies = [await units.get("u") for _ in range(5)]

    async def save(index: int) -> str:
        copy = copies[index]
        assert copy is not None
        copy.conversation_messages.append(Message(role="user", content=f"writer {index}"))
        try:
            await units.save(copy)
        except ConflictError:
            return "conflict"
        return "saved"

    outcomes = await asyncio.gather(*(save(i) for i in range(5)))

    assert sorted(outcomes) == ["conflict"] * 4 + ["saved"]
    stored = await units.get("u")
    assert stored is not None and len(stored.conversation_messages) == 1 and stored.version == 2


async def test_concurrent_get_or_create_agree_on_one_session(racy_db: Any) -> None:
    cores = MemoryCoreRepository(racy_db)

    created = await asyncio.gather(*(cores.get_or_create("agent") for _ in range(20)))
    sessions = await asyncio.gather(*(cores.session_id("agent") for _ in range(20)))

    assert len({core.memory_session_id for core in created} | set(sessions)) == 1
    assert await racy_db["memory_cores"].count_documents({}) == 1


async def test_concurrent_refreshes_leave_one_of_their_sessions_current(racy_db: Any) -> None:
    cores = MemoryCoreRepository(racy_db)
    old = await cores.session_id("agent")

    refreshed = await asyncio.gather(*(cores.refresh_session("agent") for _ in range(10)))

    assert len(set(refreshed)) == 10 and old not in refreshed
    assert await cores.session_id("agent") in refreshed
    core = await cores.get("agent")
    assert core is not None and core.version == 10

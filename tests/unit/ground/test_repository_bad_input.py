"""Bad input at the repository boundary: an ``InvalidInput`` (a ``PartnerRepoError``) and nothing written."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from partner_repo import (
    InvalidInput,
    MemoryCoreRepository,
    MemorySlice,
    MemoryUnit,
    MemoryUnitRepository,
    Message,
    PartnerRepoError,
)

USER = {"role": "user", "content": "hello"}
Call = Callable[[MemoryUnitRepository, MemoryCoreRepository], Awaitable[Any]]


async def snapshot(database: Any) -> dict[str, list[dict[str, Any]]]:
    """Every stored document, so a test can show that a refused call wrote nothing."""
    return {
        name: await database[name].find({}).sort("_id", 1).to_list(None)
        for name in ("memory_units", "memory_cores")
    }


def appending(messages: Any, **overrides: Any) -> Call:
    async def call(units: MemoryUnitRepository, cores: MemoryCoreRepository) -> Any:
        arguments: dict[str, Any] = {"unit_id": "u", "messages": messages, "summary": "s", "core_id": "c"}
        arguments.update(overrides)
        return await units.append(**arguments)

    return call


def saving_unit_changed_by(change: Callable[[MemoryUnit], None]) -> Call:
    async def call(units: MemoryUnitRepository, cores: MemoryCoreRepository) -> Any:
        unit = await units.get("u")
        assert unit is not None
        change(unit)
        return await units.save(unit)

    return call


def _unvalidated_message(role: str, content: str) -> Message:
    """A message that skipped validation, as code assigning through ``object.__setattr__`` could make."""
    message = object.__new__(Message)
    object.__setattr__(message, "role", role)
    object.__setattr__(message, "content", content)
    return message


def _set(field: str, value: Any) -> Callable[[MemoryUnit], None]:
    return lambda unit: setattr(unit, field, value)


BAD_CALLS: dict[str, Call] = {
    "append: unknown role": appending([{"role": "bot", "content": "x"}]),
    "append: unknown role after a valid message": appending([USER, {"role": "function", "content": "x"}]),
    "append: non-string content": appending([{"role": "user", "content": 42}]),
    "append: None content": appending([{"role": "user", "content": None}]),
    "append: a None message": appending([USER, None]),
    "append: messages is a string": appending("hello"),
    "append: messages is None": appending(None),
    "append: no messages": appending([]),
    "append: non-string summary": appending([USER], summary=None),
    "append: empty unit id": appending([USER], unit_id=""),
    "append: blank unit id": appending([USER], unit_id="  "),
    "append: non-string unit id": appending([USER], unit_id=12),
    "append: empty core id": appending([USER], core_id=""),
    "append: non-string core id": appending([USER], core_id=None),
    "append: another core's unit": appending([USER], core_id="not-c"),
    "append: empty slice id": appending([USER], slice_id=""),
    "append: blank slice id": appending([USER], slice_id=" "),
    "append: non-string slice id": appending([USER], slice_id=3),
    "append: created_at not a datetime": appending([USER], created_at="2024-01-01"),
    "append: negative rolling_size": appending([USER], rolling_size=-1),
    "append: negative retain_divisor": appending([USER], retain_divisor=-6),
    "save: not a unit": lambda units, cores: units.save({"id": "u", "core_id": "c"}),  # type: ignore[arg-type]
    "save: a None message added after loading": saving_unit_changed_by(
        lambda unit: unit.conversation_messages.append(None)  # type: ignore[arg-type]
    ),
    "save: an unknown role assigned after loading": saving_unit_changed_by(
        lambda unit: unit.conversation_messages.append(_unvalidated_message(role="bot", content="x"))
    ),
    "save: a blank id assigned after loading": saving_unit_changed_by(_set("id", " ")),
    "save: a non-string core id assigned after loading": saving_unit_changed_by(_set("core_id", 5)),
    "save: a non-string slice summary assigned after loading": saving_unit_changed_by(
        lambda unit: unit.slices.append(MemorySlice.model_construct(summary=7))
    ),
    "get: empty id": lambda units, cores: units.get(""),
    "get: non-string id": lambda units, cores: units.get(None),  # type: ignore[arg-type]
    "head: blank id": lambda units, cores: units.head(" "),
    "get_slice: empty slice id": lambda units, cores: units.get_slice("u", ""),
    "slice_messages: non-string slice id": lambda units, cores: units.slice_messages("u", 1),  # type: ignore[arg-type]
    "tail_messages: negative n": lambda units, cores: units.tail_messages("u", -1),
    "tail_messages: n not an int": lambda units, cores: units.tail_messages("u", 1.5),  # type: ignore[arg-type]
    "tail_messages: n a bool": lambda units, cores: units.tail_messages("u", True),
    "tail_messages: empty id": lambda units, cores: units.tail_messages("", 2),
    "messages_between: negative start": lambda units, cores: units.messages_between("u", -1, 1),
    "list_units: empty core id": lambda units, cores: units.list_units(""),
    "unit_ids: non-string core id": lambda units, cores: units.unit_ids(None),  # type: ignore[arg-type]
    "delete: empty id": lambda units, cores: units.delete(""),
    "core get_or_create: empty id": lambda units, cores: cores.get_or_create(""),
    "core get_or_create: now not a datetime": lambda units, cores: cores.get_or_create("c", now=1),  # type: ignore[arg-type]
    "core session_id: blank id": lambda units, cores: cores.session_id("  "),
    "core refresh_session: non-string id": lambda units, cores: cores.refresh_session(7),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
async def test_bad_input_is_refused_and_nothing_is_written(seeded: Any, name: str) -> None:
    units, cores = MemoryUnitRepository(seeded), MemoryCoreRepository(seeded)
    before = await snapshot(seeded)

    with pytest.raises(InvalidInput) as refused:
        await BAD_CALLS[name](units, cores)

    assert isinstance(refused.value, PartnerRepoError) and isinstance(refused.value, ValueError)
    assert str(refused.value)
    assert await snapshot(seeded) == before


async def test_the_refusal_names_what_was_wrong(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    with pytest.raises(InvalidInput, match="message 1 is None"):
        await units.append("u", [USER, None], "s", core_id="c")
    with pytest.raises(InvalidInput, match="role"):
        await units.append("u", [{"role": "bot", "content": "x"}], "s", core_id="c")
    with pytest.raises(InvalidInput, match="n must not be negative"):
        await units.tail_messages("u", -3)
    with pytest.raises(InvalidInput, match="unit_id must not be empty"):
        await units.get("")
    await units.append("u", [USER], "s", core_id="c")
    with pytest.raises(InvalidInput, match="belongs to core 'c', not 'd'"):
        await units.append("u", [USER], "s", core_id="d")


async def test_a_refused_save_keeps_the_pydantic_error_as_its_cause(seeded: Any) -> None:
    units = MemoryUnitRepository(seeded)
    unit = await units.get("u")
    assert unit is not None
    unit.conversation_messages.append(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="conversation_messages") as refused:
        await units.save(unit)
    assert refused.value.__cause__ is not None

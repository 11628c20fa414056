"""Ids are at most MAX_ID_LENGTH characters and storable: every entry point refuses a longer id (or one with a
lone surrogate) with InvalidInput, before anything is written; the models refuse it on construction."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from partner_repo import (
    AfterRollingRegistry,
    InvalidInput,
    MemoryCore,
    MemoryCoreRepository,
    MemorySlice,
    MemoryUnit,
    MemoryUnitRepository,
    Message,
    RollingListener,
    RollingService,
    SliceQueries,
    replay_dead_letters,
)
from partner_repo.cli import main
from partner_repo.cores import CoreLease
from partner_repo.listener.state import ListenerCheckpoints
from partner_repo.models import MAX_ID_LENGTH
from partner_repo.mongo import ALL_INDEXES
from partner_repo.validation import require_id

LONGEST = "i" * MAX_ID_LENGTH
TOO_LONG = "i" * (MAX_ID_LENGTH + 1)
TOO_LONG_ASTRAL = "😀" * (MAX_ID_LENGTH + 1)
LONE_SURROGATE = "emoji-\ud83d"
USER = Message(role="user", content="hello")
T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)

Call = Callable[[Any, str], Awaitable[Any]]


async def summarize(messages: list[Message]) -> str:
    return "summary"


def saving_loaded_unit(change: Callable[[MemoryUnit, str], None]) -> Call:
    async def call(database: Any, bad: str) -> Any:
        units = MemoryUnitRepository(database)
        unit = await units.get("u")
        assert unit is not None
        change(unit, bad)
        return await units.save(unit)

    return call


def _add_slice(unit: MemoryUnit, slice_id: str) -> None:
    unit.slices.append(MemorySlice.model_construct(id=slice_id, summary="s", created_at=T0))


ENTRY_POINTS: dict[str, Call] = {
    "append: unit id": lambda db, bad: MemoryUnitRepository(db).append(bad, [USER], "s", core_id="c"),
    "append: core id": lambda db, bad: MemoryUnitRepository(db).append("n", [USER], "s", core_id=bad),
    "append: slice id": lambda db, bad: MemoryUnitRepository(db).append(
        "u", [USER], "s", core_id="c", slice_id=bad
    ),
    "append: previous unit id": lambda db, bad: MemoryUnitRepository(db).append(
        "n", [USER], "s", core_id="c", previous_unit_id=bad
    ),
    "save: unit id assigned after loading": saving_loaded_unit(lambda unit, bad: setattr(unit, "id", bad)),
    "save: core id assigned after loading": saving_loaded_unit(
        lambda unit, bad: setattr(unit, "core_id", bad)
    ),
    "save: slice id added after loading": saving_loaded_unit(_add_slice),
    "units get": lambda db, bad: MemoryUnitRepository(db).get(bad),
    "units get_slice": lambda db, bad: MemoryUnitRepository(db).get_slice("u", bad),
    "core get_or_create": lambda db, bad: MemoryCoreRepository(db).get_or_create(bad),
    "core record": lambda db, bad: MemoryCoreRepository(db).record(bad, [USER]),
    "core set_session": lambda db, bad: MemoryCoreRepository(db).set_session("c", bad),
    "core lease acquire: owner": lambda db, bad: CoreLease(db).acquire(
        "c", bad, duration=timedelta(seconds=5)
    ),
    "rolling maybe_roll": lambda db, bad: RollingService(db, summarize).maybe_roll(bad),
    "admin find: core id": lambda db, bad: SliceQueries(db).find(core_id=bad),
    "admin get: slice id": lambda db, bad: SliceQueries(db).get(bad),
    "dead letters replay: group": lambda db, bad: replay_dead_letters(db, AfterRollingRegistry(), group=bad),
}


async def _listener(database: Any, group: str) -> Any:
    return RollingListener(database, AfterRollingRegistry(), group=group)


async def _checkpoints(database: Any, group: str) -> Any:
    return ListenerCheckpoints(database, group)


ENTRY_POINTS["listener group"] = _listener
ENTRY_POINTS["listener checkpoints group"] = _checkpoints


async def snapshot(database: Any) -> dict[str, list[dict[str, Any]]]:
    return {name: await database[name].find({}).sort("_id", 1).to_list(None) for name in ALL_INDEXES}


@pytest.mark.parametrize(
    "bad", [TOO_LONG, TOO_LONG_ASTRAL, LONE_SURROGATE], ids=["ascii", "astral", "surrogate"]
)
@pytest.mark.parametrize("name", list(ENTRY_POINTS))
async def test_an_id_over_the_limit_or_unstorable_is_refused_and_nothing_is_written(
    seeded: Any, name: str, bad: str
) -> None:
    before = await snapshot(seeded)

    with pytest.raises(InvalidInput):
        await ENTRY_POINTS[name](seeded, bad)

    assert await snapshot(seeded) == before


async def test_ids_of_exactly_the_limit_are_accepted_everywhere(memory_db: Any) -> None:
    units, cores = MemoryUnitRepository(memory_db), MemoryCoreRepository(memory_db)
    widest = "😀" * MAX_ID_LENGTH

    await cores.set_session(widest, LONGEST)
    piece = await units.append(LONGEST, [USER], "s", core_id=widest, slice_id=widest, previous_unit_id=widest)
    unit = await units.get(LONGEST)

    assert unit is not None and unit.core_id == widest and piece.id == widest
    assert (await SliceQueries(memory_db).get(widest)).unit_id == LONGEST


def test_the_refusal_names_the_limit_and_the_length() -> None:
    with pytest.raises(InvalidInput, match=f"unit_id must be at most {MAX_ID_LENGTH} characters, got 257"):
        require_id(TOO_LONG, "unit_id")
    with pytest.raises(
        InvalidInput, match="slice_id is not valid Unicode text: a lone surrogate at position 6"
    ):
        require_id(LONE_SURROGATE, "slice_id")


@pytest.mark.parametrize(
    "build",
    [
        lambda bad: MemoryUnit(id=bad, core_id="c"),
        lambda bad: MemoryUnit(id="u", core_id=bad),
        lambda bad: MemoryUnit(id="u", core_id="c", previous_unit_id=bad),
        lambda bad: MemorySlice(id=bad),
        lambda bad: MemoryCore(id=bad, memory_session_id="s", session_started_at=T0),
        lambda bad: MemoryCore(memory_session_id=bad, session_started_at=T0),
        lambda bad: MemoryCore(memory_session_id="s", session_started_at=T0, lease_owner=bad),
    ],
    ids=["unit id", "core id", "previous unit id", "slice id", "core", "session id", "lease owner"],
)
@pytest.mark.parametrize("bad", [TOO_LONG, LONE_SURROGATE], ids=["too long", "surrogate"])
def test_the_models_refuse_such_ids_on_construction(build: Callable[[str], Any], bad: str) -> None:
    with pytest.raises(ValidationError):
        build(bad)


@pytest.mark.parametrize(
    "arguments",
    [
        ["slices", "list", "--core", TOO_LONG],
        ["slices", "list", "--unit", TOO_LONG],
        ["slices", "show", TOO_LONG],
        ["units", "show", TOO_LONG],
    ],
    ids=["list --core", "list --unit", "slices show", "units show"],
)
def test_the_cli_refuses_an_id_over_the_limit_as_a_usage_error(arguments: list[str]) -> None:
    result = CliRunner().invoke(main, arguments, env={"MONGODB_URI": None})

    assert result.exit_code == 2 and f"at most {MAX_ID_LENGTH} characters" in result.output
    assert "Traceback" not in result.output

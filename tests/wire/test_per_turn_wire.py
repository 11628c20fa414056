"""The per-turn path on the wire: the real Motor driver against the benchmarks' scripted server, every command
counted with pymongo's command monitoring.

These pin the costs issues 12 and 19 set: a turn is one command, and a due roll after it three more (the
lease taken with the trigger and the snapshot, the append fenced on positions, the trim that also releases);
a summary back quickly renews nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from benchmarks.backends import motor_database, scripted_server
from benchmarks.monitor import WireMeter
from benchmarks.workload import turn
from partner_repo import RollingConfig, RollingService
from partner_repo.rolling import ExtractiveSummarizer

pytestmark = pytest.mark.wire


@pytest.fixture(scope="module")
def server_uri() -> Any:
    with scripted_server() as uri:
        yield uri


@pytest.fixture
async def metered(server_uri: str) -> AsyncIterator[tuple[Any, WireMeter]]:
    meter = WireMeter()
    async with motor_database(server_uri, listeners=[meter]) as database:
        yield database, meter


async def turns(service: RollingService, meter: WireMeter, count: int) -> list[tuple[list[str], bool]]:
    """The commands of each of ``count`` turns through ``record_and_roll``, and whether it rolled."""
    seen = []
    for number in range(count):
        meter.start()
        rolled = await service.record_and_roll("agent", turn(number))
        seen.append((meter.stop().commands, rolled is not None))
    return seen


async def test_a_turn_below_the_limit_is_one_command_once_the_core_exists(
    metered: tuple[Any, WireMeter],
) -> None:
    database, meter = metered
    service = RollingService(database, ExtractiveSummarizer(), RollingConfig())

    first, *later = await turns(service, meter, 17)

    assert first == (["findAndModify", "find", "insert"], False)  # a new core: the update, a look, the insert
    for commands, rolled in later:
        assert rolled or commands == ["findAndModify"]


async def test_a_due_roll_is_three_commands_after_its_turn_and_renews_nothing(
    metered: tuple[Any, WireMeter],
) -> None:
    database, meter = metered
    service = RollingService(database, ExtractiveSummarizer(), RollingConfig())

    first, second = [commands for commands, rolled in await turns(service, meter, 33) if rolled]

    # the session's first roll creates its unit; every later one appends to it
    assert first[:2] == ["findAndModify", "findAndModify"] and "insert" in first
    assert second == ["findAndModify", "findAndModify", "update", "update"]

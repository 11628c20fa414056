"""What the listener says about itself: counts that add up to what it handled, and a lease lost said as it
was lost (taken by a named listener, released or gone with its record, or expired), never "held by None"."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from partner_repo import ListenerCheckpoints, MemoryUnitRepository
from tests.conftest import until
from tests.unit.listener.support import Recorder, append, quick_listener, registry_of

TTL = 0.2


async def test_delivered_and_dead_lettered_add_up_to_the_deliveries_handled(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    pieces = [await append(units, "u1") for _ in range(5)]
    picky = Recorder("picky", fail_slices={pieces[1].id, pieces[3].id})
    async with quick_listener(memory_db, registry_of(picky, Recorder("healthy")), max_attempts=1) as listener:
        await listener.flush()
        lag = listener.lag()

    assert (lag.delivered, lag.dead_lettered) == (8, 2)


async def test_a_lease_taken_by_another_listener_names_it(
    memory_db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoints = ListenerCheckpoints(memory_db, "default")
    caplog.set_level(logging.INFO, "partner_repo.listener")
    async with quick_listener(memory_db, registry_of(Recorder()), lease_ttl=TTL) as listener:
        owner, beat = await checkpoints.lease_state()
        assert await checkpoints.take_over("intruder", owner, beat)
        await until(lambda: not listener.active)
        await until(lambda: "is held by intruder" in caplog.text)

    assert f"{listener.owner} lost the lease to listener intruder; standing by" in caplog.text


async def test_a_lease_whose_record_is_gone_is_not_said_to_be_taken_nor_held_by_none(
    memory_db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoints = ListenerCheckpoints(memory_db, "default")
    caplog.set_level(logging.INFO, "partner_repo.listener")
    async with quick_listener(memory_db, registry_of(Recorder()), lease_ttl=TTL) as listener:
        await checkpoints.delete()  # what a server restarted without its data leaves
        await until(lambda: not listener.active)
        await until(lambda: "could not be claimed" in caplog.text)

    assert "could not renew the lease: no listener holds it" in caplog.text
    assert "another listener" not in caplog.text and "None" not in caplog.text


async def test_a_heartbeat_failing_for_the_ttl_says_the_lease_expired(
    memory_db: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def unreachable(self: ListenerCheckpoints, owner: str, vitals: Any = None) -> bool:
        raise ConnectionError("server restarting")

    async with quick_listener(memory_db, registry_of(Recorder()), lease_ttl=TTL):
        monkeypatch.setattr(ListenerCheckpoints, "beat", unreachable)
        await until(lambda: "has expired" in caplog.text)
        monkeypatch.undo()

    expired = [r.getMessage() for r in caplog.records if "has expired" in r.getMessage()]
    assert "the lease could not be renewed for 0.2s and has expired" in expired[0]

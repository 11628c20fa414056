"""The rolling lease on a core: one holder at a time, free again when released or expired."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from rolling_support import T0, numbered

from partner_repo import InvalidInput, MemoryCoreRepository

MINUTE = timedelta(minutes=1)


@pytest.fixture
async def cores(memory_db: Any) -> MemoryCoreRepository:
    repository = MemoryCoreRepository(memory_db)
    await repository.record("agent", numbered(0, 4), at=T0)
    return repository


async def test_acquiring_a_free_lease_returns_the_core_with_its_window(cores: MemoryCoreRepository) -> None:
    core = await cores.acquire_lease("agent", "me", duration=MINUTE, now=T0)

    assert core is not None
    assert core.chat_messages == numbered(0, 4)
    assert core.lease_owner == "me" and core.lease_until == T0 + MINUTE


async def test_a_held_lease_is_not_acquired(cores: MemoryCoreRepository) -> None:
    await cores.acquire_lease("agent", "me", duration=MINUTE, now=T0)
    assert await cores.acquire_lease("agent", "you", duration=MINUTE, now=T0 + timedelta(seconds=59)) is None
    core = await cores.get("agent")
    assert core is not None and core.lease_owner == "me"


async def test_an_expired_lease_is_free(cores: MemoryCoreRepository) -> None:
    await cores.acquire_lease("agent", "crashed", duration=MINUTE, now=T0)
    core = await cores.acquire_lease("agent", "next", duration=MINUTE, now=T0 + MINUTE)
    assert core is not None and core.lease_owner == "next"


async def test_a_released_lease_is_free_at_once(cores: MemoryCoreRepository) -> None:
    await cores.acquire_lease("agent", "me", duration=MINUTE, now=T0)
    assert await cores.release_lease("agent", "me")
    core = await cores.acquire_lease("agent", "you", duration=MINUTE, now=T0)
    assert core is not None and core.lease_owner == "you"


async def test_only_the_owner_releases_or_renews_the_lease(cores: MemoryCoreRepository) -> None:
    await cores.acquire_lease("agent", "me", duration=MINUTE, now=T0)
    assert not await cores.release_lease("agent", "you")
    assert not await cores.renew_lease("agent", "you", duration=MINUTE, now=T0)
    core = await cores.get("agent")
    assert core is not None and core.lease_owner == "me" and core.lease_until == T0 + MINUTE


async def test_renewing_extends_the_lease(cores: MemoryCoreRepository) -> None:
    await cores.acquire_lease("agent", "me", duration=MINUTE, now=T0)
    assert await cores.renew_lease("agent", "me", duration=MINUTE, now=T0 + timedelta(seconds=50))
    assert await cores.acquire_lease("agent", "you", duration=MINUTE, now=T0 + timedelta(seconds=90)) is None


async def test_a_roller_whose_lease_was_taken_over_cannot_renew_it(cores: MemoryCoreRepository) -> None:
    await cores.acquire_lease("agent", "slow", duration=MINUTE, now=T0)
    await cores.acquire_lease("agent", "next", duration=MINUTE, now=T0 + 2 * MINUTE)
    assert not await cores.renew_lease("agent", "slow", duration=MINUTE, now=T0 + 2 * MINUTE)


async def test_the_lease_of_a_missing_core_is_not_acquired_and_nothing_is_created(
    cores: MemoryCoreRepository,
) -> None:
    assert await cores.acquire_lease("nobody", "me", duration=MINUTE, now=T0) is None
    assert await cores.get("nobody") is None


async def test_of_many_concurrent_acquirers_exactly_one_wins(racy_db: Any) -> None:
    cores = MemoryCoreRepository(racy_db)
    await cores.record("agent", numbered(0, 4), at=T0)

    won = await asyncio.gather(
        *(cores.acquire_lease("agent", f"roller-{n}", duration=MINUTE, now=T0) for n in range(10))
    )
    assert sum(core is not None for core in won) == 1


@pytest.mark.parametrize("duration", [timedelta(0), timedelta(seconds=-1), 60, None])
async def test_a_lease_needs_a_positive_duration(cores: MemoryCoreRepository, duration: Any) -> None:
    with pytest.raises(InvalidInput):
        await cores.acquire_lease("agent", "me", duration=duration, now=T0)


@pytest.mark.parametrize("owner", ["", " ", None])
async def test_a_lease_needs_an_owner(cores: MemoryCoreRepository, owner: Any) -> None:
    with pytest.raises(InvalidInput):
        await cores.acquire_lease("agent", owner, duration=MINUTE, now=T0)

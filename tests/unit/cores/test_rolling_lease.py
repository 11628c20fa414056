"""The rolling lease on a core: one holder at a time, free again when released, taken over only after the
taker watched it stay silent for its ttl on its own clock (never by comparing two processes' clocks)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from partner_repo import InvalidInput, MemoryCoreRepository
from partner_repo.cores._lease import CoreLease, lease_of
from partner_repo.leases import LeaseState, SilenceWatch
from tests.unit.rolling.support import T0, Ticks, numbered

MINUTE = timedelta(minutes=1)


@pytest.fixture
async def lease(memory_db: Any) -> CoreLease:
    await MemoryCoreRepository(memory_db).record("agent", numbered(0, 4), at=T0)
    return CoreLease(memory_db)


async def test_acquiring_a_free_lease_returns_the_core_with_its_window(lease: CoreLease) -> None:
    core = await lease.acquire("agent", "me", duration=MINUTE)

    assert core is not None
    assert core.chat_messages == numbered(0, 4)
    assert lease_of(core) == LeaseState(holder="me", beat=1, ttl_s=60.0)


async def test_a_held_lease_is_not_acquired(lease: CoreLease) -> None:
    await lease.acquire("agent", "me", duration=MINUTE)

    assert await lease.acquire("agent", "you", duration=MINUTE) is None
    assert await lease.state("agent") == LeaseState(holder="me", beat=1, ttl_s=60.0)


async def test_a_silent_holder_is_taken_over_with_the_state_that_was_watched(lease: CoreLease) -> None:
    await lease.acquire("agent", "crashed", duration=MINUTE)
    watched = await lease.state("agent")

    core = await lease.acquire("agent", "next", duration=MINUTE, silent=watched)

    assert core is not None and core.lease_owner == "next"


async def test_a_holder_that_beat_since_it_was_watched_is_not_taken_over(lease: CoreLease) -> None:
    await lease.acquire("agent", "slow", duration=MINUTE)
    watched = await lease.state("agent")
    assert await lease.renew("agent", "slow", duration=MINUTE)

    assert await lease.acquire("agent", "next", duration=MINUTE, silent=watched) is None
    assert (await lease.state("agent") or LeaseState(None, 0, 0)).holder == "slow"


async def test_a_released_lease_is_free_at_once(lease: CoreLease) -> None:
    await lease.acquire("agent", "me", duration=MINUTE)
    assert await lease.release("agent", "me")

    core = await lease.acquire("agent", "you", duration=MINUTE)
    assert core is not None and core.lease_owner == "you"


async def test_only_the_owner_releases_or_renews_the_lease(lease: CoreLease) -> None:
    await lease.acquire("agent", "me", duration=MINUTE)

    assert not await lease.release("agent", "you")
    assert not await lease.renew("agent", "you", duration=MINUTE)
    assert await lease.state("agent") == LeaseState(holder="me", beat=1, ttl_s=60.0)


async def test_renewing_beats(lease: CoreLease) -> None:
    await lease.acquire("agent", "me", duration=MINUTE)

    assert await lease.renew("agent", "me", duration=2 * MINUTE)
    assert await lease.state("agent") == LeaseState(holder="me", beat=2, ttl_s=120.0)


async def test_a_roller_whose_lease_was_taken_over_cannot_renew_it(lease: CoreLease) -> None:
    await lease.acquire("agent", "slow", duration=MINUTE)
    await lease.acquire("agent", "next", duration=MINUTE, silent=await lease.state("agent"))

    assert not await lease.renew("agent", "slow", duration=MINUTE)


async def test_a_lease_of_0_1_without_a_beat_can_be_taken_over(memory_db: Any) -> None:
    await MemoryCoreRepository(memory_db).record("agent", numbered(0, 2), at=T0)
    await memory_db["memory_cores"].update_one(
        {"_id": "agent"}, {"$set": {"lease_owner": "old", "lease_until": T0}, "$unset": {"lease_beat": ""}}
    )
    lease = CoreLease(memory_db)
    watched = await lease.state("agent")
    assert watched == LeaseState(holder="old", beat=0, ttl_s=0.0)

    core = await lease.acquire("agent", "new", duration=MINUTE, silent=watched)

    assert core is not None and core.lease_owner == "new"
    assert "lease_until" not in (await memory_db["memory_cores"].find_one({"_id": "agent"}))


async def test_the_lease_of_a_missing_core_is_not_acquired_and_nothing_is_created(lease: CoreLease) -> None:
    assert await lease.acquire("nobody", "me", duration=MINUTE) is None
    assert await lease.state("nobody") is None


async def test_of_many_concurrent_acquirers_exactly_one_wins(racy_db: Any) -> None:
    await MemoryCoreRepository(racy_db).record("agent", numbered(0, 4), at=T0)
    lease = CoreLease(racy_db)

    won = await asyncio.gather(*(lease.acquire("agent", f"roller-{n}", duration=MINUTE) for n in range(10)))

    assert sum(core is not None for core in won) == 1


@pytest.mark.parametrize("duration", [timedelta(0), timedelta(seconds=-1), 60, None])
async def test_a_lease_needs_a_positive_duration(lease: CoreLease, duration: Any) -> None:
    with pytest.raises(InvalidInput):
        await lease.acquire("agent", "me", duration=duration)


@pytest.mark.parametrize("owner", ["", " ", None])
async def test_a_lease_needs_an_owner(lease: CoreLease, owner: Any) -> None:
    with pytest.raises(InvalidInput):
        await lease.acquire("agent", owner, duration=MINUTE)


# -- watching for silence -----------------------------------------------------------------------------------


def test_a_lease_is_silent_only_once_its_holder_and_beat_stayed_unchanged_for_its_ttl() -> None:
    clock = Ticks()
    watch = SilenceWatch(clock)
    held = LeaseState(holder="r1", beat=7, ttl_s=60.0)

    assert not watch.silent("core", held)  # the first look starts the count
    clock.now += 59.9
    assert not watch.silent("core", held)
    clock.now += 0.1
    assert watch.silent("core", held)


def test_a_beat_restarts_the_count() -> None:
    clock = Ticks()
    watch = SilenceWatch(clock)
    watch.silent("core", LeaseState("r1", 7, 60.0))
    clock.now += 59

    assert not watch.silent("core", LeaseState("r1", 8, 60.0))
    clock.now += 59
    assert not watch.silent("core", LeaseState("r1", 8, 60.0))


def test_a_free_lease_is_never_silent() -> None:
    clock = Ticks()
    watch = SilenceWatch(clock)
    watch.silent("core", LeaseState(None, 3, 60.0))
    clock.now += 3600

    assert not watch.silent("core", LeaseState(None, 3, 60.0))


def test_the_watch_keeps_a_bounded_memory() -> None:
    clock = Ticks()
    watch = SilenceWatch(clock, size=2)
    for key in ("a", "b", "c"):
        watch.silent(key, LeaseState("r", 1, 1.0))
    clock.now += 5

    assert not watch.silent("a", LeaseState("r", 1, 1.0))  # forgotten: counted afresh
    assert watch.silent("c", LeaseState("r", 1, 1.0))

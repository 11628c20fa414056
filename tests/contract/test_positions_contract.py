"""Issue 19, findings 1-5: what identity by content (and fences a clear does not move) lose or duplicate.

Each test drives one finding through the public API, on every backend (in-memory always, a real server when
MONGODB_URI is set), and asserts the promise: every recorded message is stored exactly once per session, in
record order, plus only the retained context Partner repeats at a new session's start; nothing a clear erased
comes back. Failures are injected at the wire (:class:`~observed.ObservedDatabase`), and lease takeovers are
forced with a monotonic clock the test moves, never by waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import pytest
from pymongo.errors import ConnectionFailure

from partner_repo import (
    ConnectionFailed,
    MemoryCoreRepository,
    MemoryEraser,
    MemoryUnit,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingService,
)
from tests.conftest import until
from tests.contract.observed import ObservedDatabase, Wire, Write
from tests.contract.positions_support import Ticks
from tests.contract.rolling_contract_support import T0, numbered, summarize

IDLE = timedelta(hours=1)
TTL = timedelta(seconds=30)
THANKS = [Message(role="user", content="thanks"), Message(role="assistant", content="you're welcome")]

R = TypeVar("R")


async def taking_over(database: Any, ticks: Ticks, act: Callable[[], Awaitable[R]]) -> R:
    """``act()`` (a roll) by a process that may find the lease held by a roller that died: it then watches the
    lease stay silent for its ttl (moving its clock, ``ticks``) and acts again, taking the lease over."""
    state = await MemoryCoreRepository(database).window_state("agent")
    if state is None or state.lease.holder is None:
        return await act()
    assert await act() is None  # held: this first look starts the count
    ticks.now += TTL.total_seconds()
    return await act()


async def roll_then_lose_the_connection(database: Any, config: RollingConfig, ticks: Ticks) -> None:
    """A roller whose connection drops right after its append lands: its trim (and its lease release) never
    reach the server. Takes over the lease a roller like it left behind."""
    observed = ObservedDatabase(database, Wire())
    observed.cut_after_next_append()
    service = RollingService(observed, summarize, config, monotonic=ticks)
    with contextlib.suppress(ConnectionFailed):  # the library's error for the cut connection (issue 30)
        await taking_over(database, ticks, lambda: service.roll("agent", now=T0))
    assert observed.cut, "the roll's append did not land"


def texts(messages: list[Message]) -> list[str]:
    """Contents only: a failing comparison then shows which messages differ."""
    return [message.content for message in messages]


async def session_texts(database: Any, first_unit_id: str) -> list[str]:
    """The contents of a session: its unit's messages, then those of each unit continuing it, in order."""
    units = await MemoryUnitRepository(database).list_units("agent")
    following = {unit.previous_unit_id: unit for unit in units if unit.previous_unit_id is not None}
    chain: list[MemoryUnit] = [next(unit for unit in units if unit.id == first_unit_id)]
    while chain[-1].id in following:
        chain.append(following[chain[-1].id])
    return [message.content for unit in chain for message in unit.conversation_messages]


# -- finding 1 ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("trim", ["lands", "fails"])
async def test_a_failed_trim_then_an_idle_roll_repeats_only_the_retained_context(
    database: Any, trim: str
) -> None:
    """Finding 1. A count roll stores 12 messages; its trim lands, or fails (the connection drops right after
    the append). The conversation goes idle, the idle roll (finding nothing new) switches the session, then
    four more messages and a roll. Either way the new session holds the retained context (the last
    12 // 3 messages of the rolled snapshot) and the new messages: a failed trim must not store the whole
    untrimmed window again. (With ``lands`` this also holds today: the idle roll keeps Partner's context.)"""
    cores, units = MemoryCoreRepository(database), MemoryUnitRepository(database)
    config = RollingConfig(trigger_limit=12, retain_divisor=3, idle_after=IDLE, lease_duration=TTL)
    first = await cores.record("agent", numbered(0, 12), at=T0)
    observed = ObservedDatabase(database, Wire())
    if trim == "fails":
        observed.cut_after_next_append()
    with contextlib.suppress(ConnectionFailed):  # the library's error for the cut connection (issue 30)
        await RollingService(observed, summarize, config).maybe_roll("agent", now=T0 + timedelta(minutes=1))
    rolled = await units.get(first.memory_session_id)
    assert rolled is not None and texts(rolled.conversation_messages) == texts(numbered(0, 12))  # landed

    ticks = Ticks()
    idle = RollingService(database, summarize, config, monotonic=ticks)
    await taking_over(database, ticks, lambda: idle.maybe_roll("agent", now=T0 + 2 * IDLE))
    session = await cores.session_id("agent")
    assert session != first.memory_session_id  # the idle roll switched the session
    await cores.record("agent", numbered(12, 16), at=T0 + 3 * IDLE)
    assert await idle.roll("agent", now=T0 + 3 * IDLE) is not None

    old, new = await units.get(first.memory_session_id), await units.get(session)
    assert old is not None and new is not None
    assert texts(old.conversation_messages) == texts(numbered(0, 12))
    assert texts(new.conversation_messages) == texts(numbered(8, 16))


# -- finding 2 ---------------------------------------------------------------------------------------------


async def test_after_a_clear_new_messages_repeating_the_units_last_ones_are_all_stored(database: Any) -> None:
    """Finding 2. The unit ends with "thanks" / "you're welcome"; the window is cleared; the user says them
    again, and more. They are new messages: the next roll stores all of them, not only what follows the
    pair that happens to equal the unit's tail."""
    cores = MemoryCoreRepository(database)
    service = RollingService(database, summarize)
    first = await cores.record("agent", [*numbered(0, 4), *THANKS], at=T0)
    assert await service.roll("agent", now=T0) is not None
    assert await MemoryEraser(database).clear_window("agent") == 1  # the retained "you're welcome"

    await cores.record("agent", [*THANKS, *numbered(4, 6)], at=T0 + timedelta(minutes=1))
    assert await service.roll("agent", now=T0 + timedelta(minutes=1)) is not None

    stored = await session_texts(database, first.memory_session_id)
    assert stored == texts([*numbered(0, 4), *THANKS, *THANKS, *numbered(4, 6)])


# -- finding 3 ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("divisor", [0, 1])
async def test_a_window_retained_whole_across_three_continuation_units_is_stored_once(
    database: Any, divisor: int
) -> None:
    """Finding 3. With ``retain_divisor`` 0 or 1 the window keeps everything it rolled, and with units this
    small every roll opens a continuation, so the window's already-stored front soon spans more than the
    current unit and the one it continues. Each roll must still store only what is new."""
    cores = MemoryCoreRepository(database)
    service = RollingService(
        database, summarize, RollingConfig(trigger_limit=4, retain_divisor=divisor, unit_soft_limit_bytes=1)
    )
    first = await cores.record("agent", numbered(0, 4), at=T0)
    assert await service.roll("agent", now=T0) is not None
    for start in range(4, 12, 2):
        await cores.record("agent", numbered(start, start + 2), at=T0)
        await service.roll("agent", now=T0)

    assert await session_texts(database, first.memory_session_id) == texts(numbered(0, 12))


async def test_windows_left_untrimmed_by_lease_takeovers_across_continuation_units_store_nothing_twice(
    database: Any,
) -> None:
    """Finding 3, through takeovers. Four rollers in turn take the lease over from the one before (which
    died right after its append, so its trim never landed), each storing two new messages in a continuation
    unit of its own; the untrimmed window then spans three units. A last, healthy roller takes over too.
    Every message is stored once, in order, across the chain."""
    cores = MemoryCoreRepository(database)
    config = RollingConfig(trigger_limit=4, unit_soft_limit_bytes=1, lease_duration=TTL)
    first = await cores.record("agent", numbered(0, 6), at=T0)
    await roll_then_lose_the_connection(database, config, Ticks())
    for start in (6, 8, 10):
        await cores.record("agent", numbered(start, start + 2), at=T0)
        await roll_then_lose_the_connection(database, config, Ticks())

    await cores.record("agent", numbered(12, 14), at=T0)
    ticks = Ticks()
    healthy = RollingService(database, summarize, config, monotonic=ticks)
    assert await taking_over(database, ticks, lambda: healthy.roll("agent", now=T0)) is not None

    assert await session_texts(database, first.memory_session_id) == texts(numbered(0, 14))


async def test_a_continuation_starts_after_what_others_stored_in_the_full_unit_since_the_roller_last_saw_it(
    database: Any,
) -> None:
    """Finding 3, through a remembered head. Roller ``early`` stores the session's first four messages (and
    remembers the unit's head); another roller stores two more in the same unit; a third finds the unit full,
    seals it and switches the core to a continuation, but its append never arrives. ``early`` rolls next: the
    continuation must start at the full unit's mark (after the other roller's messages), not where ``early``
    last saw that unit end. The window keeps everything (``retain_divisor`` 1), so nothing else hides it."""
    cores = MemoryCoreRepository(database)
    roomy = RollingConfig(trigger_limit=4, retain_divisor=1, lease_duration=TTL)
    first = await cores.record("agent", numbered(0, 4), at=T0)
    early = RollingService(database, summarize, roomy)
    assert await early.roll("agent", now=T0) is not None
    await cores.record("agent", numbered(4, 6), at=T0)
    assert await RollingService(database, summarize, roomy).roll("agent", now=T0) is not None

    await cores.record("agent", numbered(6, 8), at=T0)
    observed = ObservedDatabase(database, Wire())

    async def lost(write: Write) -> None:
        if write.collection == "memory_units" and write.contents:
            raise ConnectionFailure("connection lost before the append (injected by the test)")

    observed.before = lost
    full = RollingConfig(trigger_limit=4, retain_divisor=1, unit_soft_limit_bytes=1, lease_duration=TTL)
    with pytest.raises(ConnectionFailed) as raised:  # the library's error, the driver's chained (issue 30)
        await RollingService(observed, summarize, full).roll("agent", now=T0)
    assert isinstance(raised.value.__cause__, ConnectionFailure)
    switched = await cores.get("agent")
    assert switched is not None and switched.session_continues == first.memory_session_id

    assert await early.roll("agent", now=T0) is not None
    assert await session_texts(database, first.memory_session_id) == texts(numbered(0, 8))


# -- finding 4 ---------------------------------------------------------------------------------------------


class StallingSummarizer:
    """Holds a roll inside the summarizer (after its lease and snapshot) until ``resume`` is set."""

    def __init__(self) -> None:
        self.inside = asyncio.Event()
        self.resume = asyncio.Event()

    async def __call__(self, messages: list[Message]) -> str:
        self.inside.set()
        await self.resume.wait()
        return "summary"


async def test_a_stalled_roller_does_not_store_what_clear_window_erased(database: Any) -> None:
    """Finding 4, the clear half. A roller takes the lease and its snapshot of four secrets, then stalls.
    ``clear_window`` watches the lease stay silent past its ttl, takes it over and clears the window. The
    roller resumes; by its own clock the summary came back fast, so it does not look at the lease again. The
    erased secrets must not end up in memory."""
    cores, units = MemoryCoreRepository(database), MemoryUnitRepository(database)
    secrets = [Message(role="user", content=f"secret {n}") for n in range(4)]
    await cores.record("agent", secrets, at=T0)
    summarizer = StallingSummarizer()
    roller = RollingService(database, summarizer, RollingConfig(lease_duration=TTL), monotonic=Ticks())
    roll = asyncio.create_task(roller.roll("agent", now=T0))
    await summarizer.inside.wait()

    eraser_clock = Ticks()
    clear = asyncio.create_task(MemoryEraser(database, monotonic=eraser_clock).clear_window("agent"))
    await until(lambda: eraser_clock.reads >= 2)  # it found the lease held and started watching it
    eraser_clock.now += 2 * TTL.total_seconds()
    assert await clear == 4
    summarizer.resume.set()
    with contextlib.suppress(Exception):  # how the stale roll ends is its own business
        await roll

    stored = [m.content for unit in await units.list_units("agent") for m in unit.conversation_messages]
    assert [text for text in stored if text.startswith("secret")] == []
    assert await cores.snapshot("agent") == []


# -- finding 5 ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("window", [{}, {"chat_messages": None}], ids=["missing", "null"])
async def test_a_core_written_by_another_tool_without_a_window_takes_turns_and_rolls(
    database: Any, window: dict[str, Any]
) -> None:
    """Finding 5. A core another tool inserted as ``{_id, memory_session_id, session_started_at}`` (its
    window missing, or null) reads as an empty window; it must also take turns: ``record`` answers with the
    right window size, and rolls store every turn in the tool's session."""
    await database["memory_cores"].insert_one(
        {"_id": "agent", "memory_session_id": "their-session", "session_started_at": T0, **window}
    )
    cores = MemoryCoreRepository(database)
    service = RollingService(database, summarize, RollingConfig(trigger_limit=4))

    recorded = await cores.record("agent", numbered(0, 2), at=T0)
    assert (recorded.window_size, recorded.memory_session_id) == (2, "their-session")
    assert (await cores.record("agent", numbered(2, 4), at=T0)).window_size == 4
    rolled = await service.roll("agent", now=T0)
    assert rolled is not None and list(rolled.increment_messages) == numbered(0, 4)
    assert await service.record_and_roll("agent", numbered(4, 8), at=T0) is not None

    assert await session_texts(database, "their-session") == texts(numbered(0, 8))

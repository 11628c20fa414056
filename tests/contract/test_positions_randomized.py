"""Issue 19: random interleavings through the public API, checked by an exact oracle after every run.

Writers record numbered messages into a few cores while rollers (each a RollingService with its own monotonic
clock, jumping forward at random, so leases are seen silent and taken over mid-roll) roll them by count, by
idleness (a new session) and by hand. Some rolls lose their connection right after their append lands (their
trim and lease release never arrive); some calls of a roller stall (as a paused process would); a clearer
empties windows (``MemoryEraser.clear_window``, its clock jumping too, so it takes the lease from a roller
stalled mid-roll); units are small, so rolls open continuation units. At the end every core gets a last turn
and a roll, then :func:`positions_support.storage_problems` checks that every recorded message that was not
erased is stored exactly once per session, in record order, plus only the retained context repeated at a
session start; that slices tile their units; that no cleared text comes back.

The seed fixes every random choice of a run; the tasks also keep a pace in real time (as stalls and a waiting
clear do), so a rerun interleaves alike, not identically. A failing run's message names its seed, its
configuration, what happened (rolls, cut-offs, clears) and each session's positions. To narrow a failure down,
``Interleaving`` takes each ingredient as an argument (``cut_chance=0``, ``clears=0``, ``jumps=False``, ...).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from pymongo.errors import ConnectionFailure

from partner_repo import (
    ConflictError,
    ConnectionFailed,
    MemoryCoreRepository,
    MemoryEraser,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingService,
)
from tests.contract.observed import ObservedDatabase, Wire
from tests.contract.positions_support import CoreHistory, Ticks, storage_problems
from tests.contract.rolling_contract_support import T0, summarize

SEEDS = (1, 2, 3, 4)
DIVISORS = (0, 1, 6)
CORE_IDS = ("c0", "c1", "c2")
WRITERS, ROLLERS = 3, 3
TURNS, TURNS_ON_A_SERVER = 80, 40
"""Turns per writer; on a server a write takes milliseconds (SecantusDB: about 15): fewer keep runs short."""
WRITER_PAUSE_S, ROLLER_PAUSE_S = 0.02, 0.003
"""At most this long (real seconds) between two turns of a writer, between two attempts of a roller: the
tasks keep a pace in real time, as a roller's stall (observed.STALL_S) and a waiting clear do."""
CUT_CHANCE = 0.15
"""How often a roll loses its connection right after its append lands."""
CLEARS = 8
STALL_CHANCE = 0.01
"""How often a roller's call to the database stalls (for observed.STALL_S)."""
STEPS = {"count": 8, "idle": 2, "roll": 2, "refresh": 1}
"""What a roller does, by weight: a count roll, an idle roll (a new session), a roll, a roll and a refresh."""
UNIT_LIMITS = (1, 800, 3000)
"""Unit soft limits a run picks from: every roll a continuation, about every third, about every tenth."""
IDLE = timedelta(hours=1)
TTL = timedelta(seconds=30)
JUMP = 1.5 * TTL.total_seconds()


class Interleaving:
    """One seeded run: its tasks, what they recorded and cleared, and every write they sent."""

    def __init__(
        self,
        database: Any,
        seed: int,
        divisor: int,
        *,
        cut_chance: float = CUT_CHANCE,
        clears: int = CLEARS,
        steps: dict[str, int] = STEPS,
        unit_limits: tuple[int, ...] = UNIT_LIMITS,
        jumps: bool = True,
        stall_chance: float = STALL_CHANCE,
        turns: int = TURNS,
    ) -> None:
        self.database = database
        self.rng = random.Random(seed)
        self.cut_chance, self.clears, self.steps, self.jumps = cut_chance, clears, steps, jumps
        self.stall_chance, self.turns_each = stall_chance, turns
        self.wire = Wire()
        self.config = RollingConfig(
            trigger_limit=self.rng.randint(3, 8),
            retain_divisor=divisor,
            idle_after=IDLE,
            unit_soft_limit_bytes=self.rng.choice(unit_limits),
            lease_duration=TTL,
        )
        self.histories = {core_id: CoreHistory(core_id) for core_id in CORE_IDS}
        self.turns = 0
        self.progress = asyncio.Condition()
        self.writing = True
        self.surprises: list[str] = []
        self.seen: Counter[str] = Counter()

    def branch(self) -> random.Random:
        return random.Random(self.rng.random())

    def clock(self, rng: random.Random, chance: float) -> Ticks:
        """A monotonic clock that jumps forward at random (unless this run has no jumps)."""
        return Ticks(rng, jump=JUMP, chance=chance if self.jumps else 0.0)

    def observed(self, stall_chance: float = 0.0) -> ObservedDatabase:
        return ObservedDatabase(self.database, self.wire, self.branch(), stall_chance=stall_chance)

    async def play(self) -> None:
        rollers = [asyncio.create_task(self.roller(n)) for n in range(ROLLERS)]
        await asyncio.gather(*(self.writer() for _ in range(WRITERS)), self.clearer())
        self.writing = False
        await asyncio.gather(*rollers)
        await self.settle()

    async def writer(self) -> None:
        rng, cores = self.branch(), MemoryCoreRepository(self.observed())
        for _ in range(self.turns_each):
            await self.record(cores, self.histories[rng.choice(CORE_IDS)], rng.choice((1, 2, 2, 3)))
            async with self.progress:
                self.turns += 1
                self.progress.notify_all()
            await asyncio.sleep(rng.uniform(0, WRITER_PAUSE_S))

    @staticmethod
    async def record(cores: MemoryCoreRepository, history: CoreHistory, count: int) -> None:
        async with history.lock:  # one record at a time per core: the record order is known
            messages = history.next_messages(count)
            await cores.record(history.core_id, messages, at=T0)
            history.recorded += [m.content for m in messages]

    async def roller(self, number: int) -> None:
        rng, observed = self.branch(), self.observed(self.stall_chance)
        service = RollingService(observed, self.summarizer(rng), self.config, monotonic=self.clock(rng, 0.2))
        actions: dict[str, Callable[[str], Awaitable[Any]]] = {
            "count": lambda core_id: service.maybe_roll(core_id, now=T0),
            "idle": lambda core_id: service.maybe_roll(core_id, now=T0 + 3 * IDLE),
            "roll": lambda core_id: service.roll(core_id, now=T0),
            "refresh": lambda core_id: service.roll(core_id, refresh_session=True, now=T0 + 3 * IDLE),
        }
        while self.writing:
            core_id = rng.choice(CORE_IDS)
            step = rng.choices(list(self.steps), weights=list(self.steps.values()))[0]
            if rng.random() < self.cut_chance:
                observed.cut_after_next_append()
            try:
                self.seen[step] += await actions[step](core_id) is not None
                self.seen["attempts"] += 1
            except (ConnectionFailure, ConnectionFailed, ConflictError) as exc:
                self.seen[type(exc).__name__] += 1
            except Exception as exc:
                self.surprises.append(f"roller {number}, {step} of {core_id}: {exc!r}")
            self.seen["cut off after an append"] += observed.cut
            observed.reconnect()
            await asyncio.sleep(rng.uniform(0, ROLLER_PAUSE_S))

    @staticmethod
    def summarizer(rng: random.Random) -> Callable[[list[Message]], Awaitable[str]]:
        async def slow_or_fast(messages: list[Message]) -> str:
            for _ in range(rng.choice((0, 0, 1, 3, 10, 30))):
                await asyncio.sleep(0)
            return await summarize(messages)

        return slow_or_fast

    async def clearer(self) -> None:
        rng = self.branch()
        eraser = MemoryEraser(self.observed(), lease_wait=timedelta(days=1), monotonic=self.clock(rng, 1.0))
        for due in sorted(rng.sample(range(WRITERS * self.turns_each), self.clears)):
            async with self.progress:
                await self.progress.wait_for(lambda due=due: self.turns >= due)
            history = self.histories[rng.choice(CORE_IDS)]
            async with history.lock:  # no record lands meanwhile: the window ends at the last one recorded
                start = self.wire.tick()
                cleared = await eraser.clear_window(history.core_id)
                history.cleared(cleared, self.wire.writes, start, self.wire.tick())
            self.seen["messages cleared"] += cleared

    async def settle(self) -> None:
        """A last turn and a roll on every core (taking over a lease a cut-off roller left behind)."""
        ticks, observed = Ticks(), self.observed()
        cores = MemoryCoreRepository(observed)
        service = RollingService(observed, summarize, self.config, monotonic=ticks)
        for history in self.histories.values():
            await self.record(cores, history, 2)
            for _ in range(3):
                try:
                    if await service.roll(history.core_id, now=T0) is not None:
                        break
                except Exception as exc:
                    self.surprises.append(f"the last roll of {history.core_id}: {exc!r}")
                    break
                ticks.now += 2 * TTL.total_seconds()
            else:
                self.surprises.append(f"core {history.core_id}: the last roll stored nothing")

    async def problems(self) -> list[str]:
        units = MemoryUnitRepository(self.database)
        found = list(self.surprises)
        for history in self.histories.values():
            found += storage_problems(history, await units.list_units(history.core_id), self.wire.writes)
        return found


@pytest.mark.parametrize("divisor", DIVISORS)
@pytest.mark.parametrize("seed", SEEDS)
async def test_random_interleavings_store_every_message_once_per_session(
    database: Any, seed: int, divisor: int, request: pytest.FixtureRequest
) -> None:
    """See the module docstring; the run's seed, configuration and what happened are in the message."""
    in_memory = request.node.callspec.params["database"] == "memory"
    run = Interleaving(database, seed, divisor, turns=TURNS if in_memory else TURNS_ON_A_SERVER)
    await run.play()
    problems = await run.problems()
    recorded = sum(len(h.recorded) for h in run.histories.values())
    summary = f"seed {seed}, retain_divisor {divisor}, {run.config}: {recorded} messages, {dict(run.seen)}"
    print(summary)
    assert not problems, summary + "\n" + "\n".join(problems[:60])

"""Issue 30's findings 1 to 7, each through the public API, on the in-memory backend and on a server.

Every test here failed before its fix (docs/protocol.md names the row each one exercises): an operation that
takes two writes, or a fence built for one operation that another never met. Processes are simulated by
:class:`protocol_support.ProcessDatabase` (a process that dies right after a given write lands, or stalls
before one); their clocks (:class:`protocol_support.StepClock`) move at every read, so a silent lease is
taken over after a few looks and no test waits in real time for a ttl.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from pymongo.errors import OperationFailure

from partner_repo import (
    ConflictError,
    InvalidInput,
    MemoryCoreRepository,
    MemoryEraser,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingService,
)
from partner_repo.mongo import MAX_DOCUMENT_BYTES, bson_size, messages_bytes
from tests.contract.observed import Wire
from tests.contract.protocol_support import (
    ProcessDatabase,
    ProcessDied,
    StepClock,
    session_switch,
    unit_write,
    until_parked_or_done,
)
from tests.contract.rolling_contract_support import T0, numbered, summarize

TTL = timedelta(seconds=30)
MIB = 1024 * 1024


def config(**overrides: Any) -> RollingConfig:
    return RollingConfig(
        **{"trigger_limit": 4, "lease_duration": TTL, "idle_after": timedelta(hours=1), **overrides}
    )


class Calls:
    """A summarizer that counts its calls (shared by the processes of a test)."""

    def __init__(self) -> None:
        self.increments: list[list[str]] = []

    async def __call__(self, messages: list[Message]) -> str:
        self.increments.append([m.content for m in messages])
        return await summarize(messages)


async def stored_contents(database: Any, core_id: str) -> list[str]:
    units = await MemoryUnitRepository(database).list_units(core_id)
    return [m.content for unit in units for m in unit.conversation_messages]


async def any_unit_holds(database: Any, contents: list[str]) -> bool:
    found = await database["memory_units"].find_one({"conversation_messages.content": {"$in": contents}})
    return found is not None


def eraser(database: Any) -> MemoryEraser:
    """An eraser whose clock moves a lease's ttl at every look: it takes a silent lease over at once."""
    return MemoryEraser(database, monotonic=StepClock(step=100), lease_wait=timedelta(hours=1))


async def a_clear_dies_after_its_mark(database: Any, core_id: str) -> None:
    """A clear of ``core_id`` whose process dies right after its mark lands (the session's unit marked, or a
    reservation left), before it empties the window: its hold stays until the ttl lapses."""
    clearer = ProcessDatabase(database, Wire(), "clearer")
    clearer.die_after(unit_write)
    with pytest.raises(ProcessDied):
        await eraser(clearer).clear_window(core_id)


async def a_clear_marks_late_and_dies(
    database: Any, core_id: str, meanwhile: Callable[[], Awaitable[None]]
) -> None:
    """A clear of ``core_id`` that stalls before its mark while ``meanwhile`` runs (a roller taking its hold
    over and rolling), then marks the session's unit all the same, too late, and dies before it could start
    again: its first try at the mark misses (the roller's append moved the version it read), the second
    lands."""
    clearer = ProcessDatabase(database, Wire(), "late clearer")
    clearer.stall_before(unit_write)
    unit_writes = itertools.count(1)
    clearer.die_after(lambda sent: unit_write(sent) and next(unit_writes) == 2)
    clearing = asyncio.create_task(eraser(clearer).clear_window(core_id))
    await until_parked_or_done(clearing, clearer)
    assert clearer.parked, "the clear should park before its mark"
    await meanwhile()
    clearer.thaw()
    with pytest.raises(ProcessDied):
        await clearing


async def stall_a_roll(database: Any, core_id: str) -> tuple[asyncio.Task[Any], ProcessDatabase]:
    """A roll of ``core_id`` parked before its first write to the units (its lease and snapshot taken)."""
    stalled = ProcessDatabase(database, Wire(), "stalled roller")
    stalled.stall_before(unit_write)
    roll = asyncio.create_task(RollingService(stalled, summarize, config()).roll(core_id, now=T0))
    await until_parked_or_done(roll, stalled)
    assert stalled.parked, "the roll should park before its append"
    return roll, stalled


# -- finding 1: a forgotten window comes back through a clear's reservation ---------------------------------


async def test_forget_erases_the_reservation_a_clear_left_so_a_stalled_roll_cannot_store_the_forgotten_text(
    database: Any,
) -> None:
    cores = MemoryCoreRepository(database)
    await cores.record("f1", numbered(0, 4), at=T0)
    await MemoryEraser(database).clear_window("f1")  # no unit yet: the clear leaves a reservation
    forgotten = numbered(4, 8)
    await cores.record("f1", forgotten, at=T0)
    roll, stalled = await stall_a_roll(database, "f1")

    await eraser(database).forget("f1")
    stalled.thaw()
    await asyncio.gather(roll, return_exceptions=True)

    assert not await any_unit_holds(database, [m.content for m in forgotten])
    assert await MemoryUnitRepository(database).list_units("f1") == []


async def test_forget_erases_the_reservation_of_a_pending_continuation_too(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    tiny = config(unit_soft_limit_bytes=1)  # every roll after the first opens a continuation
    await cores.record("f1c", numbered(0, 4), at=T0)
    assert await RollingService(database, summarize, tiny).roll("f1c", now=T0) is not None
    await cores.record("f1c", numbered(4, 8), at=T0)
    dying = ProcessDatabase(database, Wire(), "dies after opening the continuation")
    dying.die_after(session_switch)
    with pytest.raises(ProcessDied):
        await RollingService(dying, summarize, tiny).roll("f1c", now=T0)
    await eraser(database).clear_window("f1c")  # the continuation's unit does not exist: a reservation
    forgotten = numbered(8, 12)
    await cores.record("f1c", forgotten, at=T0)
    roll, stalled = await stall_a_roll(database, "f1c")

    await eraser(database).forget("f1c")
    stalled.thaw()
    await asyncio.gather(roll, return_exceptions=True)

    assert not await any_unit_holds(database, [m.content for m in forgotten])
    assert await MemoryUnitRepository(database).list_units("f1c") == []


# -- finding 2: a clear cut short between its two writes ----------------------------------------------------


async def test_a_clear_cut_short_after_its_mark_leaves_a_core_the_next_roll_rolls_forward(
    database: Any,
) -> None:
    cores = MemoryCoreRepository(database)
    cleared = numbered(0, 4)
    await cores.record("f2", cleared, at=T0)
    await a_clear_dies_after_its_mark(database, "f2")  # the reservation lands, the window is never emptied
    await cores.record("f2", numbered(4, 6), at=T0)
    calls = Calls()
    service = RollingService(database, calls, config(retain_divisor=1), monotonic=StepClock(step=100))

    results = [await service.roll("f2", now=T0) for _ in range(2)]  # the dead clear's lease lapses first

    assert [r is not None for r in results] == [False, True]
    assert await stored_contents(database, "f2") == ["message 4", "message 5"]
    assert calls.increments == [["message 4", "message 5"]]  # no futile summaries
    window = [m.content for m in await cores.snapshot("f2")]
    assert not set(window) & {m.content for m in cleared}


async def test_a_clear_cut_short_after_marking_an_existing_unit_never_leaves_its_messages_retained(
    database: Any,
) -> None:
    cores = MemoryCoreRepository(database)
    service = RollingService(database, summarize, config(retain_divisor=1), monotonic=StepClock(step=100))
    await cores.record("f2u", numbered(0, 4), at=T0)
    assert await service.roll("f2u", now=T0) is not None  # the unit exists; the window retains all four
    await cores.record("f2u", numbered(4, 6), at=T0)
    await a_clear_dies_after_its_mark(database, "f2u")
    await cores.record("f2u", numbered(6, 8), at=T0)

    results = [await service.roll("f2u", now=T0) for _ in range(2)]

    assert results[-1] is not None and [m.content for m in results[-1].increment_messages] == [
        "message 6",
        "message 7",
    ]
    window = [m.content for m in await cores.snapshot("f2u")]
    assert window == ["message 6", "message 7"]  # nothing the clear marked is kept, even with divisor 1


# -- finding 3: an idle roll cut short between switching the session and marking the window rolled ----------


async def test_an_idle_roll_that_dies_after_switching_the_session_is_not_rolled_again(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    await cores.record("f3", numbered(0, 4), at=T0)
    idle = config(retain_divisor=2)
    dying = ProcessDatabase(database, Wire(), "idle roller")
    dying.die_after(session_switch)
    with pytest.raises(ProcessDied):
        await RollingService(dying, summarize, idle).roll_idle(now=T0 + timedelta(hours=2))
    service = RollingService(database, summarize, idle, monotonic=StepClock(step=100))

    again = [await service.roll_idle(now=T0 + timedelta(hours=3)) for _ in range(3)]

    assert again == [[], [], []]
    units = await MemoryUnitRepository(database).list_units("f3")
    assert [len(u.slices) for u in units] == [1]


# -- finding 4: a big turn after a roll that retained a big message -----------------------------------------


class DocumentLimit:
    """The in-memory backend with a server's refusal of a document past 16 MiB (MongoDB's code 10334) for the
    cores' windows, which mongomock does not have. On a server the server's own limit applies."""

    def __init__(self, database: Any) -> None:
        self._database = database

    def __getitem__(self, name: str) -> Any:
        collection = self._database[name]
        return _LimitedCores(collection) if name == "memory_cores" else collection

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)


class _LimitedCores:
    def __init__(self, collection: Any) -> None:
        self._collection = collection

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)

    async def find_one_and_update(self, query: Any, update: Any, *args: Any, **kwargs: Any) -> Any:
        pushed = (update.get("$push") or {}).get("chat_messages")
        if isinstance(pushed, dict) and pushed.get("$each"):
            current = await self._collection.find_one({"_id": query.get("_id")})
            if (
                current is not None
                and bson_size(current) + messages_bytes(pushed["$each"]) > MAX_DOCUMENT_BYTES
            ):
                raise OperationFailure("BSONObjectTooLarge (the in-memory stand-in)", code=10334)
        return await self._collection.find_one_and_update(query, update, *args, **kwargs)


def limited(database: Any, request: pytest.FixtureRequest) -> Any:
    return DocumentLimit(database) if request.node.callspec.params["database"] == "memory" else database


def big(tag: str, mib: int) -> Message:
    return Message(role="user", content=tag + "x" * (mib * MIB))


async def test_a_big_turn_after_a_roll_that_retained_a_big_message_is_recorded(
    database: Any, request: pytest.FixtureRequest
) -> None:
    db = limited(database, request)
    first, second = big("first ", 6), big("second ", 11)
    rolled = await RollingService(db, summarize, config(retain_divisor=1)).record_and_roll(
        "f4", [first], at=T0
    )
    assert rolled is not None  # by the bytes trigger; the window retains it (divisor 1)
    service = RollingService(db, summarize, config(retain_divisor=1, trigger_bytes=16 * MIB))

    assert await service.record_and_roll("f4", [second], at=T0) is None  # nothing new was stored

    assert [m.content[:7] for m in await MemoryCoreRepository(database).snapshot("f4")] == ["second "]
    assert [c[:6] for c in await stored_contents(database, "f4")] == ["first "]


# -- finding 5: the summarizer called twice for one increment -----------------------------------------------


async def test_two_processes_taking_turns_summarize_each_increment_once(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    calls = Calls()
    first, second = (RollingService(database, calls, config(retain_divisor=2)) for _ in range(2))
    recorded = 0
    for roller in (first, second, first, second, first):
        await cores.record("f5", numbered(recorded, recorded + 2), at=T0)
        recorded += 2
        assert await roller.roll("f5", now=T0) is not None

    units = await MemoryUnitRepository(database).list_units("f5")
    assert len(calls.increments) == sum(len(u.slices) for u in units) == 5
    assert await stored_contents(database, "f5") == [f"message {n}" for n in range(recorded)]


# -- finding 6: record_and_roll_later after aclose ----------------------------------------------------------


async def test_record_and_roll_later_after_aclose_refuses_and_writes_nothing(database: Any) -> None:
    service = RollingService(database, summarize, config())
    await service.aclose()

    with pytest.raises(InvalidInput, match="shutting down"):
        await service.record_and_roll_later("f6", numbered(0, 2), at=T0)

    assert await MemoryCoreRepository(database).get("f6") is None


# -- finding 7: a turn too large for the window while another process's roll holds the lease ----------------


class Gate:
    """A summarizer that waits for its gate (a roll holding the lease meanwhile)."""

    def __init__(self) -> None:
        self.gate, self.started = asyncio.Event(), asyncio.Event()

    async def __call__(self, messages: list[Message]) -> str:
        self.started.set()
        await self.gate.wait()
        return await summarize(messages)


async def test_a_turn_too_large_waits_for_the_roll_holding_the_lease_then_is_recorded(
    database: Any, request: pytest.FixtureRequest
) -> None:
    db = limited(database, request)
    cores = MemoryCoreRepository(db)
    await cores.record("f7", [big("first ", 6)], at=T0)
    gate = Gate()
    holder = asyncio.create_task(RollingService(db, gate, config(retain_divisor=1)).roll("f7", now=T0))
    await gate.started.wait()
    waiting = RollingService(db, summarize, config(retain_divisor=1, trigger_bytes=16 * MIB))

    turn = asyncio.create_task(waiting.record_and_roll("f7", [big("second ", 11)], at=T0))
    try:
        await asyncio.sleep(0.2)
        assert not turn.done()  # waiting for the roll that holds the lease, not refused
        gate.gate.set()
        await holder
        await asyncio.wait_for(turn, timeout=30)
    finally:  # whatever failed, both tasks end here and what they raised is taken (not logged later)
        gate.gate.set()
        await asyncio.gather(holder, turn, return_exceptions=True)

    assert [m.content[:7] for m in await MemoryCoreRepository(database).snapshot("f7")] == ["second "]
    assert [c[:6] for c in await stored_contents(database, "f7")] == ["first "]


# -- found by the model check ----------------------------------------------------------------------------


async def test_the_roller_that_rolled_last_summarizes_once_after_a_clear_changed_its_unit(
    database: Any,
) -> None:
    """The protocol model's first counterexample: a clear raises the unit's mark (a new version) after this
    process's roll, so the head it remembers is stale; the core's record of the last roll's head must not
    vouch for it any more (the continuation's seal failed on the stale version, the increment was summarized
    twice)."""
    cores = MemoryCoreRepository(database)
    calls = Calls()
    service = RollingService(database, calls, config(retain_divisor=0, unit_soft_limit_bytes=700))
    big_turn = [Message(role="user", content=f"{n} " + "x" * 300) for n in range(3)]
    await cores.record("m1", big_turn, at=T0)
    assert await service.roll("m1", now=T0) is not None
    await MemoryEraser(database).clear_window("m1")
    await cores.record(
        "m1", [Message(role="user", content=f"later {n} " + "x" * 300) for n in range(3)], at=T0
    )

    assert await service.roll("m1", now=T0) is not None

    units = await MemoryUnitRepository(database).list_units("m1")
    assert len(calls.increments) == sum(len(u.slices) for u in units) == 2


# -- found by the many-processes test on SecantusDB (intermittent: a writer descheduled between its turn and
# its roll) ----------------------------------------------------------------------------------------------


async def test_a_roll_whose_turn_was_recorded_before_another_roll_stores_its_slice_after_that_roll(
    database: Any,
) -> None:
    """A roll's slice is stamped with its turn's time. A writer descheduled between recording its turn and
    rolling carries an older stamp than a writer that rolled meanwhile; its increment's positions come
    after that roll's all the same, so its slice goes after it in the array (the slices stay in position
    order, and sorted by creation time: its time is never earlier than the last slice's). It used to be
    inserted before, by its older time: the unit's slices no longer tiled it in array order."""
    cores = MemoryCoreRepository(database)
    descheduled = ProcessDatabase(database, Wire(), "descheduled writer")
    descheduled.stall_before(2)  # its turn recorded (write 1), its roll not started
    late = asyncio.create_task(
        RollingService(descheduled, summarize, config(retain_divisor=0)).record_and_roll(
            "o1", numbered(0, 4), at=T0
        )
    )
    await until_parked_or_done(late, descheduled)
    assert descheduled.parked
    other = RollingService(database, summarize, config(retain_divisor=0))
    assert await other.record_and_roll("o1", numbered(4, 8), at=T0 + timedelta(minutes=1)) is not None
    await cores.record("o1", numbered(8, 12), at=T0 + timedelta(minutes=2))

    descheduled.thaw()
    assert await late is not None

    [unit] = await MemoryUnitRepository(database).list_units("o1")
    pieces = unit.complete_slices()
    assert [(s.start_index, s.end_index) for s in pieces] == [(0, 4), (4, 12)]  # was [(4, 12), (0, 4)]
    assert pieces[0].created_at is not None and pieces[1].created_at is not None
    assert pieces[0].created_at <= pieces[1].created_at


# -- found by the model check's long run --------------------------------------------------------------------


async def test_a_clear_that_returns_late_counts_only_what_it_cleared(database: Any) -> None:
    """A clear stalled after emptying the window, before giving its hold back, returns after another clear
    took its hold over and cleared a turn recorded meanwhile: it counts what it cleared, not that turn too
    (it counted every move of the window's start since it began: 3 here, of which the other clear's 1)."""
    cores = MemoryCoreRepository(database)
    await cores.record("c9", numbered(0, 2), at=T0)
    slow = ProcessDatabase(database, Wire(), "slow clear")
    slow.stall_before(4)  # the hold, the mark, the emptying write landed; not the release
    first = asyncio.create_task(eraser(slow).clear_window("c9"))
    await until_parked_or_done(first, slow)
    assert slow.parked
    await cores.record("c9", numbered(2, 3), at=T0)

    assert await eraser(database).clear_window("c9") == 1
    slow.thaw()
    assert await first == 2
    assert await cores.snapshot("c9") == []


async def test_a_roll_of_a_core_whose_erasure_was_cut_short_summarizes_nothing(database: Any) -> None:
    """An erasure cut short after it fenced the core's session (its unit's id tombstoned) leaves the core
    until it is run again; once its hold was taken over (here by a clear, which gives it back) a roll of
    that core can store nothing there. The roll sees
    the tombstone in the read it resolves with and stops before summarizing (it summarized the increment on
    each of its three resolutions, every append refused: the model's long run, 5 calls for 2 slices)."""
    cores = MemoryCoreRepository(database)
    await cores.record("e1", numbered(0, 2), at=T0)
    stalled = ProcessDatabase(database, Wire(), "stalled eraser")
    stalled.stall_before(lambda sent: sent.method == "find_one_and_delete")  # units fenced, the core not gone
    forgetting = asyncio.create_task(
        MemoryEraser(stalled, hold=timedelta(seconds=60), monotonic=StepClock(step=100)).forget("e1")
    )
    await until_parked_or_done(forgetting, stalled)
    assert stalled.parked
    assert await eraser(database).clear_window("e1") == 2  # takes the silent hold over, gives it back
    calls = Calls()
    roller = RollingService(database, calls, config(), monotonic=StepClock(step=100))
    await cores.record("e1", numbered(2, 6), at=T0)

    assert await roller.roll("e1", now=T0) is None
    assert calls.increments == []
    stalled.thaw()
    with pytest.raises(ConflictError, match="lost the core's lease"):
        await forgetting  # its hold was taken over: it says so, and running it again finishes it
    assert (await eraser(database).forget("e1")).resumed
    assert await cores.get("e1") is None
    assert await MemoryUnitRepository(database).list_units("e1") == []


async def test_a_roll_into_a_continuation_after_a_clear_cut_short_keeps_none_of_the_cleared_window(
    database: Any,
) -> None:
    """The model's long run (seed 15051894063866317926, "erased text came back"): a clear died right after
    its mark, before emptying the window. The core still vouched for the head the roller that rolled last
    remembered (the clear took that back only with the window), a head from before the mark, which cuts
    the window nowhere (a divisor of 0 keeps the whole increment as context). That roller's next roll went
    into a continuation, whose seal took the marked unit for unchanged (its count and mark were), and cut
    the window where the old head said: the cleared messages stayed as context, and the next session
    stored them again. The clear's hold now ends the core's word for the head, so the roll reads the mark
    and cuts there, summarizing its increment once."""
    cores = MemoryCoreRepository(database)
    calls = Calls()
    tiny = config(
        retain_divisor=0, unit_soft_limit_bytes=1
    )  # every roll after the first opens a continuation
    roller = RollingService(database, calls, tiny, monotonic=StepClock(step=100))
    await cores.record("c10", numbered(0, 2), at=T0)
    assert await roller.roll("c10", now=T0) is not None  # stored, and all of it kept as context
    await a_clear_dies_after_its_mark(database, "c10")
    await cores.record("c10", numbered(2, 4), at=T0)

    results = [await roller.roll("c10", now=T0) for _ in range(2)]  # the dead clear's hold lapses first

    assert [r is not None for r in results] == [False, True]
    assert [m.content for m in await cores.snapshot("c10")] == ["message 2", "message 3"]
    assert calls.increments == [["message 0", "message 1"], ["message 2", "message 3"]]


async def test_a_roll_with_nothing_new_cuts_what_a_clear_marked_after_its_hold_was_taken_over(
    database: Any,
) -> None:
    """A clear stalled before its mark, a roller took its hold over and rolled (the core vouches for the
    head that roll left), then the clear marked the unit and died. The next roll of that roller finds
    nothing new: it stores nothing, so no fenced write checks the head it remembers, and it cut the window
    where that head said, keeping what the clear marked (for the next session to store again). A roll that
    finds nothing new reads the head first."""
    cores = MemoryCoreRepository(database)
    roller = RollingService(database, summarize, config(retain_divisor=0), monotonic=StepClock(step=100))
    await cores.record("c11", numbered(0, 2), at=T0)
    assert await roller.roll("c11", now=T0) is not None

    async def the_roller_takes_the_hold_over() -> None:
        await cores.record("c11", numbered(2, 4), at=T0)
        assert [await roller.roll("c11", now=T0) is not None for _ in range(2)] == [False, True]

    await a_clear_marks_late_and_dies(database, "c11", the_roller_takes_the_hold_over)

    assert await roller.roll("c11", now=T0) is None
    assert [m.content for m in await cores.snapshot("c11")] == ["message 2", "message 3"]


async def test_a_roll_into_a_continuation_cuts_what_a_clear_marked_after_its_hold_was_taken_over(
    database: Any,
) -> None:
    """As above, but the roller's next roll stores a turn that opens a continuation: the seal found the unit
    changed and went on because its count and mark were as resolved, cutting the window where the head it
    remembered said. A seal goes on only while the unit's cut (``trimmed_to``) is as resolved too, else the
    increment is resolved again, from the unit as read."""
    cores = MemoryCoreRepository(database)
    two_rolls = config(retain_divisor=0, unit_soft_limit_bytes=1200)  # the unit takes two rolls, not a third
    roller = RollingService(database, summarize, two_rolls, monotonic=StepClock(step=100))
    await cores.record("c12", numbered(0, 2), at=T0)
    assert await roller.roll("c12", now=T0) is not None

    async def the_roller_takes_the_hold_over() -> None:
        await cores.record("c12", numbered(2, 4), at=T0)
        assert [await roller.roll("c12", now=T0) is not None for _ in range(2)] == [False, True]

    await a_clear_marks_late_and_dies(database, "c12", the_roller_takes_the_hold_over)
    turn = [Message(role="user", content=f"turn {n} " + "x" * 300) for n in range(2)]
    await cores.record("c12", turn, at=T0)

    rolled = await roller.roll("c12", now=T0)

    assert rolled is not None and rolled.memory_unit.message_count == 2  # a continuation holds the turn
    window = [m.content for m in await cores.snapshot("c12")]
    assert window == ["message 2", "message 3", *(m.content for m in turn)]

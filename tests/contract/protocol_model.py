"""The protocol, model-checked: a Hypothesis state machine whose rules are the public operations that write.

Three simulated processes share one database, each with its own services (``RollingService``,
``MemoryEraser``, repositories, listeners) and its own monotonic clock (:class:`protocol_support.StepClock`,
moving at every read, so a process that keeps looking at a silent lease takes it over after a few looks).
The rules (docs/protocol.md has the table they exercise):

- ``record``, ``record_and_roll``, ``record_and_roll_later`` (the background roll drained within the step),
  ``roll`` (with or without a session refresh), ``idle_roll`` (the idle scheduler's pass), ``clear``
  (``MemoryEraser.clear_window``), ``forget``, ``resummarize``, ``reindex`` (``RecallIndexer.reindex``
  with the tests' ``concepts`` embedder), ``deliver`` (a listener group's polling pass:
  its checkpoint and dead-letter writes), ``import_state`` (Partner's state into a core, refused when a unit
  belongs to another core);
- each may carry a fault: the process **dies** right after its n-th write lands (nothing of it runs again,
  its lease lapses, a fresh process takes its place), or **stalls** before its n-th write (parked until
  ``thaw``, while the others move on and take its lease over);
- ``summarizer_trouble`` makes a process's next summarizer calls fail or hang past ``summarize_timeout``;
  ``time_passes`` moves the wall clock past ``idle_after`` and every process's clock past the lease ttl.

Messages are small or close to the byte trigger (``trigger_bytes``), units tiny (so rolls open continuation
units), retain divisors 0, 1 and 6. After every step the invariants of :meth:`World.problems` hold:

1. each recorded message is stored exactly once per session, in record order, only the retained context
   repeated at a session start, slices tiling their units (``positions_support.storage_problems``; the
   messages still waiting in the window are not missing yet), in position order in the array;
2. nothing cleared or forgotten is stored again, nor returned (a completed clear's messages never reappear
   in the window; a forgotten core's messages in no unit, no listener progress names an erased unit, the
   recall index holds no slice of one);
3. an idle roll never stores only the context a previous roll retained (an idle window is rolled once);
4. the summarizer is called once per stored increment, plus at most ``summarize_attempts`` per fault
   (injected failures, deaths, stalls); exactly once when nothing went wrong;
5. every delivery pass without faults reaches every stored slice (or dead-letters it);
6. every indexed slice's vectors are those of the revision it holds (a reindex's write is fenced by it);

and when the machine stops (``teardown``), once faults stop, the stalled processes are thawed, unfinished
erasures finished and one ``record_and_roll`` per core stores its window (no core is wedged), and a last
delivery pass of each group reaches every slice.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import os
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pymongo.errors import OperationFailure

from partner_repo import (
    AfterRollingRegistry,
    ConflictError,
    GroupLeaseLost,
    MemoryCoreRepository,
    MemoryEraser,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingListener,
    RollingResult,
    RollingService,
    UnitOfAnotherCore,
    WindowTooLarge,
    close_database,
    import_partner_state,
    in_memory_database,
    init_repository,
)
from partner_repo.listener.delivery import Backoff
from partner_repo.mongo import MAX_DOCUMENT_BYTES, RECALL_INDEX, bson_size, messages_bytes
from partner_repo.recall import RecallIndexCheck, RecallIndexer
from partner_repo.units import messages_at
from tests.contract.observed import CORES, UNITS, Wire
from tests.contract.positions_support import Clear, CoreHistory, storage_problems
from tests.contract.protocol_support import (
    ProcessDatabase,
    ProcessDied,
    Sent,
    StepClock,
    until_parked_or_done,
)
from tests.recall_support import concepts

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
CORE_IDS = ("c0", "c1")
PROCESSES = 3
TTL = timedelta(seconds=30)
STEP_S = 10.0
"""How far a process's clock moves at each read: a lease's ttl passes after a few looks."""
IDLE = timedelta(hours=1)
ATTEMPTS = 2
"""Summarizer calls per roll."""
GROUPS = ("g1", "g2")
WINDOW_LIMIT = 24_000
"""The in-memory stand-in for a server's 16 MiB document limit, scaled down with the messages."""
NEAR = 3_000
"""The byte trigger; a message "near the byte limit" is just under or over it."""
TRACE = os.environ.get("PARTNER_REPO_MODEL_TRACE") == "1"
"""Print every step (``PARTNER_REPO_MODEL_TRACE=1``)."""


@dataclass
class Generation:
    """One core document from its creation to the erasure's delete of it: what was recorded (in the order
    the records landed), what clears took, and whether the oracle must allow a shortened context (a clear
    cut short, a turn that had room made for it). While an erasure of the core is unfinished the oracle
    skips it (:meth:`World.erasing`)."""

    history: CoreHistory
    number: int
    shortened: bool = False


class Troubled:
    """One process's summarizer: counts its calls; fails or hangs the next ones when told."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.trouble: list[str] = []
        self.resummarizing = False

    async def __call__(self, messages: list[Message]) -> str:
        if not self.resummarizing:
            self.world.roll_calls += 1
        if self.trouble:
            kind = self.trouble.pop(0)
            self.world.failures += 1
            if kind == "hang":
                await asyncio.sleep(3600)
            raise RuntimeError("the summarizer failed (injected)")
        return f"{len(messages)} messages from {messages[0].content[:24]}"


class Delivered:
    """A listener group's consumer: what it received (slice ids), failing when told."""

    def __init__(self, group: str) -> None:
        self.name = f"model-{group}"
        self.received: set[str] = set()
        self.fail = False

    async def consume(self, result: RollingResult) -> None:
        if self.fail:
            raise RuntimeError("the consumer failed (injected)")
        self.received.add(result.slice_id)


@dataclass
class Process:
    """One simulated process: its view of the database, its clock and its services."""

    number: int
    db: ProcessDatabase
    clock: StepClock
    summarizer: Troubled
    service: RollingService
    eraser: MemoryEraser
    cores: MemoryCoreRepository
    pending: asyncio.Task[Any] | None = None
    generation: int = 0
    on_done: Any = None
    on_parked: Any = None


@dataclass
class World:
    """What the machine knows: the shared database, the write log, the processes and the oracle's data."""

    database: Any
    base: Any
    config: RollingConfig
    wire: Wire = field(default_factory=Wire)
    processes: list[Process] = field(default_factory=list)
    generations: dict[str, Generation] = field(default_factory=dict)
    forgotten: set[str] = field(default_factory=set)
    forgetting: Counter[str] = field(default_factory=Counter)
    """Forget steps of each core not ended yet (a stalled one goes on when thawed)."""
    clearing: dict[str, list[range]] = field(default_factory=dict)
    """By process: the window (positions) each attempt of its clear held when it took its hold."""
    emptied: dict[str, tuple[Generation, Clear]] = field(default_factory=dict)
    """By process: the positions its clear's emptying write took, and where that write sits on the wire."""
    cleared_done: set[str] = field(default_factory=set)
    stored_slices: set[str] = field(default_factory=set)
    stored_contents: set[str] = field(default_factory=set)
    roll_calls: int = 0
    failures: int = 0
    disruptions: int = 0
    delivered: dict[str, Delivered] = field(default_factory=lambda: {g: Delivered(g) for g in GROUPS})
    now: datetime = T0
    counter: int = 0
    seen: Counter[str] = field(default_factory=Counter)
    surprises: list[str] = field(default_factory=list)
    owned: bool = True

    # -- building ------------------------------------------------------------------------------------------

    @classmethod
    async def open(cls, backend: str, config: RollingConfig) -> World:
        if backend == "memory":
            base = await init_repository(in_memory_database(f"model_{uuid.uuid4().hex[:8]}"))
            database: Any = WindowLimit(base)
        else:
            from tests.conftest import real_database

            base = await real_database()
            await init_repository(base)
            database = base
        world = cls(database=database, base=base, config=config)
        for core_id in CORE_IDS:
            world.generations[core_id] = Generation(CoreHistory(core_id), 0)
        world.processes = [world.spawn(number) for number in range(PROCESSES)]
        return world

    async def close(self) -> None:
        for process in self.processes:
            if process.pending is None:
                continue
            if not process.pending.done():
                process.pending.cancel()
            with contextlib.suppress(BaseException):  # a parked step that ended meanwhile: its outcome taken
                await process.pending  # (asyncio would log it from the garbage collector, at any moment)
        if self.base is not None and not isinstance(self.database, WindowLimit):
            await self.base.client.drop_database(self.base.name)
            await close_database(self.base)

    def spawn(self, number: int, generation: int = 0) -> Process:
        """A fresh process ``number`` (its ``generation``-th incarnation): new services, a new clock."""
        db = ProcessDatabase(self.database, self.wire, f"p{number}.{generation}")
        db.on_landed = lambda sent, result: self.landed(sent, result, db.name)
        clock = StepClock(step=STEP_S)
        summarizer = Troubled(self)
        return Process(
            number=number,
            db=db,
            clock=clock,
            summarizer=summarizer,
            service=RollingService(db, summarizer, self.config, monotonic=clock, clock=lambda: self.now),
            eraser=MemoryEraser(
                db, monotonic=clock, lease_wait=4 * TTL, hold=2 * TTL, clock=lambda: self.now
            ),
            cores=MemoryCoreRepository(db),
            generation=generation,
        )

    # -- what the processes write --------------------------------------------------------------------------

    def landed(self, sent: Sent, result: Any, process: str) -> None:
        """A write of ``process`` landed: a record's messages take their positions in the order records
        land; a clear's emptying write takes the window's; an erasure's delete of the core ends its
        generation."""
        if sent.collection != CORES:
            return
        if sent.method == "find_one_and_delete" and result is not None:
            self.erased_core(sent.args[0]["_id"])
            return
        owner = sent.update.get("$set", {}).get("lease_owner")
        if isinstance(owner, str) and owner.startswith("clear-") and isinstance(result, dict):
            start = result.get("window_start") or 0
            held = range(start, start + len(result.get("chat_messages") or []))
            self.clearing.setdefault(process, []).append(held)
            return
        emptied = sent.update.get("$set", {}).get("chat_messages") == []
        if emptied and "window_start" in sent.update.get("$inc", {}) and self.wire.writes[-1].applied:
            self.emptying(process, sent.args[0]["_id"], sent.update["$inc"]["window_start"])
            return
        if sent.method == "insert_one":  # a record that created the core: the window it inserted
            created = sent.args[0] if sent.args else {}
            if isinstance(created, dict) and created.get("_id") in self.generations:
                recorded = [m["content"] for m in created.get("chat_messages") or []]
                self.generations[created["_id"]].history.recorded += recorded
            return
        pushed = (sent.update.get("$push") or {}).get("chat_messages")
        if not isinstance(pushed, dict) or not pushed.get("$each") or result is None:
            return
        query = sent.args[0] if sent.args else {}
        core_id = query.get("_id") if isinstance(query, dict) else None
        if core_id in self.generations:
            self.generations[core_id].history.recorded += [m["content"] for m in pushed["$each"]]

    def emptying(self, process: str, core_id: str, size: int) -> None:
        """A clear of ``process`` emptied the window of ``size`` messages: the last ones recorded by now
        (every record landed before it is in the window or stored; none after it is affected)."""
        generation = self.generations[core_id]
        total = len(generation.history.recorded)
        write = self.wire.writes[-1]  # this very write: the wire logs it just before telling the model
        self.emptied[process] = (generation, Clear(range(total - size, total), write.start, write.end))

    def erased_core(self, core_id: str) -> None:
        """An erasure deleted the core (its window; its units were deleted before it): what its generation
        recorded is forgotten, and what is recorded from now on, into a core the record creates anew, is a
        new generation's. (The model used to switch when the forget *step* returned: a turn recorded while a
        stalled forget had deleted the core but not yet returned was taken as forgotten, though the library
        rightly keeps it: the long runs' "a unit holds forgotten messages" and "never recorded".)"""
        if core_id in self.generations:
            self.forgotten |= set(self.generations[core_id].history.recorded)
            self.generations[core_id] = Generation(CoreHistory(core_id), self.generations[core_id].number + 1)

    async def erasing(self, core_id: str) -> bool:
        """Whether an erasure of the core may still delete what it holds: a forget step not ended (stalled),
        or a request a run left unfinished (the next forget continues it, listing the core's units again)."""
        if self.forgetting[core_id]:
            return True
        unfinished = {"kind": "request", "core_id": core_id, "state": {"$ne": "done"}}
        return await self.base["erasure_requests"].find_one(unfinished, {"_id": 1}) is not None

    def messages(self, core_id: str, count: int, sizes: list[int]) -> list[Message]:
        generation = self.generations[core_id]
        messages = []
        for n in range(count):
            self.counter += 1
            tag = f"{core_id}/g{generation.number}/#{self.counter}"
            pad = sizes[n % len(sizes)] if sizes else 0
            role = "user" if n % 2 == 0 else "assistant"
            messages.append(Message(role=role, content=tag + (" " + "x" * pad if pad else "")))
        return messages

    @property
    def refused(self) -> set[str]:
        """The cores a turn too large for the window was refused on (in memory, by the stand-in)."""
        return self.database.refused if isinstance(self.database, WindowLimit) else set()

    # -- the invariants ------------------------------------------------------------------------------------

    async def scan(self) -> dict[str, list[Any]]:
        """Every unit by core (read through the shared database, not a process), noting every slice and
        message ever stored."""
        units = MemoryUnitRepository(self.base)
        found = {core_id: await units.list_units(core_id) for core_id in CORE_IDS}
        for listed in found.values():
            for unit in listed:
                self.stored_slices |= {s.id for s in unit.complete_slices() if s.id}
                self.stored_contents |= {m.content for m in unit.conversation_messages}
        return found

    async def problems(self) -> list[str]:
        units = await self.scan()
        found = list(self.surprises)
        cores = MemoryCoreRepository(self.base)
        erasing = {core_id: await self.erasing(core_id) for core_id in CORE_IDS}
        for core_id, generation in self.generations.items():
            window = [m.content for m in await cores.snapshot(core_id)]
            if back := sorted(set(window) & (self.cleared_done | self.forgotten)):
                found.append(f"core {core_id}: cleared or forgotten messages back in the window: {back[:3]}")
            if erasing[core_id]:
                continue
            state = await cores.window_state(core_id)
            pending: set[int] = set()
            if state is not None:
                pending = set(range(state.window_start, state.window_end))
            found += storage_problems(
                generation.history,
                units[core_id],
                self.wire.writes,
                pending=pending,
                shortened=generation.shortened or core_id in self.refused,
            )
        found += order_problems(units)
        found += await self.erasure_problems(units, any(erasing.values()))
        found += self.summary_problems()
        return found

    async def erasure_problems(self, units: dict[str, list[Any]], erasing: bool) -> list[str]:
        found = []
        back = await self.base[UNITS].find_one(
            {"conversation_messages.content": {"$in": sorted(self.forgotten)}}, {"_id": 1}
        )
        if back is not None:
            found.append(f"unit {back['_id']} holds forgotten messages")
        if erasing:
            return found  # an erasure is unfinished: its units may be gone and their progress not yet
        live = {d["_id"] async for d in self.base[UNITS].find({"core_id": {"$exists": True}}, {"_id": 1})}
        async for progress in self.base["listener_checkpoints"].find({"kind": "unit"}, {"unit_id": 1}):
            if progress.get("unit_id") not in live:
                found.append(f"listener progress names unit {progress.get('unit_id')}, which is not stored")
        async for indexed in self.base[RECALL_INDEX].find({"kind": "slice"}, {"unit_id": 1}):
            if indexed["unit_id"] not in live:
                found.append(
                    f"the recall index holds a slice of unit {indexed['unit_id']}, which is not stored"
                )
        return found + await self.recall_counter_problems() + await self.vector_problems()

    async def vector_problems(self) -> list[str]:
        """Every slice's vectors are those of the revision it holds (a reindex's write is fenced by the
        revision it embedded), of the embedder its core names."""
        found = []
        async for indexed in self.base[RECALL_INDEX].find({"kind": "slice", "vtag": {"$ne": None}}):
            span = list(range(indexed["start"], indexed["end"]))
            read = await messages_at(self.base, {indexed["unit_id"]: span})
            picked = read.get(indexed["unit_id"], {})
            if len(picked) != indexed["end"] - indexed["start"]:
                continue  # an erasure under way: the unit's entries go with it (erasure_problems)
            said = [picked[position] for position in sorted(picked)]
            texts = [f"{m.name}: {m.content}" if m.name else m.content for m in said]
            self.seen["vectors checked"] += 1
            if not _int8_of(texts or [indexed.get("summary") or ""], indexed["vector"]):
                found.append(
                    f"slice {indexed['slice_id']} of unit {indexed['unit_id']}: its vectors are not those of "
                    f"revision {indexed.get('revision')}"
                )
        return found

    async def recall_counter_problems(self) -> list[str]:
        """The recall index's counters read low after a crash between an index write's operations, never
        high (docs/protocol.md): a counter above what the index holds would weigh slices that are not
        there."""
        found = []
        for report in await RecallIndexCheck(self.base).check():
            offs = [report.core] if report.core is not None else []
            for off in [*offs, *report.nodes]:
                if off.recorded is not None and off.recorded > off.counted:
                    where = f"node {off.path!r}" if off.path else "the core"
                    found.append(
                        f"core {report.core_id}: the recall counter of {where} reads {off.recorded}, "
                        f"the index holds {off.counted}"
                    )
        return found

    def summary_problems(self) -> list[str]:
        bound = len(self.stored_slices) + self.failures + ATTEMPTS * self.disruptions
        if self.roll_calls > bound:
            return [
                f"the summarizer was called {self.roll_calls} times for {len(self.stored_slices)} stored "
                f"slice(s), {self.failures} injected failure(s) and {self.disruptions} fault(s)"
            ]
        return []


def contiguous(positions: list[int]) -> list[range]:
    """Sorted positions as the ranges they make."""
    pieces: list[range] = []
    for position in positions:
        if pieces and pieces[-1].stop == position:
            pieces[-1] = range(pieces[-1].start, position + 1)
        else:
            pieces.append(range(position, position + 1))
    return pieces


def order_problems(units: dict[str, list[Any]]) -> list[str]:
    """Every unit's slices are in position order in the array (the rolls' slices, whatever the stamps)."""
    found = []
    for listed in units.values():
        for unit in listed:
            bounds = [(s.start_index, s.end_index) for s in unit.complete_slices()]
            if bounds != sorted(bounds):
                found.append(f"unit {unit.id}: slices {bounds} not in position order in the array")
    return found


class WindowLimit:
    """The in-memory backend with a server's refusal of a core document past its size limit (MongoDB's
    BSONObjectTooLarge, code 10334), scaled down to :data:`WINDOW_LIMIT` with the model's messages: so a turn
    the window cannot take happens without 16 MiB messages."""

    def __init__(self, database: Any) -> None:
        self._database = database
        self.refused: set[str] = set()

    def __getitem__(self, name: str) -> Any:
        collection = self._database[name]
        return _LimitedCores(collection, self.refused) if name == CORES else collection

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)


class _LimitedCores:
    def __init__(self, collection: Any, refused: set[str]) -> None:
        self._collection = collection
        self._refused = refused

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)

    async def find_one_and_update(self, query: Any, update: Any, *args: Any, **kwargs: Any) -> Any:
        pushed = (update.get("$push") or {}).get("chat_messages")
        if isinstance(pushed, dict) and pushed.get("$each"):
            current = await self._collection.find_one({"_id": query.get("_id")}, {"chat_messages": 1})
            size = 0 if current is None else bson_size(current)
            if size + messages_bytes(pushed["$each"]) > min(WINDOW_LIMIT, MAX_DOCUMENT_BYTES):
                self._refused.add(query.get("_id"))
                raise OperationFailure("BSONObjectTooLarge (the in-memory stand-in)", code=10334)
        return await self._collection.find_one_and_update(query, update, *args, **kwargs)

    async def insert_one(self, document: Any, *args: Any, **kwargs: Any) -> Any:
        window = document.get("chat_messages") if isinstance(document, dict) else None
        if window and bson_size({"chat_messages": window}) > min(WINDOW_LIMIT, MAX_DOCUMENT_BYTES):
            self._refused.add(document.get("_id"))
            raise OperationFailure("BSONObjectTooLarge (the in-memory stand-in)", code=10334)
        return await self._collection.insert_one(document, *args, **kwargs)


# -- running one step -------------------------------------------------------------------------------------


class Steps:
    """Runs the rules' operations on a :class:`World` (the state machine drives it; kept apart from
    Hypothesis so a counterexample replays as plain code)."""

    def __init__(self, world: World) -> None:
        self.world = world

    async def run(
        self,
        number: int,
        operation: Any,
        fault: tuple[str, int] | None,
        *,
        on_done: Any = None,
        on_parked: Any = None,
    ) -> None:
        """Run ``operation(process)`` on process ``number`` with ``fault`` armed, until it ends or parks."""
        world = self.world
        process = world.processes[number]
        if process.pending is not None:
            return  # a stalled process does nothing until it is thawed
        if fault is not None:
            kind, n = fault
            (process.db.die_after if kind == "die" else process.db.stall_before)(n)
            world.seen[f"{kind} armed"] += 1
        world.seen["steps"] += 1
        task = asyncio.get_running_loop().create_task(with_its_rolls(process, operation))
        process.on_done, process.on_parked = on_done, on_parked
        began = asyncio.get_running_loop().time()
        await self.settle(process, task)
        if TRACE:
            took = asyncio.get_running_loop().time() - began
            what = getattr(operation, "__qualname__", operation)
            print(f"step: p{number} {what} fault={fault}: {took:.3f}s {task!r:.120}", flush=True)

    async def settle(self, process: Process, task: asyncio.Task[Any]) -> None:
        await until_parked_or_done(task, process.db, within=60)
        if not task.done():
            process.pending = task
            self.world.disruptions += 1
            self.world.seen["parked"] += 1
            if process.on_parked is not None:  # what a stalled operation did so far counts already
                await process.on_parked()
            await self.drain()
            return
        await self.finish(process, task)

    async def finish(self, process: Process, task: asyncio.Task[Any]) -> None:
        world = self.world
        process.pending = None
        process.db.faults.die = process.db.faults.stall = None  # a fault is armed for one operation
        error = task.exception() if not task.cancelled() else None
        on_done, process.on_done = process.on_done, None
        if on_done is not None:
            await on_done(task.result() if error is None else error)
        if isinstance(error, ProcessDied) or process.db.dead:  # a background roll may have died after it
            world.disruptions += 1
            world.seen["died"] += 1
            world.processes[process.number] = world.spawn(process.number, process.generation + 1)
        elif isinstance(error, ConflictError | WindowTooLarge):  # a documented refusal: nothing written
            world.seen[type(error).__name__] += 1
        elif error is not None:
            world.surprises.append(f"process {process.db.name}: {error!r}")
        await self.drain()

    async def drain(self) -> None:
        """Let every live process's background rolls end (each within the step that scheduled it: see
        :func:`with_its_rolls`; only a stalled step's can still be pending, parked with it)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while any(self._rolling(p) for p in self.world.processes):
            assert loop.time() < deadline, "background rolls did not end"
            await asyncio.sleep(0.001)
        for process in self.world.processes:
            if process.db.parked and process.pending is None:  # the model's bookkeeping, checked
                self.world.surprises.append(f"process {process.db.name} parked outside a step")

    @staticmethod
    def _rolling(process: Process) -> bool:
        background = process.service._background  # the test's view: is a background roll still running?
        return background.pending > 0 and not process.db.dead and not process.db.parked

    async def thaw(self, number: int) -> None:
        process = self.world.processes[number]
        task = process.pending
        if task is None:
            return
        process.pending = None
        process.db.thaw()
        await self.settle(process, task)

    # -- the operations ------------------------------------------------------------------------------------

    async def clear(self, number: int, core_id: str, fault: tuple[str, int] | None) -> None:
        world = self.world
        if world.processes[number].pending is not None:
            return  # a stalled process does nothing (its stalled clear keeps what it noted)
        generation = world.generations[core_id]
        before = await world.base[CORES].find_one(
            {"_id": core_id}, {"window_start": 1, "memory_session_id": 1}
        )
        start = world.wire.tick()
        process = world.processes[number].db.name
        world.clearing[process] = []

        async def done(outcome: Any) -> None:
            emptied, held = world.emptied.pop(process, None), world.clearing.pop(process, [])
            if isinstance(outcome, int) and emptied is not None:
                # the positions its emptying write took (not the last ones recorded by the time it returned:
                # a clear stalled before giving its hold back returns after later turns), and those each
                # earlier attempt held and marked, which the roller taking its hold over cut
                emptying, taken = emptied
                positions = sorted({p for piece in [*held, taken.positions] for p in piece})
                if outcome != len(positions):
                    world.surprises.append(f"a clear of {core_id} counted {outcome}, took {len(positions)}")
                for piece in contiguous(positions):
                    emptying.history.clears.append(Clear(piece, taken.start, taken.end))
                world.cleared_done |= {emptying.history.recorded[p] for p in positions}
            elif isinstance(outcome, BaseException) and world.generations[core_id] is generation:
                await self.clear_cut_short(generation, before, start)

        async def parked() -> None:
            await self.clear_cut_short(generation, before, start)

        await self.run(
            number, lambda p: p.eraser.clear_window(core_id), fault, on_done=done, on_parked=parked
        )

    async def clear_cut_short(self, generation: Generation, before: Any, start: int) -> None:
        """A clear that died or failed after its mark landed took the window's positions all the same: the
        next roll drops them without storing them."""
        if before is None:
            return
        marks = [w for w in self.world.wire.writes if w.start > start and w.collection == UNITS and w.applied]
        if not marks:
            return
        fence = await self.world.base[UNITS].find_one(
            {"_id": before["memory_session_id"]}, {"taken_until": 1}
        )
        until = (fence or {}).get("taken_until")
        first = before.get("window_start", 0)
        if isinstance(until, int) and until > first:
            positions = range(first, min(until, len(generation.history.recorded)))
            generation.history.clears.append(Clear(positions, marks[0].start, marks[0].end))
            generation.shortened = True

    async def forget(self, number: int, core_id: str, fault: tuple[str, int] | None) -> None:
        world = self.world
        if world.processes[number].pending is not None:
            return  # a stalled process does nothing: no erasure starts
        world.forgetting[core_id] += 1  # the generation it erases ends when the core's delete lands

        async def done(outcome: Any) -> None:
            world.forgetting[core_id] -= 1

        await self.run(number, lambda p: p.eraser.forget(core_id), fault, on_done=done)

    async def reindex(self, number: int, core_id: str | None, fault: tuple[str, int] | None) -> None:
        """``RecallIndexer.reindex`` of one core (or every core) with the model's embedder: its fenced
        vector writes race deliveries (which index without vectors, so a resummarized slice loses them
        until the next reindex) and erasures."""

        async def done(outcome: Any) -> None:
            if not isinstance(outcome, BaseException):
                self.world.seen["reindexed"] += 1

        def work(process: Process) -> Any:
            return RecallIndexer(process.db, embedder=concepts).reindex(core_id, page=2)

        await self.run(number, work, fault, on_done=done)

    async def import_state(self, number: int, core_id: str, fault: tuple[str, int] | None) -> None:
        """Partner's state (one unit of two messages, its session current) into a core of its own; once
        imported there, importing it into ``core_id`` is refused before anything is written."""
        world = self.world
        directory = Path(tempfile.mkdtemp(prefix="partner-state-"))
        unit_id = "imported-unit"
        (directory / "core" / "memory").mkdir(parents=True)
        (directory / "core" / "memory.json").write_text(
            json.dumps({"memory_session_id": unit_id, "memory_unit_uuid_set": [unit_id]})
        )
        unit = {
            "conversation_messages": [
                {"role": "user", "content": "imported question"},
                {"role": "assistant", "content": "imported answer"},
            ],
            "memory_slices": [{"id": "imported-slice", "start_index": 0, "end_index": 2, "summary": "x"}],
        }
        (directory / "core" / "memory" / f"memory-unit{unit_id}.json").write_text(json.dumps(unit))
        target = "imported" if world.seen["imported"] == 0 else core_id

        async def done(outcome: Any) -> None:
            if not isinstance(outcome, BaseException) and target == "imported":
                world.seen["imported"] += 1

        await self.run(number, lambda p: _import(p, directory, target), fault, on_done=done)

    async def deliver(self, number: int, group: str, fault: tuple[str, int] | None, fail: bool) -> None:
        consumer = self.world.delivered[group]
        consumer.fail = fail
        world = self.world

        async def done(outcome: Any) -> None:
            consumer.fail = False
            if fault is None and not fail and outcome is True:
                await self.check_delivered(group)

        await self.run(number, lambda p: _deliver(p, consumer, group, world), fault, on_done=done)

    async def check_delivered(self, group: str) -> None:
        units = await self.world.scan()
        stored = {s.id for listed in units.values() for unit in listed for s in unit.complete_slices()}
        letters = {
            d["slice_id"]
            async for d in self.world.base["rolling_dead_letters"].find({"group": group}, {"slice_id": 1})
        }
        missing = stored - self.world.delivered[group].received - letters
        if missing:
            self.world.surprises.append(f"group {group}: {len(missing)} stored slice(s) never delivered")


async def with_its_rolls(process: Process, operation: Any) -> Any:
    """``operation(process)`` and the background rolls it scheduled (``record_and_roll_later``): the step
    ends when they end, so the fault armed for the step covers them too, whatever their pace. (Before, the
    fault was disarmed as soon as the operation returned: a background roll fast enough to reach the armed
    stall first parked outside any step, uncounted and never thawed, and a later stall of that process
    reset the parked flag it was waiting under: the long runs' "background rolls did not end" and an
    extra summarizer call with no fault counted, neither replayable.)"""
    result = await operation(process)
    while process.service._background.pending and not process.db.dead:  # noqa: ASYNC110
        await asyncio.sleep(0.001)
    process.db.check()  # died in a background roll: the step died
    return result


async def _import(process: Process, directory: Path, core_id: str) -> Any:
    try:
        return await import_partner_state(directory, process.db, core_id=core_id)
    except UnitOfAnotherCore:
        return None  # refused, nothing written: the unit belongs to another core


async def _deliver(process: Process, consumer: Delivered, group: str, world: World) -> bool:
    """One polling pass of a listener group in ``process``: True when it became active and flushed."""
    listener = RollingListener(
        process.db,
        AfterRollingRegistry([consumer, RecallIndexer(process.db)] if group == "g1" else [consumer]),
        group=group,
        source="polling",
        poll_interval=0.01,
        lease_ttl=0.3,
        max_attempts=2,
        backoff=Backoff(initial=0.001, maximum=0.002),
        drain_timeout=5,
    )
    loop = asyncio.get_running_loop()
    previous = loop.get_task_factory()
    delivery = _DELIVERY.set(object())
    created = _recording_tasks(loop, delivery)
    try:
        await listener.start()
        deadline = loop.time() + 2
        while not listener.active and loop.time() < deadline and not process.db.dead:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        if not listener.active:
            world.seen["standing by"] += 1
            return False
        flushing = asyncio.ensure_future(listener.flush())
        while not flushing.done():  # a dead process's listener runs no more: nothing waits for it
            if process.db.dead:
                flushing.cancel()
                raise ProcessDied(process.db.name)
            await asyncio.sleep(0.005)
        try:
            await flushing
        except GroupLeaseLost:  # it stalled past its lease while flushing: the group's new holder delivers
            world.seen["lease lapsed while flushing"] += 1
            return False
        return True
    finally:
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(listener.stop(drain_timeout=0 if process.db.dead else 5), 10)
        loop.set_task_factory(previous)
        _DELIVERY.reset(delivery)
        left = [task for task in created if _of_the_listener(task)]
        for task in left:
            task.add_done_callback(_death_taken)
        if process.db.dead:
            await _abandoned(left)


def _death_taken(task: asyncio.Task[Any]) -> None:
    """A listener task that ended with its process's death (now, or in a later step, when the stop could not
    finish) is not reported by asyncio as never retrieved: the process is gone, nobody was to retrieve it."""
    if task.cancelled():
        return
    error = task.exception()  # taken: asyncio reports it no more
    if error is not None and not isinstance(error, ProcessDied):  # anything else is still reported
        message = "Task exception was never retrieved"
        context = {"message": message, "exception": error, "future": task}
        asyncio.get_running_loop().call_exception_handler(context)


_DELIVERY: contextvars.ContextVar[object] = contextvars.ContextVar("delivery")
"""Which delivery pass a task works for: a task inherits it from the task that made it."""


def _recording_tasks(
    loop: asyncio.AbstractEventLoop, delivery: contextvars.Token[object]
) -> list[asyncio.Task[Any]]:
    """Every task this delivery pass makes on ``loop`` (done ones included, which ``asyncio.all_tasks`` no
    longer lists) until its task factory is put back; a factory already in place still makes them.

    Only the pass's own: the factory is the loop's, and the passes of other processes run meanwhile (one
    stalled here, thawed later), each with a factory of its own around this one, so a task counts here only
    when made in this pass's context (``delivery``, inherited by every task made from it). A dead process's
    pass cancels what it left; another process's flush is not among it."""
    created: list[asyncio.Task[Any]] = []
    mine = delivery.var.get()
    previous = loop.get_task_factory()

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **options: Any) -> asyncio.Task[Any]:
        task = previous(loop, coro, **options) if previous else asyncio.Task(coro, loop=loop, **options)
        if delivery.var.get(None) is mine:
            created.append(task)  # type: ignore[arg-type]
        return task  # type: ignore[return-value]

    loop.set_task_factory(factory)
    return created


def _of_the_listener(task: asyncio.Task[Any]) -> bool:
    code = getattr(task.get_coro(), "cr_code", None)
    return code is not None and f"{os.sep}listener{os.sep}" in code.co_filename


async def _abandoned(tasks: list[asyncio.Task[Any]]) -> None:
    """The listener's tasks a dead process left (its stop could not finish: its writes die too): a real
    process's end takes them with it; here they are cancelled and their outcome (``ProcessDied``, mostly)
    taken, so asyncio does not report them."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(BaseException):
            await task


def budget(name: str, default: int) -> int:
    """A budget of the model check, raised by the environment for the long run (docs/testing.md)."""
    return int(os.environ.get(name, default))


def _int8_of(texts: list[str], stored: Any) -> bool:
    """Whether ``stored`` is the int8 vector of ``texts`` by :func:`concepts` as docs/recall.md defines it
    (the normalized mean of the texts' normalized vectors, scaled so its largest coordinate is 127), worked
    out here rather than by the library's own code, to within a rounding."""
    units = [[x / (sum(y * y for y in vector) ** 0.5 or 1.0) for x in vector] for vector in concepts(texts)]
    mean = [sum(column) / len(units) for column in zip(*units, strict=True)]
    largest = max(abs(x) for x in mean) or 1.0
    expected = [x * 127 / largest for x in mean]
    found = list(stored.as_vector().data) if hasattr(stored, "as_vector") else []
    return len(found) == len(expected) and all(
        abs(a - b) <= 0.5 + 1e-9 for a, b in zip(found, expected, strict=True)
    )


__all__ = ["ATTEMPTS", "CORE_IDS", "NEAR", "PROCESSES", "TRACE", "TTL", "Steps", "World", "budget"]

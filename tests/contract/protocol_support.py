"""Simulated processes for the protocol tests (docs/protocol.md): a database as one process sees it.

A :class:`ProcessDatabase` is the shared database as one simulated process sees it: an
:class:`~tests.contract.observed.ObservedDatabase` (every write it sends is logged on the shared
:class:`~tests.contract.observed.Wire`, so the exactly-once oracle of ``positions_support`` can judge the
run) whose hooks arm two faults:

- **death** (:meth:`ProcessDatabase.die_after`): right after the write that matches (the Nth write, or the
  first write a predicate picks) has landed, the process is dead: that call raises :class:`ProcessDied`, and
  so does every later call through this database, so none of the process's remaining steps reaches the
  server (its ``finally`` blocks included: a dead process gives no lease back, its lease lapses);
- **a stall** (:meth:`ProcessDatabase.stall_before`): the process parks before sending a matching write,
  until :meth:`ProcessDatabase.thaw` (the test moves the other processes' clocks meanwhile, so its lease is
  taken over, as a frozen VM's would be).

:class:`ProcessDied` is a ``BaseException``: no ``except Exception`` of the library catches it, as nothing
catches a process that is gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.contract.observed import CORES, UNITS, Call, ObservedDatabase, Wire, Write

Pick = Callable[["Sent"], bool]
"""Which write a fault is armed for."""


class ProcessDied(BaseException):
    """The simulated process died (after a write landed): nothing it does afterwards reaches the server."""


@dataclass(frozen=True)
class Sent(Call):
    """One write as the process sends it: the collection, the method, and its arguments."""

    @classmethod
    def of(cls, call: Call) -> Sent:
        return cls(call.collection, call.method, call.args, call.kwargs)

    @property
    def update(self) -> dict[str, Any]:
        """The update document of an update (empty for other writes)."""
        if self.method in {"update_one", "update_many", "find_one_and_update"}:
            found = self.args[1] if len(self.args) > 1 else self.kwargs.get("update", {})
            return found if isinstance(found, dict) else {}
        return {}

    def sets(self, name: str) -> bool:
        """Whether the write sets field ``name`` (``$set``, or an insert/replace carrying it)."""
        if name in self.update.get("$set", {}):
            return True
        if self.method in {"insert_one", "replace_one"}:
            document = self.args[-1] if self.args else {}
            return isinstance(document, dict) and name in document
        return False


@dataclass
class Faults:
    """The faults armed on one process."""

    die: Pick | None = None
    stall: Pick | None = None
    thawed: asyncio.Event = field(default_factory=asyncio.Event)
    parked: asyncio.Event = field(default_factory=asyncio.Event)


def nth(n: int) -> Pick:
    """The ``n``-th write from now on (1 is the next one)."""
    count = [0]

    def pick(_: Sent) -> bool:
        count[0] += 1
        return count[0] == n

    return pick


def session_switch(sent: Sent) -> bool:
    """A write that changes a core's memory session."""
    return sent.collection == CORES and sent.sets("memory_session_id")


def unit_write(sent: Sent) -> bool:
    """Any write to the units."""
    return sent.collection == UNITS


class ProcessDatabase(ObservedDatabase):
    """The database as one simulated process sees it; see the module docstring. Every call is refused once
    the process is dead (and a read's answer or a cursor's next document too: dead before and after)."""

    def __init__(self, database: Any, wire: Wire, name: str = "process") -> None:
        super().__init__(database, wire)
        self.name = name
        self.dead = False
        self.faults = Faults()
        self.writes = 0
        """Writes that landed (answered without an error)."""
        self.on_landed: Callable[[Sent, Any], None] | None = None
        """Told of every write that landed, before a death armed for it (the model's record order)."""

    def die_after(self, pick: Pick | int) -> None:
        """Die right after the write ``pick`` chooses has landed (an int: the n-th write from now on)."""
        self.faults.die = nth(pick) if isinstance(pick, int) else pick

    def stall_before(self, pick: Pick | int) -> None:
        """Park before sending the write ``pick`` chooses, until :meth:`thaw`."""
        self.faults.stall = nth(pick) if isinstance(pick, int) else pick
        self.faults.thawed.clear()
        self.faults.parked.clear()

    def thaw(self) -> None:
        self.faults.stall = None
        self.faults.thawed.set()

    @property
    def parked(self) -> bool:
        return self.faults.parked.is_set() and not self.faults.thawed.is_set()

    # -- the hooks of ObservedDatabase ---------------------------------------------------------------------

    def check(self) -> None:
        """Refused once the process is dead."""
        if self.dead:
            raise ProcessDied(self.name)
        super().check()

    async def before_sending(self, call: Call, write: Write | None) -> None:
        """A write parks here if a stall is armed for it; every call then yields once (mongomock does not)."""
        await super().before_sending(call, write)
        if write is not None and self.faults.stall is not None and self.faults.stall(Sent.of(call)):
            self.faults.parked.set()
            await self.faults.thawed.wait()
            self.check()
        await asyncio.sleep(0)

    async def answered(self, call: Call, write: Write, result: Any) -> None:
        """Counts the write, tells ``on_landed``, then dies if a death is armed for it."""
        sent = Sent.of(call)
        if self.on_landed is not None:
            self.on_landed(sent, result)
        self.writes += 1
        if self.faults.die is not None and self.faults.die(sent):
            self.dead = True
            raise ProcessDied(self.name)
        await super().answered(call, write, result)

    def received(self) -> None:
        """A dead process gets no answer."""
        self.check()


async def until_parked_or_done(task: asyncio.Task[Any], process: ProcessDatabase, within: float = 30) -> None:
    """Run the loop until ``task`` ends or ``process`` parks at its armed stall."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not task.done() and not process.parked:
        assert loop.time() < deadline, f"{process.name} neither finished nor parked in time"
        await asyncio.sleep(0.001)


class StepClock:
    """A monotonic clock that moves ``step`` seconds at every read (and by hand with ``now += ...``): a
    process that keeps looking at a silent lease sees its ttl pass after a few looks, without real waits."""

    def __init__(self, step: float = 0.0, start: float = 1000.0) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now

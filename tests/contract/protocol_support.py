"""Simulated processes for the protocol tests (docs/protocol.md): a database as one process sees it.

A :class:`ProcessDatabase` wraps the shared database for one simulated process. Every write it sends is
logged on the shared :class:`~positions_support.Wire` (so the exactly-once oracle of ``positions_support``
can judge the run), and two faults can be armed:

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
import inspect
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from tests.contract.positions_support import (
    CORES,
    UNITS,
    WRITE_METHODS,
    Wire,
    Write,
    _applied,
    _contents,
    _names,
)

Pick = Callable[["Sent"], bool]
"""Which write a fault is armed for."""


class ProcessDied(BaseException):
    """The simulated process died (after a write landed): nothing it does afterwards reaches the server."""


@dataclass(frozen=True)
class Sent:
    """One write as the process sends it: the collection, the method, and its arguments."""

    collection: str
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

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


class ProcessDatabase:
    """The database as one simulated process sees it; see the module docstring."""

    def __init__(self, database: Any, wire: Wire, name: str = "process") -> None:
        self._database = database
        self.wire = wire
        self.name = name
        self.dead = False
        self.faults = Faults()
        self.writes = 0
        self.on_landed: Callable[[Sent, Any], None] | None = None
        """Told of every write that landed, before a death armed for it (the model's record order)."""
        self._collections: dict[str, ProcessCollection] = {}

    def __getitem__(self, name: str) -> ProcessCollection:
        if name not in self._collections:
            self._collections[name] = ProcessCollection(self, self._database[name], name)
        return self._collections[name]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)

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

    def check_alive(self) -> None:
        if self.dead:
            raise ProcessDied(self.name)

    async def before(self, sent: Sent) -> None:
        self.check_alive()
        if self.faults.stall is not None and self.faults.stall(sent):
            self.faults.parked.set()
            await self.faults.thawed.wait()
            self.check_alive()

    def after(self, sent: Sent) -> None:
        self.writes += 1
        if self.faults.die is not None and self.faults.die(sent):
            self.dead = True
            raise ProcessDied(self.name)


class ProcessCollection:
    """A collection of a :class:`ProcessDatabase`: writes logged and faulted, every call refused once dead."""

    def __init__(self, owner: ProcessDatabase, collection: Any, name: str) -> None:
        self._owner = owner
        self._collection = collection
        self._name = name

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._collection, name)
        if not callable(attribute):
            return attribute
        if name == "with_options":  # a wrapper keeps what it wraps where the backend gives another kind back
            return lambda *a, **k: self._with_options(attribute(*a, **k))
        if name in {"find", "aggregate", "watch", "list_indexes"}:
            return lambda *a, **k: self._cursor(attribute(*a, **k))
        if name in WRITE_METHODS:
            return self._writing(name, attribute)
        owner = self._owner

        async def call(*args: Any, **kwargs: Any) -> Any:
            owner.check_alive()
            await asyncio.sleep(0)
            result = attribute(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
            owner.check_alive()
            return result

        return call

    def _with_options(self, chosen: Any) -> Any:
        if type(chosen) is not type(self._collection):
            return self
        return ProcessCollection(self._owner, chosen, self._name)

    def _cursor(self, made: Any) -> Any:
        if inspect.isawaitable(made):  # PyMongo's async aggregate: a coroutine that returns the cursor

            async def opened() -> ProcessCursor:
                self._owner.check_alive()
                return ProcessCursor(self._owner, await made)

            return opened()
        return ProcessCursor(self._owner, made)

    def _writing(self, method: str, attribute: Callable[..., Any]) -> Callable[..., Any]:
        owner = self._owner

        async def write(*args: Any, **kwargs: Any) -> Any:
            sent = Sent(self._name, method, args, kwargs)
            await owner.before(sent)
            await asyncio.sleep(0)
            logged = self._logged(method, args, kwargs)
            start = owner.wire.tick()
            try:
                result = attribute(*args, **kwargs)
                if inspect.isawaitable(result):
                    result = await result
            except Exception:
                owner.wire.landed(Write(**{**logged, "start": start, "end": owner.wire.tick()}))
                raise
            owner.wire.landed(
                Write(**{**logged, "start": start, "end": owner.wire.tick(), "applied": _applied(result)})
            )
            if owner.on_landed is not None:
                owner.on_landed(sent, result)
            owner.after(sent)
            return result

        return write

    def _logged(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if method.startswith("insert"):
            payload: Any = args[0] if args else kwargs.get("document", kwargs.get("documents"))
            target = payload.get("_id") if isinstance(payload, dict) else None
        else:
            query = args[0] if args else kwargs.get("filter", {})
            payload = [*args[1:], *(v for k, v in kwargs.items() if k in {"update", "replacement"})]
            target = query.get("_id") if isinstance(query, dict) else None
        return {
            "collection": self._name,
            "target": target if isinstance(target, str) else None,  # one document's id, or none
            "contents": tuple(_contents(payload)),
            "touches_window": _names(payload, "chat_messages"),
        }


class ProcessCursor:
    """A cursor of a :class:`ProcessDatabase`: refused once the process is dead."""

    def __init__(self, owner: ProcessDatabase, cursor: Any) -> None:
        self._owner = owner
        self._cursor = cursor

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._cursor, name)
        if name in {"sort", "skip", "limit", "max_time_ms", "batch_size", "hint"}:
            return lambda *a, **k: ProcessCursor(self._owner, attribute(*a, **k))
        return attribute

    async def to_list(self, length: int | None = None) -> list[Any]:
        self._owner.check_alive()
        return list(await self._cursor.to_list(length))

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        self._owner.check_alive()
        async for document in self._cursor:
            self._owner.check_alive()
            yield document


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

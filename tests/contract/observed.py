"""A database that observes its calls: the driver proxy the position tests and the protocol tests share.

Pass an :class:`ObservedDatabase` where a database is expected. Every write sent through it is logged as a
:class:`Write` on a :class:`Wire` (one clock and one log for every database of a test), which is what the
exactly-once oracle of ``positions_support`` judges. Results may be awaitable or not (Motor's ``aggregate``
gives a cursor, PyMongo's async one a coroutine giving it), and ``with_options`` keeps the collection
wrapped where the backend gives back the same kind.

The faults of the position tests are built in (random pauses, stalls, a connection cut right after an
append); a simulated process of the protocol tests (``protocol_support.ProcessDatabase``) is a subclass
that overrides the hooks: :meth:`~ObservedDatabase.check` (before a call reaches the backend),
:meth:`~ObservedDatabase.before_sending` (just before a call is sent), :meth:`~ObservedDatabase.answered`
(once a write's answer is logged) and :meth:`~ObservedDatabase.received` (after a read's answer, and before
each document a cursor hands on).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from pymongo.errors import ConnectionFailure

CORES, UNITS = "memory_cores", "memory_units"
STALL_S = 0.2
"""A stall of an :class:`ObservedDatabase` call, in real seconds (``clear_window`` polls every 0.05 s)."""
CURSOR_METHODS = frozenset({"find", "aggregate", "watch", "list_indexes"})
CURSOR_CHAIN = frozenset({"sort", "skip", "limit", "max_time_ms", "batch_size", "hint"})
"""A cursor's methods that give back the cursor (its refinements)."""
WRITE_METHODS = frozenset(
    {
        "insert_one",
        "insert_many",
        "update_one",
        "update_many",
        "replace_one",
        "delete_one",
        "delete_many",
        "find_one_and_update",
        "find_one_and_replace",
        "find_one_and_delete",
        "bulk_write",
    }
)


@dataclass(frozen=True)
class Write:
    """One write as seen from the client: where it sits in the order of all observed calls (``start``: just
    before it was sent, ``end``: just after its answer; on the in-memory backend nothing runs in between),
    the unit or core it addressed (one document's string id, or None), the message contents it carried,
    whether it named the chat window, and whether it changed anything."""

    collection: str
    target: str | None
    contents: tuple[str, ...]
    touches_window: bool
    start: int = -1
    end: int = -1
    applied: bool = False


@dataclass(frozen=True)
class Call:
    """One call to a collection as the client makes it: the collection, the method, its arguments."""

    collection: str
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


WriteHook = Callable[[Write], Awaitable[None]]


class Wire:
    """One clock and one log of writes shared by every :class:`ObservedDatabase` of a test. The clock is a
    counter, or ``clock`` (``time.monotonic_ns``: one clock for every process of a machine)."""

    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        self._clock = clock if clock is not None else itertools.count().__next__
        self.writes: list[Write] = []

    def tick(self) -> int:
        return self._clock()

    def sending(self, write: Write) -> None:
        """``write`` is about to be sent (its ``end`` not known yet): a process that may be killed logs it."""

    def landed(self, write: Write) -> None:
        self.writes.append(write)


class ObservedDatabase:
    """Pass it where a database is expected: every write is logged on ``wire``; with ``rng`` every call first
    yields to the event loop a few times (mongomock answers without yielding, so without it concurrent tasks
    would never interleave between a read and a write), and with ``stall_chance`` it sometimes stalls
    (:data:`STALL_S`) as a paused process would.

    :meth:`cut_after_next_append` simulates a connection that drops (or a process that dies) right after a
    roll's append lands: once a write carrying messages lands in the units, every later call through this
    database raises ``ConnectionFailure`` without reaching the server, until :meth:`reconnect`.
    """

    def __init__(
        self, database: Any, wire: Wire, rng: random.Random | None = None, *, stall_chance: float = 0.0
    ) -> None:
        self._database = database
        self.wire = wire
        self._rng = rng
        self._stall_chance = stall_chance
        self._armed = False
        self.cut = False
        self.before: WriteHook | None = None
        """Awaited before each write is sent (a process script stalls or hangs there)."""
        self.after: WriteHook | None = None
        """Awaited after each write's answer."""
        self._collections: dict[str, ObservedCollection] = {}

    def __getitem__(self, name: str) -> ObservedCollection:
        if name not in self._collections:
            self._collections[name] = ObservedCollection(self, self._database[name], name)
        return self._collections[name]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)

    def cut_after_next_append(self) -> None:
        self._armed = True

    def reconnect(self) -> None:
        self._armed = self.cut = False

    async def pause(self) -> None:
        """Before a call and after its answer: yield a few times, sometimes stall (only given ``rng``)."""
        if self._rng is None:
            return
        if self._rng.random() < self._stall_chance:
            await asyncio.sleep(STALL_S)  # long enough for a waiting clear to look at the lease twice
        for _ in range(self._rng.choice((0, 0, 1, 2, 3, 5))):
            await asyncio.sleep(0)

    def landed(self, write: Write) -> None:
        """``write``'s answer came (or its error): log it, and cut the connection if armed for it."""
        self.wire.landed(write)
        if self._armed and write.collection == UNITS and write.applied and write.contents:
            self.cut = True

    # -- the hooks a subclass overrides (protocol_support.ProcessDatabase) --------------------------------

    def check(self) -> None:
        """Before a call (or a cursor's results) reaches the backend: refused once the connection is cut."""
        if self.cut:
            raise ConnectionFailure("connection lost (injected by the test)")

    async def before_sending(self, call: Call, write: Write | None) -> None:
        """Just before ``call`` is sent (``write``: how it will be logged; None for a read): the ``before``
        hook."""
        if write is not None and self.before is not None:
            await self.before(write)

    async def answered(self, call: Call, write: Write, result: Any) -> None:
        """After a write's answer (``result``) landed on the wire as ``write``: the ``after`` hook."""
        if self.after is not None:
            await self.after(write)

    def received(self) -> None:
        """After a read's answer, and before each document a cursor hands on: nothing here."""


class ObservedCollection:
    """A collection of an :class:`ObservedDatabase`."""

    def __init__(self, owner: ObservedDatabase, collection: Any, name: str) -> None:
        self._owner = owner
        self._collection = collection
        self._name = name

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._collection, name)
        if not callable(attribute):
            return attribute
        if name == "with_options":  # a wrapper keeps what it wraps where the backend gives another kind back
            return lambda *a, **k: self._with_options(attribute(*a, **k))
        if name in CURSOR_METHODS:
            return lambda *a, **k: self._cursor(attribute(*a, **k))
        if name in WRITE_METHODS:
            return self._writing(name, attribute)
        return self._reading(name, attribute)

    def _with_options(self, chosen: Any) -> Any:
        if type(chosen) is not type(self._collection):
            return self
        return ObservedCollection(self._owner, chosen, self._name)

    def _cursor(self, made: Any) -> Any:
        if inspect.isawaitable(made):  # PyMongo's async aggregate: a coroutine that returns the cursor

            async def opened() -> ObservedCursor:
                try:
                    self._owner.check()
                except BaseException:
                    if inspect.iscoroutine(made):  # never sent: closed, not left unawaited
                        made.close()
                    raise
                return ObservedCursor(self._owner, await made)

            return opened()
        return ObservedCursor(self._owner, made)

    def _reading(self, method: str, attribute: Callable[..., Any]) -> Callable[..., Any]:
        owner = self._owner

        async def read(*args: Any, **kwargs: Any) -> Any:
            await owner.pause()
            owner.check()
            await owner.before_sending(Call(self._name, method, args, kwargs), None)
            result = await _answer(attribute(*args, **kwargs))
            owner.received()
            await owner.pause()
            return result

        return read

    def _writing(self, method: str, attribute: Callable[..., Any]) -> Callable[..., Any]:
        owner = self._owner

        async def write(*args: Any, **kwargs: Any) -> Any:
            await owner.pause()
            owner.check()
            call, logged = Call(self._name, method, args, kwargs), self._logged(method, args, kwargs)
            await owner.before_sending(call, logged)
            logged = replace(logged, start=owner.wire.tick())
            owner.wire.sending(logged)
            try:
                result = await _answer(attribute(*args, **kwargs))
            except Exception:
                owner.landed(replace(logged, end=owner.wire.tick()))
                raise
            logged = replace(logged, end=owner.wire.tick(), applied=_applied(result))
            owner.landed(logged)
            await owner.answered(call, logged, result)
            await owner.pause()
            return result

        return write

    def _logged(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Write:
        if method.startswith("insert"):
            payload: Any = args[0] if args else kwargs.get("document", kwargs.get("documents"))
            target = payload.get("_id") if isinstance(payload, dict) else None
        else:
            query = args[0] if args else kwargs.get("filter", {})
            payload = [*args[1:], *(v for k, v in kwargs.items() if k in {"update", "replacement"})]
            target = query.get("_id") if isinstance(query, dict) else None
        return Write(
            collection=self._name,
            target=target if isinstance(target, str) else None,  # one document's id (a dict key), or none
            contents=tuple(_contents(payload)),
            touches_window=_names(payload, "chat_messages"),
        )


class ObservedCursor:
    """A cursor of an :class:`ObservedDatabase`: it pauses first and is checked before it runs."""

    def __init__(self, owner: ObservedDatabase, cursor: Any) -> None:
        self._owner = owner
        self._cursor = cursor

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._cursor, name)
        if name in CURSOR_CHAIN:
            return lambda *a, **k: ObservedCursor(self._owner, attribute(*a, **k))
        return attribute

    async def to_list(self, length: int | None = None) -> list[Any]:
        await self._owner.pause()
        self._owner.check()
        return list(await self._cursor.to_list(length))

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        await self._owner.pause()
        self._owner.check()
        async for document in self._cursor:
            self._owner.received()
            yield document


async def _answer(result: Any) -> Any:
    """A driver's answer, awaited where it is awaitable (the two driver stacks differ)."""
    return await result if inspect.isawaitable(result) else result


def _applied(result: Any) -> bool:
    """Whether a write's answer says it changed (or inserted, or returned) a document."""
    if result is None or isinstance(result, dict):  # find_one_and_*: the document, or None
        return result is not None
    if hasattr(result, "inserted_id") or hasattr(result, "inserted_ids"):
        return True
    if getattr(result, "upserted_id", None) is not None:
        return True
    return any(getattr(result, counter, 0) > 0 for counter in ("modified_count", "deleted_count"))


def _contents(value: Any) -> Iterable[str]:
    """The contents of every message (a ``{role, content}`` mapping) anywhere in ``value``."""
    if isinstance(value, dict):
        if isinstance(value.get("content"), str) and "role" in value:
            yield value["content"]
            return
        for item in value.values():
            yield from _contents(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _contents(item)


def _names(value: Any, key: str) -> bool:
    """Whether ``key`` is a field name (or a dotted path's first part) anywhere in ``value``."""
    if isinstance(value, dict):
        return any(str(k).split(".")[0] == key or _names(v, key) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_names(item, key) for item in value)
    return False

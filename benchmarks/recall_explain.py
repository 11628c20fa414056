"""What recall asks of its database: collection calls counted in memory, commands explained on a server.

:class:`CallCounter` wraps a database: each collection call (``find``, ``aggregate``, ``bulk_write``, ...)
is counted when it is made, with the BSON size of the documents it returned, so the in-memory backend,
which has no wire, still shows how many calls and bytes an operation costs.

:class:`CommandLog` records the commands a client sends (pymongo's command monitoring), the size of each
reply and the round trips they made, and :func:`examined` asks the server to ``explain`` each read among
them (``executionStats``): the stages of its plan, the indexes used, the documents examined and returned.
:func:`largest_document` finds the largest document of a collection.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import bson
from pymongo import monitoring

READS = frozenset({"find", "aggregate", "count", "distinct"})
"""Commands whose plan ``explain`` shows (writes by ``_id`` examine the one document they name)."""
DRIVER_FIELDS = frozenset(
    {"$db", "lsid", "$clusterTime", "txnNumber", "$readPreference", "readConcern", "signature", "apiVersion"}
)


class CallCounter:
    """A database wrapper recording ``(collection.method, returned bytes)`` while recording is on. The bytes
    are counted when :attr:`returned` is read, not during the call: encoding the answers to BSON is the
    meter's work, and it would otherwise be timed as part of the operation measured."""

    def __init__(self, database: Any) -> None:
        self._database = database
        self._recording = False
        self.calls: list[str] = []
        self._answers: list[dict[str, Any]] = []
        self.name = database.name
        self.client = database.client

    def start(self) -> None:
        self._recording = True
        self.calls = []
        self._answers = []

    def stop(self) -> list[str]:
        self._recording = False
        return self.calls

    def __getitem__(self, name: str) -> _Collection:
        return _Collection(self, name, self._database[name])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)

    def _called(self, label: str) -> None:
        if self._recording:
            self.calls.append(label)

    @property
    def returned(self) -> int:
        """The BSON bytes of the documents the calls recorded since :meth:`start` returned."""
        return sum(len(bson.encode(document)) for document in self._answers)

    def _returned(self, documents: Sequence[Any]) -> None:
        if self._recording:
            self._answers.extend(document for document in documents if isinstance(document, dict))


class _Collection:
    def __init__(self, counter: CallCounter, name: str, collection: Any) -> None:
        self._counter = counter
        self._name = name
        self._collection = collection

    def __getattr__(self, method: str) -> Any:
        attribute = getattr(self._collection, method)
        if not callable(attribute):
            return attribute
        label = f"{self._name}.{method}"

        def call(*args: Any, **kwargs: Any) -> Any:
            self._counter._called(label)
            value = attribute(*args, **kwargs)
            if inspect.isawaitable(value):
                return self._resolved(value)
            return self._wrapped(value)

        return call

    async def _resolved(self, value: Any) -> Any:
        return self._wrapped(await value)

    def _wrapped(self, value: Any) -> Any:
        if hasattr(value, "to_list"):
            return _Cursor(self._counter, value)
        self._counter._returned([value] if isinstance(value, dict) else [])
        return value


class _Cursor:
    def __init__(self, counter: CallCounter, cursor: Any) -> None:
        self._counter = counter
        self._cursor = cursor

    async def to_list(self, length: int | None = None) -> list[Any]:
        documents = list(await self._cursor.to_list(length))
        self._counter._returned(documents)
        return documents

    def __aiter__(self) -> Any:
        return self._iterate()

    async def _iterate(self) -> Any:
        documents = await self.to_list(None)
        for document in documents:
            yield document

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._cursor, name)
        if name in ("sort", "limit", "skip", "batch_size"):

            def chained(*args: Any, **kwargs: Any) -> _Cursor:
                attribute(*args, **kwargs)
                return self

            return chained
        return attribute


@dataclass
class CommandLog(monitoring.CommandListener):
    """Every command a client sends while recording is on (the command documents themselves), its reply,
    and the round trips: a command started while none is in flight begins one (the commands an operation
    sends together, ``asyncio.gather``, overlap, so they count once; a server that answers one before the
    next is sent shows more round trips than the operation made, never fewer), and so does a ``getMore``
    started while others are (a cursor's next batch waits for its first: one more round trip on that read's
    path, however the others overlap it)."""

    commands: list[dict[str, Any]] = field(default_factory=list)
    recording: bool = False
    rounds: int = 0
    _replies: list[Any] = field(default_factory=list)
    _in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        with self._lock:
            self.recording, self.commands, self._replies = True, [], []
            self.rounds, self._in_flight = 0, 0

    def stop(self) -> list[dict[str, Any]]:
        with self._lock:
            self.recording = False
            return list(self.commands)

    @property
    def reply_bytes(self) -> int:
        """The BSON bytes of the replies recorded since :meth:`start` (encoded when read, not while the
        operation measured runs)."""
        with self._lock:
            replies = list(self._replies)
        return sum(len(bson.encode(reply)) for reply in replies)

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        with self._lock:
            if self.recording:
                self.commands.append(dict(event.command))
                if self._in_flight == 0 or event.command_name == "getMore":
                    self.rounds += 1
                self._in_flight += 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        with self._lock:
            if self.recording:
                self._replies.append(event.reply)
                self._in_flight = max(self._in_flight - 1, 0)

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        with self._lock:
            if self.recording:
                self._in_flight = max(self._in_flight - 1, 0)


@dataclass(frozen=True)
class Plan:
    """What ``explain`` says of one read (``counting``: the read counts a query term's slices; ``codes``:
    it reads the vector codes of a core's slices, a covered read on MongoDB, which examines no document)."""

    command: str
    collection: str
    stages: tuple[str, ...]
    indexes: tuple[str, ...]
    docs_examined: int
    returned: int
    counting: bool = False
    codes: bool = False
    id_and_more: str = ""
    """When the read selects ``_id`` (``$in`` or an equality) and more, what it is (:func:`id_and_more`):
    SecantusDB's planner scans the collection for such a filter, where mongod uses the ``_id`` index."""

    @property
    def collection_scan(self) -> bool:
        return "COLLSCAN" in self.stages


async def examined(database: Any, commands: Sequence[dict[str, Any]]) -> list[Plan]:
    """``explain`` (``executionStats``) of every read among ``commands``."""
    plans: list[Plan] = []
    for command in commands:
        name = next(iter(command))
        if name not in READS:
            continue
        plain = {key: value for key, value in command.items() if key not in DRIVER_FIELDS}
        if name == "aggregate":
            plain["cursor"] = {}
        explained = await database.command("explain", plain, verbosity="executionStats")
        counting = any("$count" in stage for stage in command.get("pipeline") or [])
        plan = summarize(name, str(command[name]), explained)
        plans.append(
            replace(plan, counting=counting, codes=code_scan(command), id_and_more=id_and_more(command))
        )
    return plans


def id_and_more(command: dict[str, Any]) -> str:
    """What ``command`` is when its filter (a find's, an aggregation's first ``$match``) selects ``_id`` and
    something more (the units' tombstone check ``MemoryUnitRepository.erased``: ``{_id: {$in}, erased_at:
    {$exists}}``; the messages read: ``{_id: {$in}, core_id}``), else ``""``. mongod answers such a filter
    through the ``_id`` index; SecantusDB's planner scans the collection (tests/emulator_gaps.py)."""
    name = next(iter(command))
    if name == "find":
        selecting = command.get("filter") or {}
    elif name == "aggregate":
        stages = command.get("pipeline") or [{}]
        selecting = stages[0].get("$match") or {}
    else:
        return ""
    if "_id" not in selecting or len(selecting) < 2:
        return ""
    if "erased_at" in selecting:
        return f"tombstone check ({name} {command[name]})"
    return f"{name} {command[name]} (_id and {', '.join(key for key in selecting if key != '_id')})"


def code_scan(command: dict[str, Any]) -> bool:
    """Whether ``command`` is recall's read of a core's vector codes (``RecallQueries.codes``): an aggregate
    matching the embedder's tag and projecting the code alone."""
    pipeline = command.get("pipeline") or []
    matched = any("vtag" in (stage.get("$match") or {}) for stage in pipeline)
    projected = [stage["$project"] for stage in pipeline if "$project" in stage]
    return matched and any("vcode" in projection for projection in projected)


SCOPE_FREE = frozenset({"getMore", "killCursors", "endSessions"})
"""Commands that select nothing of their own (a cursor's next batch, its end)."""


def unscoped(commands: Sequence[dict[str, Any]], core_id: str) -> list[str]:
    """The commands among ``commands`` that do not select ``core_id`` alone: no ``core_id`` in what selects
    their documents (a filter, a query, a pipeline's ``$match`` stages; not what they project), or another
    value there."""
    missed: list[str] = []
    for command in commands:
        name = next(iter(command))
        if name in SCOPE_FREE:
            continue
        values = [value for selecting in _selecting(command) for value in _core_values(selecting)]
        if not values or any(value not in (core_id, {"$eq": core_id}) for value in values):
            missed.append(f"{name} {command[name]}")
    return missed


def _selecting(command: dict[str, Any]) -> Iterator[Any]:
    """What selects the documents of a command: its filter or query, each ``$match`` of its pipeline, the
    ``q`` of each update or deletion."""
    for key in ("filter", "query"):
        if key in command:
            yield command[key]
    for stage in command.get("pipeline") or []:
        if "$match" in stage:
            yield stage["$match"]
    for key in ("updates", "deletes"):
        for statement in command.get(key) or []:
            yield statement.get("q")


def _core_values(value: Any) -> Iterator[Any]:
    for node in _walk(value):
        if "core_id" in node:
            yield node["core_id"]


def summarize(command: str, collection: str, explained: dict[str, Any]) -> Plan:
    """Stages, indexes and documents examined of an ``explain`` answer (any of its shapes)."""
    stages: list[str] = []
    indexes: list[str] = []
    for node in _walk(explained):
        if isinstance(node.get("stage"), str):
            stages.append(node["stage"])
        if isinstance(node.get("indexName"), str):
            indexes.append(node["indexName"])
    stats = next((node for node in _walk(explained) if "totalDocsExamined" in node), {})
    return Plan(
        command=command,
        collection=collection,
        stages=tuple(dict.fromkeys(stages)),
        indexes=tuple(dict.fromkeys(indexes)),
        docs_examined=int(stats.get("totalDocsExamined") or 0),
        returned=int(stats.get("nReturned") or 0),
    )


def _walk(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


async def largest_document(collection: Any) -> int:
    """The BSON size of the largest document of ``collection`` (a scan: for a benchmark, not a service)."""
    largest = 0
    async for document in collection.find({}):
        largest = max(largest, len(bson.encode(document)))
    return largest


__all__ = [
    "CallCounter",
    "CommandLog",
    "Plan",
    "code_scan",
    "examined",
    "id_and_more",
    "largest_document",
    "summarize",
    "unscoped",
]

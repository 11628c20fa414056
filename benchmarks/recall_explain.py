"""What recall asks of its database: collection calls counted in memory, commands explained on a server.

:class:`CallCounter` wraps a database: each collection call (``find``, ``aggregate``, ``bulk_write``, ...)
is counted when it is made, with the BSON size of the documents it returned, so the in-memory backend,
which has no wire, still shows how many calls and bytes an operation costs.

:class:`CommandLog` records the commands a client sends (pymongo's command monitoring), and
:func:`examined` asks the server to ``explain`` each read among them (``executionStats``): the stages of its
plan, the indexes used, the documents examined and returned. :func:`largest_document` finds the largest
document of a collection.
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
    """Every command a client sends while recording is on (the command documents themselves)."""

    commands: list[dict[str, Any]] = field(default_factory=list)
    recording: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        with self._lock:
            self.recording, self.commands = True, []

    def stop(self) -> list[dict[str, Any]]:
        with self._lock:
            self.recording = False
            return list(self.commands)

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        with self._lock:
            if self.recording:
                self.commands.append(dict(event.command))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        """Nothing to record."""

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        """Nothing to record."""


@dataclass(frozen=True)
class Plan:
    """What ``explain`` says of one read (``counting``: the read counts a query term's slices)."""

    command: str
    collection: str
    stages: tuple[str, ...]
    indexes: tuple[str, ...]
    docs_examined: int
    returned: int
    counting: bool = False

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
        plans.append(replace(summarize(name, str(command[name]), explained), counting=counting))
    return plans


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


__all__ = ["CallCounter", "CommandLog", "Plan", "examined", "largest_document", "summarize"]

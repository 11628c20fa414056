"""What a recall asks of its database: driver calls counted in memory, plans explained on a server.

:class:`CallCounter` wraps a database: each collection call a recall makes (``aggregate``, ``find``, ...)
is recorded with the BSON size of the documents it returned, so the in-memory backend, which has no wire,
still shows how many round trips and how many bytes a server would be asked for.

:func:`pipelines` records the aggregations of one recall (through a :class:`CallCounter`);
:func:`matched` counts the documents each one's first ``$match`` selects (what a server with the right
indexes reads, on any backend); :func:`explain_plans` asks a server to ``explain`` each (``executionStats``)
and keeps what matters: the stages of the winning plan, the indexes used, keys and documents examined,
documents returned. A server that cannot explain an aggregation says so in the result.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import bson

from partner_repo.recall import MemoryRecall


class CallCounter:
    """A database wrapper recording ``(collection.method, returned bytes)`` while recording is on, and the
    pipelines of the aggregations."""

    def __init__(self, database: Any) -> None:
        self._database = database
        self._recording = False
        self.calls: list[tuple[str, int]] = []
        self.pipelines: list[tuple[str, list[dict[str, Any]]]] = []
        self.name = database.name
        self.client = database.client

    def start(self) -> None:
        self._recording = True
        self.calls = []
        self.pipelines = []

    def stop(self) -> list[tuple[str, int]]:
        self._recording = False
        return self.calls

    def __getitem__(self, name: str) -> _Collection:
        return _Collection(self, name, self._database[name])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)

    def _record(self, label: str, documents: list[Any]) -> None:
        if self._recording:
            self.calls.append((label, sum(len(bson.encode(d)) for d in documents if isinstance(d, dict))))


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

        async def call(*args: Any, **kwargs: Any) -> Any:
            if method == "aggregate" and self._counter._recording:
                self._counter.pipelines.append((self._name, list(args[0])))
            value = attribute(*args, **kwargs)
            if inspect.isawaitable(value):
                value = await value
            if hasattr(value, "to_list"):
                return _Cursor(self._counter, label, value)
            self._counter._record(label, [value] if isinstance(value, dict) else [])
            return value

        return call


class _Cursor:
    def __init__(self, counter: CallCounter, label: str, cursor: Any) -> None:
        self._counter = counter
        self._label = label
        self._cursor = cursor

    async def to_list(self, length: int | None = None) -> list[Any]:
        documents = list(await self._cursor.to_list(length))
        self._counter._record(self._label, documents)
        return documents

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


async def pipelines(database: Any, query: str, limit: int, max_messages: int, core_id: str) -> list[Any]:
    """The ``(collection, pipeline)`` of each aggregation one recall of ``query`` runs."""
    counter = CallCounter(database)
    counter.start()
    # search=False: no MongoDB Search probe (an aggregation of its own, not part of the recall's plan)
    await MemoryRecall(counter, search=False).recall(core_id, query, limit=limit, max_messages=max_messages)
    counter.stop()
    return counter.pipelines


async def matched(database: Any, query: str, limit: int, max_messages: int, core_id: str) -> dict[str, int]:
    """How many documents the first ``$match`` of each aggregation of one recall selects: what a server
    with the right indexes reads (a collection scan reads the whole collection instead)."""
    found: dict[str, int] = {}
    for collection, pipeline in await pipelines(database, query, limit, max_messages, core_id):
        found[collection] = int(await database[collection].count_documents(pipeline[0]["$match"]))
    return found


async def explain_plans(
    database: Any, query: str, limit: int, max_messages: int, core_id: str
) -> dict[str, Any]:
    """``explain`` (``executionStats``) of each aggregation one recall of ``query`` runs, summarized."""
    plans: dict[str, Any] = {}
    for collection, pipeline in await pipelines(database, query, limit, max_messages, core_id):
        try:
            explained = await database.command(
                "explain",
                {"aggregate": collection, "pipeline": pipeline, "cursor": {}},
                verbosity="executionStats",
            )
        except Exception as exc:  # a server without explain for this pipeline: say so
            plans[collection] = {"error": str(exc).splitlines()[0]}
            continue
        plans[collection] = summarize(explained)
    return plans


def summarize(explained: dict[str, Any]) -> dict[str, Any]:
    """Stages, indexes, keys and documents examined of an ``explain`` answer (any of its shapes)."""
    stages: list[str] = []
    indexes: list[str] = []
    for node in _walk(explained):
        stage = node.get("stage")
        if isinstance(stage, str):
            stages.append(stage)
        if isinstance(node.get("indexName"), str):
            indexes.append(node["indexName"])
    stats = next((node for node in _walk(explained) if "totalDocsExamined" in node), {})
    return {
        "stages": list(dict.fromkeys(stages)),
        "indexes": list(dict.fromkeys(indexes)),
        "keys_examined": int(stats.get("totalKeysExamined") or 0),
        "docs_examined": int(stats.get("totalDocsExamined") or 0),
        "returned": int(stats.get("nReturned") or 0),
        "collection_scan": "COLLSCAN" in stages,
    }


def _walk(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


__all__ = ["CallCounter", "explain_plans", "matched", "pipelines", "summarize"]

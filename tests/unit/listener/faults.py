"""Fakes for the listener's failure paths: a database that is down until told otherwise, change streams that
open and fail as scripted, and a backoff that records which retry numbers it was asked for.

mongomock-motor has no change streams; :class:`ScriptedStreams` gives the in-memory ``memory_units`` a
``watch()`` whose streams follow a script, while every document read and write still goes to memory.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pymongo.errors import AutoReconnect, OperationFailure

from partner_repo import Backoff

STANDALONE = OperationFailure(
    "The $changeStream stage is only supported on replica sets", code=40573, details={"code": 40573}
)


@dataclass(frozen=True)
class RecordingBackoff(Backoff):
    """A backoff that waits nothing and remembers every retry number it was asked for, in order."""

    retries: list[int] = field(default_factory=list, compare=False)

    def delay(self, retry: int) -> float:
        self.retries.append(retry)
        return 0.0


class Outage:
    """A switch for :class:`OutageDatabase`: while ``down``, every call fails with a network error."""

    def __init__(self) -> None:
        self.down = False
        self.failures = 0

    def check(self) -> None:
        if self.down:
            self.failures += 1
            raise AutoReconnect("connection refused (outage)")


class OutageCollection:
    """A collection whose every call fails while the outage lasts; ``watch`` (a replica set's change stream)
    fails too, and once the outage is over answers as a standalone server does (so the listener polls)."""

    def __init__(self, collection: Any, outage: Outage) -> None:
        self._collection = collection
        self._outage = outage

    def watch(self, *args: Any, **kwargs: Any) -> Any:
        self._outage.check()
        raise STANDALONE

    def with_options(self, **options: Any) -> OutageCollection:
        return self

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._collection, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            self._outage.check()
            return attribute(*args, **kwargs)

        return call


class OutageDatabase:
    def __init__(self, database: Any, outage: Outage) -> None:
        self._database = database
        self._outage = outage

    def __getitem__(self, name: str) -> OutageCollection:
        return OutageCollection(self._database[name], self._outage)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)


Step = Exception | Mapping[str, Any] | None
"""What one ``try_next`` of a scripted stream does: raise, return an event, or return None (idle)."""


@dataclass
class StreamScript:
    """One stream: ``open_error`` is raised when it opens; otherwise its ``steps`` run, then it idles."""

    open_error: Exception | None = None
    steps: list[Step] = field(default_factory=list)


class FakeStream:
    def __init__(self, script: StreamScript, token: dict[str, str]) -> None:
        self._script = script
        self._steps: deque[Step] = deque(script.steps)
        self.resume_token: dict[str, str] | None = token

    async def __aenter__(self) -> FakeStream:
        await asyncio.sleep(0)
        if self._script.open_error is not None:
            raise self._script.open_error
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def try_next(self) -> Any:
        await asyncio.sleep(0.002)
        if not self._steps:
            return None
        step = self._steps.popleft()
        if isinstance(step, Exception):
            raise step
        if step is not None:
            self.resume_token = dict(step["_id"])
        return step


class ScriptedCollection:
    """``memory_units`` in memory, with a ``watch`` whose streams follow ``scripts`` (then idle forever)."""

    def __init__(self, collection: Any, scripts: list[StreamScript]) -> None:
        self._collection = collection
        self._scripts = deque(scripts)
        self.opened: list[dict[str, Any]] = []
        """The options each ``watch`` call was given (``resume_after``, ``start_after``...)."""

    def watch(self, pipeline: Any = None, **options: Any) -> FakeStream:
        self.opened.append({k: v for k, v in options.items() if v is not None and k != "max_await_time_ms"})
        script = self._scripts.popleft() if self._scripts else StreamScript()
        return FakeStream(script, {"_data": f"82OPEN{len(self.opened)}"})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)


class ScriptedStreams:
    """A database whose ``memory_units`` has scripted change streams; ``wrap`` wraps other collections."""

    def __init__(
        self,
        database: Any,
        scripts: list[StreamScript],
        *,
        wrap: Mapping[str, Callable[[Any], Any]] | None = None,
    ) -> None:
        self._database = database
        self.units = ScriptedCollection(database["memory_units"], scripts)
        self._wrapped = {name: make(database[name]) for name, make in (wrap or {}).items()}

    def __getitem__(self, name: str) -> Any:
        if name == "memory_units":
            return self.units
        return self._wrapped.get(name) or self._database[name]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)

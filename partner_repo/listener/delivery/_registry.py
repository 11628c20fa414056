"""AfterRolling consumers and the registry that runs them: Partner's ``AfterRollingRegistry``.

A consumer has a ``name`` (it keys the listener's per-consumer progress and dead letters, so it must be
stable across restarts and unique within a registry) and a ``consume(result)``, optionally an
``on_erased(erasure)``: each either a coroutine function, awaited on the event loop, or a plain callable, run
in a worker thread (``asyncio.to_thread``) so a blocking client never stalls the loop. How each is called is
decided once (:func:`consumer_calls`), when the consumer is registered and when a listener starts, as for
summarizers; anything else is refused at registration with :class:`InvalidInput` naming the consumer.

A consumer named on the command line is loaded from its import path (``package.module:attr``) by
:func:`load_consumer`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from partner_repo.callables import as_async
from partner_repo.errors import InvalidInput
from partner_repo.events import RollingResult
from partner_repo.mongo import library_logger
from partner_repo.plugins import import_object


def load_consumer(path: str) -> AfterRolling:
    """The consumer at ``package.module:attr``: an AfterRolling object, or a class built with no arguments."""
    target = import_object(path, what="consumer")
    if inspect.isclass(target):
        try:
            target = target()
        except TypeError as exc:
            raise InvalidInput(
                f"consumer {path!r}: the class cannot be built without arguments: {exc}"
            ) from exc
    if not isinstance(target, AfterRolling):
        raise InvalidInput(
            f"consumer {path!r} is not an AfterRolling (needs `name` and `consume(result)`, async or plain)"
        )
    return target


def registry_from_paths(paths: list[str]) -> AfterRollingRegistry:
    """A registry holding the consumers at ``paths``, in that order."""
    registry = AfterRollingRegistry()
    for path in paths:
        registry.register(load_consumer(path))
    return registry


logger = library_logger("partner_repo.listener.registry")


@runtime_checkable
class AfterRolling(Protocol):
    """Something that acts on every roll: index the slice, update a profile, notify a service.

    ``consume`` may also be a plain ``def`` (run in a worker thread; see the module docstring)."""

    @property
    def name(self) -> str: ...

    async def consume(self, result: RollingResult) -> None: ...


Call = Callable[[Any], Awaitable[object]]
"""A consumer's ``consume`` or ``on_erased`` in the one form the listener awaits."""


@dataclass(frozen=True)
class ConsumerCalls:
    """How a consumer is called, decided once: ``consume``, and ``on_erased`` (None when it has none)."""

    consume: Call
    on_erased: Call | None


def consumer_calls(consumer: object) -> ConsumerCalls:
    """How ``consumer``'s methods are called; :class:`InvalidInput` naming it when one cannot be.

    A coroutine function (or an object whose ``__call__`` is one) is awaited on the event loop; any other
    callable runs in a worker thread, and an awaitable it returns is awaited on the loop. A generator
    function (sync or async) is refused: calling it would run nothing. ``on_erased`` absent or None: the
    consumer is not told of erasures.
    """
    consume = _call(consumer, "consume")
    assert consume is not None
    return ConsumerCalls(consume=consume, on_erased=_call(consumer, "on_erased", optional=True))


def _call(consumer: object, method: str, *, optional: bool = False) -> Call | None:
    function = getattr(consumer, method, None)
    if function is None and optional:
        return None
    label = f"consumer {getattr(consumer, 'name', None)!r} ({type(consumer).__name__})"
    generator = inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function)
    if not callable(function) or generator:
        raise InvalidInput(
            f"{label}: `{method}` must be an `async def` or a plain `def` method, got {_kind(function)}"
        )
    return as_async(function)


def _kind(function: object) -> str:
    if inspect.isasyncgenfunction(function):
        return "an async generator function"
    if inspect.isgeneratorfunction(function):
        return "a generator function"
    return type(function).__name__


class AfterRollingRegistry:
    """The consumers of rolls, in registration order."""

    def __init__(self, consumers: list[AfterRolling] | None = None) -> None:
        self._consumers: list[AfterRolling] = []
        self._calls: dict[str, ConsumerCalls] = {}
        for consumer in consumers or []:
            self.register(consumer)

    def register(self, consumer: AfterRolling) -> None:
        """Add a consumer; registering the same consumer again keeps one.

        A *different* consumer under a name already taken is refused: progress and dead letters are kept
        by name, so two consumers sharing one would share (and corrupt) them.
        """
        if not isinstance(consumer, AfterRolling):
            raise InvalidInput(
                "a consumer needs a `name` and a `consume(result)` (async or plain), "
                f"got {type(consumer).__name__}"
            )
        name = _consumer_name(consumer)
        for existing in self._consumers:
            if existing is consumer:
                return
            if existing.name == name:
                raise InvalidInput(f"another consumer is already registered as {name!r}")
        self._calls[name] = consumer_calls(consumer)  # sync or async, decided once
        self._consumers.append(consumer)

    def unregister(self, consumer: AfterRolling | str) -> bool:
        """Remove a consumer (the object or its name); True when it was registered."""
        for index, existing in enumerate(self._consumers):
            if existing is consumer or existing.name == consumer:
                del self._consumers[index]
                self._calls.pop(existing.name, None)
                return True
        return False

    def consumers(self) -> list[AfterRolling]:
        """The registered consumers in registration order (a copy)."""
        return list(self._consumers)

    def get(self, name: str) -> AfterRolling | None:
        """The consumer registered under ``name``, or None."""
        return next((c for c in self._consumers if c.name == name), None)

    def calls(self, name: str) -> ConsumerCalls | None:
        """How the consumer registered under ``name`` is called (decided when it was registered), or None."""
        return self._calls.get(name)

    def __len__(self) -> int:
        return len(self._consumers)

    async def trigger(self, result: RollingResult) -> list[str]:
        """Run every consumer in registration order; one that raises does not stop the others.

        Each failure is logged with the consumer's name and the slice id. Returns the names of the consumers
        that failed (empty when all succeeded).
        """
        failed: list[str] = []
        for consumer in list(self._consumers):
            try:
                await self._calls[consumer.name].consume(result)
            except BaseException as exc:
                if not raised_by_consumer(exc):
                    raise
                failed.append(consumer.name)
                logger.exception(
                    "AfterRolling consumer %r failed on slice %s (unit %s)",
                    consumer.name,
                    result.slice_id,
                    result.memory_unit.id,
                )
        return failed


def raised_by_consumer(exc: BaseException) -> bool:
    """Whether ``exc``, raised out of ``consume``, is that consumer's failure rather than ours to propagate.

    A consumer may raise anything, ``asyncio.CancelledError`` included (a cancelled inner task, a timeout
    library): that is its failure, retried and dead-lettered like any exception, never a reason to stop
    delivering; so is a ``KeyboardInterrupt`` or ``SystemExit`` raised by its code (a Ctrl-C reaches an
    asyncio program as the cancellation of its main task, and ``partner-repo listen`` handles SIGINT itself,
    so neither comes from outside a consumer). Only the cancellation of the task running it
    (``cancelling()``: the listener stopping) propagates.
    """
    task = asyncio.current_task()
    return task is None or task.cancelling() == 0


def _consumer_name(consumer: AfterRolling) -> str:
    """The consumer's name, checked: a non-blank string."""
    name = getattr(consumer, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput(f"consumer {consumer!r} needs a non-blank string `name`, got {name!r}")
    return name


__all__ = [
    "AfterRolling",
    "AfterRollingRegistry",
    "ConsumerCalls",
    "consumer_calls",
    "load_consumer",
]

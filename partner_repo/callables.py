"""The one way the library calls what an application hands it: summarizers, consumers, topic extractors.

Each may be written either way, and the library awaits all of them alike:

- a coroutine function, or an object whose ``__call__`` is one (such as ``ExtractiveSummarizer``): called and
  awaited on the event loop, as given;
- any other callable: called in a worker thread (``asyncio.to_thread``), so a blocking client (an LLM SDK, a
  database driver of its own) never stalls the loop, nor the leases and heartbeats running on it; when what it
  returns is awaitable (``lambda messages: llm.summarize(messages)`` around an async method), that is awaited
  on the loop. A sync callable that needs the running event loop itself must be made async.

The choice is made once, when the callable is handed over (:func:`as_async`), not at every call.

A :data:`Progress` hook is the exception: long-running library work (import, check, repair, migrations)
reports how far it got to it, called directly, since it only records numbers (the CLI draws a bar from them);
the library never draws anything itself.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

A = TypeVar("A")

Progress = Callable[[int, int], None]
"""Called with (steps done, steps in total): once with 0 before the first step, then after each step. The
total is what was known when the work started (units written meanwhile are not counted in it)."""

AsyncCall = Callable[[A], Awaitable[object]]
"""How the library calls a callable of one argument: always awaited, whatever form it was given in."""


def is_async_callable(function: object) -> bool:
    """Whether calling ``function`` gives a coroutine to await on the loop (an ``async def``, or an object
    whose ``__call__`` is one)."""
    if inspect.iscoroutinefunction(function):
        return True
    call = getattr(function, "__call__", None)  # noqa: B004 - the method itself, to inspect it
    return call is not None and inspect.iscoroutinefunction(call)


def as_async(function: Callable[[A], object]) -> AsyncCall[A]:
    """``function`` in the one form the library awaits, decided now (see the module's docstring)."""
    if is_async_callable(function):
        awaited: AsyncCall[A] = function  # type: ignore[assignment]
        return awaited
    blocking = function

    async def in_a_thread(argument: A) -> object:
        outcome = await asyncio.to_thread(blocking, argument)
        if inspect.isawaitable(outcome):
            return await outcome
        return outcome

    return in_a_thread


async def call(function: Callable[[A], Any], argument: A) -> Any:
    """``function(argument)`` as :func:`as_async` would call it, for a callable used once."""
    return await as_async(function)(argument)


__all__ = ["Progress", "AsyncCall", "as_async", "call", "is_async_callable"]

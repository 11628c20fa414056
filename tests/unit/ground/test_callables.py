"""The one adapter for what an application hands the library: async callables are awaited on the loop, plain
ones run in a worker thread, and what a plain one returns is awaited when it is awaitable."""

from __future__ import annotations

import threading
from collections.abc import Awaitable

from partner_repo.callables import as_async, is_async_callable


async def test_an_async_function_is_awaited_on_the_event_loop() -> None:
    async def where(_: object) -> str:
        return threading.current_thread().name

    assert await as_async(where)(None) == threading.current_thread().name


async def test_a_plain_function_runs_in_a_worker_thread() -> None:
    def where(_: object) -> str:
        return threading.current_thread().name

    assert await as_async(where)(None) != threading.current_thread().name


async def test_an_awaitable_a_plain_function_returns_is_awaited() -> None:
    async def summary() -> str:
        return "awaited"

    def returns_a_coroutine(_: object) -> Awaitable[str]:
        return summary()

    assert await as_async(returns_a_coroutine)(None) == "awaited"


async def test_an_object_with_an_async_call_is_called_as_given() -> None:
    class Summarizer:
        async def __call__(self, messages: list[str]) -> str:
            return " ".join(messages)

    summarizer = Summarizer()

    assert is_async_callable(summarizer)
    assert as_async(summarizer) is summarizer
    assert await as_async(summarizer)(["a", "b"]) == "a b"

"""A memory worth looking at, and a console serving it in this process, for the console's tests.

:func:`seed` writes through the library's own services, as an application would: conversations rolled by a
``RollingService`` (one roll whose summarizer failed, so its slice is unsummarized; one message holding a
``<script>``), every roll indexed for recall, a core whose stored unit does not tile its messages (written as
another tool would, so the timeline has a gap and an overlap to show), and a listener group run once with a
consumer that fails, so it has dead letters. :class:`Served` runs :func:`partner_repo.console.console_app`
under uvicorn on a free loopback port in the test's event loop, so the test and the console share the
database (the in-memory one too).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from partner_repo import (
    AfterRollingRegistry,
    Backoff,
    MemorySlice,
    MemoryUnit,
    Message,
    RollingListener,
    RollingResult,
    RollingService,
)
from partner_repo.console import ConsoleOptions, console_app, serve_console
from partner_repo.mongo import UNITS, unit_document
from partner_repo.recall import RecallIndexer
from partner_repo.rolling import RollingConfig, extractive_summarizer

SCRIPT = '<script>window.pwned = true</script><img src=x onerror="window.pwned = true">'
"""A message an attacker would love the console to render as HTML."""
TOKEN = "console-Token_for.the-tests-0123"
TURNS = {
    "alice": [
        ("My sister Mia lives in Lyon.", "Lyon is lovely in spring."),
        ("She teaches piano there.", "A musical family!"),
        ("I adopted a beagle called Biscuit.", "Beagles love long walks."),
        ("Biscuit chewed my slippers.", "Puppies do that."),
        (SCRIPT, "That looks like code, not a question."),
        ("We booked a trip to Kyoto in May.", "Kyoto is beautiful then."),
        ("Any vegetarian food near Nishiki Market?", "Try shojin ryori."),
        ("And ramen?", "Several shops make a vegetarian broth."),
        ("Remind me to call Mia on Sunday.", "I will."),
    ],
    "bob": [
        ("I run marathons.", "Impressive!"),
        ("My next one is in Berlin.", "Good luck in Berlin."),
    ],
}
UNSUMMARIZED_CORE = "carol"
GAPPY_CORE = "gappy"
GROUP = "recall"
FAILING = "mailer"


class FailingConsumer:
    """A consumer whose every delivery fails: its slices become dead letters."""

    name = FAILING

    async def consume(self, result: RollingResult) -> None:
        raise RuntimeError(f"smtp down while mailing {result.slice_id} <b>bold?</b>")


async def failing_summarizer(messages: list[Message]) -> str:
    raise RuntimeError("the summarizer is down")


@dataclass
class Seeded:
    """What :func:`seed` wrote: the slices of each core, newest last."""

    slices: dict[str, list[RollingResult]] = field(default_factory=dict)

    def slice_with(self, text: str) -> RollingResult:
        return next(
            r
            for rs in self.slices.values()
            for r in rs
            if any(text in m.content for m in r.increment_messages)
        )


def turn(question: str, answer: str) -> list[Message]:
    return [Message(role="user", content=question, name="Alice"), Message(role="assistant", content=answer)]


async def seed(database: Any) -> Seeded:
    """The memory every console test looks at (see the module)."""
    seeded = Seeded()
    indexer = RecallIndexer(database)
    rolling = RollingService(database, extractive_summarizer, RollingConfig(trigger_limit=4))
    for core_id, turns in TURNS.items():
        for question, answer in turns:
            result = await rolling.record_and_roll(core_id, turn(question, answer))
            if result is not None:
                await indexer.consume(result)
                seeded.slices.setdefault(core_id, []).append(result)
    config = RollingConfig(trigger_limit=4, summarize_attempts=1)
    failing = RollingService(database, failing_summarizer, config)
    for question, answer in [
        ("Note: the boiler is broken.", "I'll remember."),
        ("Call the plumber.", "Noted."),
    ]:
        result = await failing.record_and_roll(UNSUMMARIZED_CORE, turn(question, answer))
        if result is not None:
            seeded.slices.setdefault(UNSUMMARIZED_CORE, []).append(result)
    await database[UNITS].insert_one(unit_document(_gappy_unit()))
    async with RollingListener(
        database,
        AfterRollingRegistry([RecallIndexer(database), FailingConsumer()]),
        group=GROUP,
        poll_interval=0.01,
        max_attempts=1,
        backoff=Backoff(initial=0.001, multiplier=2.0, maximum=0.002, jitter=0.0),
    ) as listener:
        await listener.flush()
    return seeded


def _gappy_unit() -> MemoryUnit:
    """A unit another tool wrote: slices [0, 2), [3, 5) (messages 2 in none) and [4, 6) (4 in two)."""
    at = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
    messages = [
        Message(role="user" if n % 2 == 0 else "assistant", content=f"gappy message {n}") for n in range(6)
    ]
    slices = [
        MemorySlice(id="gappy-s0", start_index=0, end_index=2, summary="the first two", created_at=at),
        MemorySlice(
            id="gappy-s1",
            start_index=3,
            end_index=5,
            summary="after a gap",
            created_at=at + timedelta(minutes=1),
        ),
        MemorySlice(
            id="gappy-s2",
            start_index=4,
            end_index=6,
            summary="overlapping",
            created_at=at + timedelta(minutes=2),
        ),
    ]
    return MemoryUnit(
        id="gappy-unit",
        core_id=GAPPY_CORE,
        conversation_messages=messages,
        slices=list(slices),
        updated_at=at + timedelta(minutes=2),
        version=1,
    )


@dataclass
class Served:
    """A console served in this process: its base URL and how to stop it."""

    url: str
    stop: asyncio.Event
    task: asyncio.Task[None]


@contextlib.asynccontextmanager
async def served(database: Any, options: ConsoleOptions, **services: Any) -> AsyncIterator[Served]:
    """``console_app(database, options, ...)`` under uvicorn on a free port of ``options.host``."""
    stop = asyncio.Event()
    bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    app = console_app(database, options, **services)
    task = asyncio.create_task(serve_console(app, stop, host=options.host, port=0, on_bound=bound.set_result))
    port = await asyncio.wait_for(bound, 30)
    host = f"[{options.host}]" if ":" in options.host else options.host
    try:
        yield Served(f"http://{host}:{port}", stop, task)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)

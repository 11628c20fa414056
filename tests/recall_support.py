"""Shared builders for the recall tests: conversations rolled into slices and indexed, as a service would.

A :class:`History` records each session's messages into a core (a minute apart, at that session's day), rolls
it with :class:`~partner_repo.RollingService` (the summary is the one the session names) and hands the roll to
:class:`~partner_repo.recall.RecallIndexer`, exactly what a listener does. :func:`index_state` and
:func:`assert_counters_derive_from_slices` read the recall index back as plain data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from partner_repo import (
    Erasure,
    MemoryCoreRepository,
    Message,
    RollingResult,
    RollingService,
)
from partner_repo.mongo import RECALL_INDEX
from partner_repo.recall import Embedder, MemoryRecall, RecallIndexer, Topic, TopicExtractor, TopicRequest
from tests.erasure_support import CrashingDatabase

CONCEPTS = (
    frozenset({"puppy", "pup", "dog", "dogs", "beagle", "hound", "doggy"}),
    frozenset({"hike", "hiked", "hiking", "trail", "walk", "trek"}),
    frozenset({"bread", "sourdough", "bake", "baking", "loaf", "starter"}),
    frozenset({"whale", "whales", "ocean", "sea", "cliffs"}),
    frozenset({"travel", "trip", "journey", "vacation", "holiday"}),
    frozenset({"job", "work", "career", "office", "promotion"}),
    frozenset({"sad", "grief", "mourning", "loss", "passed", "died"}),
    frozenset({"music", "piano", "guitar", "song", "concert"}),
)
"""What :func:`concepts` takes for the same thing: each set is one dimension of its vectors."""
HASHED = 24


def concepts(texts: Sequence[str]) -> list[list[float]]:
    """A small deterministic embedder for the tests (no model): a word of one of :data:`CONCEPTS` counts
    for its concept's dimension, any other word a little for one of :data:`HASHED` dimensions of its own
    (by a stable hash), so "the dog" is near "a beagle pup" and far from "sourdough bread"."""
    vectors = []
    for text in texts:
        vector = [0.0] * (len(CONCEPTS) + HASHED)
        for word in "".join(c.lower() if c.isalnum() else " " for c in text).split():
            for index, concept in enumerate(CONCEPTS):
                if word in concept:
                    vector[index] += 1.0
                    break
            else:
                vector[len(CONCEPTS) + sum(map(ord, word)) % HASHED] += 0.2
        vectors.append(vector)
    return vectors


concepts.name = "concepts"  # type: ignore[attr-defined]


T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
"""A Friday: the first session of the conversations below."""
NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
"""When the recall tests ask (a Tuesday): "yesterday" is 30 November."""

Line = tuple[str, str]  # (role, content)


@dataclass(frozen=True)
class Session:
    day: datetime
    summary: str
    lines: tuple[Line, ...]
    names: tuple[str, ...] = ()
    """Each line's speaker ``name``, when the session names them."""


HIKE = Session(
    T0,
    "A hike on the coastal trail to the lighthouse; grey whales seen from the cliffs",
    (
        ("user", "We hiked the coastal trail to the lighthouse on Saturday"),
        ("assistant", "Did you see any whales from the cliffs?"),
        ("user", "Two grey whales, right below the lighthouse"),
        ("assistant", "What a lucky day for it"),
    ),
)
BREAD = Session(
    T0 + timedelta(days=4),  # 24 November
    "Baking sourdough bread: the starter, feeding it the night before",
    (
        ("user", "I want to bake sourdough bread this weekend"),
        ("assistant", "Is your starter ready?"),
        ("user", "Yes, my starter is called Clint"),
        ("assistant", "Feed Clint the night before you bake"),
    ),
)
TRAVEL = Session(
    T0 + timedelta(days=6),  # 26 November
    "周末去杭州旅行，西湖和高铁",  # noqa: RUF001
    (
        ("user", "周末去杭州旅行了，西湖很美"),  # noqa: RUF001
        ("assistant", "你们是坐高铁去的吗？"),  # noqa: RUF001
        ("user", "对，高铁一个小时就到了"),  # noqa: RUF001
    ),
)
PROJECT = Session(
    T0 + timedelta(days=10),  # 30 November: "yesterday" at NOW
    "讨论项目的记忆模块：中文检索和原始消息",  # noqa: RUF001
    (
        ("user", "我们今天讨论了项目的记忆模块"),
        ("assistant", "记忆模块要支持中文检索吗？"),  # noqa: RUF001
        ("user", "要，而且要能找回原始消息"),  # noqa: RUF001
        ("assistant", "好的，我先写测试"),  # noqa: RUF001
    ),
)
CONVERSATION = (HIKE, BREAD, TRAVEL, PROJECT)
"""English and Chinese sessions of one core, in the order they happened."""


@dataclass
class ScriptedSummaries:
    """The summarizer: answers the summary the session being rolled names."""

    next: str = ""

    async def __call__(self, messages: list[Message]) -> str:
        return self.next


@dataclass
class History:
    """Sessions rolled into slices of a database and indexed by :attr:`indexer` (see the module)."""

    database: Any
    topics: TopicExtractor | None = None
    embedder: Embedder | None = None
    indexer: RecallIndexer = field(init=False)
    summaries: ScriptedSummaries = field(default_factory=ScriptedSummaries)
    rolled: list[RollingResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.indexer = RecallIndexer(self.database, topics=self.topics, embedder=self.embedder)
        self._rolling = RollingService(self.database, self.summaries)
        self._cores = MemoryCoreRepository(self.database)

    def recall(self, **options: Any) -> MemoryRecall:
        """A :class:`MemoryRecall` on the same database whose "now" is :data:`NOW`."""
        return MemoryRecall(self.database, clock=lambda: NOW, **options)

    async def roll(
        self, core_id: str, session: Session, *, index: bool = True, end_session: bool = False
    ) -> RollingResult:
        """Record ``session`` into ``core_id`` and roll it into one slice (indexed unless told not to; the
        next roll goes to a new unit when ``end_session``)."""
        for minute, (role, content) in enumerate(session.lines):
            at = session.day + timedelta(minutes=minute)
            named = {"name": session.names[minute]} if session.names else {}
            message = Message.model_validate({"role": role, "content": content, **named})
            await self._cores.record(core_id, [message], at=at)
        self.summaries.next = session.summary
        now = session.day + timedelta(hours=1)
        result = await self._rolling.roll(core_id, now=now, refresh_session=end_session)
        assert result is not None
        self.rolled.append(result)
        if index:
            await self.indexer.consume(result)
        return result

    async def rolls(self, core_id: str, sessions: Sequence[Session]) -> list[RollingResult]:
        return [await self.roll(core_id, session) for session in sessions]


def session(day: datetime, summary: str, *contents: str) -> Session:
    """A session whose messages alternate between the user and the assistant."""
    roles = ("user", "assistant")
    return Session(day, summary, tuple((roles[n % 2], content) for n, content in enumerate(contents)))


def contents(messages: Sequence[Message]) -> list[str]:
    return [message.content for message in messages]


def erasure_of(results: Sequence[RollingResult], *, core_id: str) -> Erasure:
    """What a listener hands ``on_erased`` once the units of ``results`` are erased."""
    return Erasure(
        seq=0,
        erasure_id="erasure-1",
        part=0,
        core_id=core_id,
        scope="core",
        unit_ids=tuple(dict.fromkeys(result.unit_id for result in results)),
        slice_ids=tuple(result.slice_id for result in results),
        erased_at=NOW,
    )


async def index_state(
    database: Any,
) -> tuple[dict[tuple[str, str, str], Any], list[dict[str, Any]]]:
    """The recall index as plain data: its counters (``(core, "node", path)`` -> the node's slice count and
    label, ``(core, "core", "")`` -> the core's slice count and last sequence number) and every indexed slice
    (without the time it was indexed at), by slice id."""
    counters: dict[tuple[str, str, str], Any] = {}
    slices: list[dict[str, Any]] = []
    async for row in database[RECALL_INDEX].find({}):
        if row.get("kind") == "node":
            counters[(row["core_id"], "node", row["node"])] = (row["slices"], row["label"])
        elif row.get("kind") == "core":
            counters[(row["core_id"], "core", "")] = (row["slices"], row["last_seq"])
        else:
            slices.append({key: value for key, value in row.items() if key != "indexed_at"})
    return counters, sorted(slices, key=lambda row: row["slice_id"])


async def assert_counters_derive_from_slices(database: Any) -> None:
    """Every counter says what the indexed slices say: each node counts the slices under it, each core its
    slices, and no node or core is left that no slice holds (nothing of a removed text stays)."""
    counters, slices = await index_state(database)
    expected: dict[tuple[str, str, str], int] = {}
    for row in slices:
        for path in row["ancestors"]:
            expected[(row["core_id"], "node", path)] = expected.get((row["core_id"], "node", path), 0) + 1
        expected[(row["core_id"], "core", "")] = expected.get((row["core_id"], "core", ""), 0) + 1
    assert {key: value[0] for key, value in counters.items()} == expected


WRITES = frozenset(
    {"update_one", "update_many", "replace_one", "bulk_write", "delete_one", "delete_many", "insert_one"}
)
"""Every write method of a collection: a crash in the index may come at any of them."""


def crashing_index(database: Any, at: int) -> CrashingDatabase:
    """The database, except that write number ``at`` (from 1) to the recall index raises ``Crash``, as if
    the indexing process had been killed there (``calls`` counts the writes tried)."""
    return CrashingDatabase(database, frozenset({RECALL_INDEX}), WRITES, after=at)


@dataclass
class Fickle:
    """A topic extractor that answers differently each time it is asked, as an LLM may."""

    calls: int = 0

    def __call__(self, request: TopicRequest) -> Topic:
        self.calls += 1
        return Topic(path=f"guess {self.calls}->detail {self.calls}", related=(f"related {self.calls}",))


# -- a paraphrase: what only the vector channel finds ------------------------------------------------------

PUPPY = session(
    T0,
    "A new family member",
    "We adopted a beagle pup from the shelter",
    "What a lucky little hound",
    "He sleeps on my bed already",
    "That is the way it starts",
)
OTHERS = [
    session(T0.replace(day=21 + n), f"Chat {n}", f"Talked about the weather on day {n}", "Grey and cold")
    for n in range(4)
]
ASKED = "How is the dog doing?"
"""No word of it is a word of the puppy's session ("dog" is not said there): only a vector finds it."""

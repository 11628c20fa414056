"""Section 7: recall on LoCoMo (Maharana et al., ACL 2024): evidence recall at 20 and 60 returned messages.

Each conversation goes through the public API as a service would record it: one core per conversation,
each session's turns recorded with ``RollingService.record_and_roll`` at that session's date (30 s apart;
``speaker_a`` as the user, ``speaker_b`` as the assistant, each message named after its speaker, a shared
photo's caption appended as ``" [shares a photo: ...]"``, the turn's ``dia_id`` in the message's metadata,
read for scoring only) with the ``ExtractiveSummarizer`` and ``trigger_limit`` 36; an idle roll at each
session gap (``maybe_roll`` when the idle scheduler would run: ``idle_after`` plus ``check_interval`` after
the session's last turn, which also starts a new memory session) and a final roll (the idle roll after the
last session); every roll's result goes to ``RecallIndexer.consume``. Then every question of categories 1-4
that names evidence is asked, a day after the final roll: ``MemoryRecall.recall(core, question,
limit=10, max_messages=budget)`` for budgets 20 and 60. **Evidence recall** is the share of a question's
evidence turns among the returned messages, averaged by category and overall.

The baselines (:mod:`benchmarks.recall_baselines`) are measured in the same run, on the same turn texts and
with the same tokenizer: recency, BM25 over single turns, BM25 over 12-turn windows. Targets (issue 23):
recall at least 0.70 at 20 messages and 0.85 at 60.

Evidence recall is quality, not speed: it is measured in memory, each conversation in a fresh in-memory
database (mongomock scans whole collections, so a database per conversation keeps every scan to one
conversation's index), and nothing is timed there. How long ingesting and recalling take is measured on the
server (``--uri``, ``MONGODB_URI``, or the SecantusDB ``python -m benchmarks`` starts), on the first
``locomo_server_conversations`` conversations, each in a fresh database dropped afterwards: the same ingest
and questions, timed (ingest per turn, recall p50/p95). The quick scale asks a few questions of one
conversation; without the data (:mod:`benchmarks.locomo_data`) it runs on a tiny synthetic conversation
instead and says so: every path runs, its figures mean nothing and no target is judged.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from benchmarks.backends import describe, memory_database, mongodb_uri, motor_database
from benchmarks.common import Row, Scale, SectionResult, percentile
from benchmarks.locomo_data import CATEGORIES, CITATION, Conversation, data_path, files, load, synthetic
from benchmarks.recall_baselines import baselines
from partner_repo import ExtractiveSummarizer, RollingConfig, RollingResult, RollingService
from partner_repo.recall import MemoryRecall, RecallIndexer

BUDGETS = (20, 60)
TARGETS = {20: 0.70, 60: 0.85}
LIMIT = 10
"""Slices per recall (``limit``)."""
TRIGGER_LIMIT = 36
ASKED_AFTER = timedelta(days=1)
RECALL = "partner-repo recall"


@dataclass
class Clock:
    now: datetime

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Scores:
    """Evidence recall of each question: ``method -> budget -> category -> [recall]``."""

    values: dict[str, dict[int, dict[int, list[float]]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    )

    def add(
        self, method: str, budget: int, category: int, evidence: tuple[str, ...], found: set[str]
    ) -> None:
        self.values[method][budget][category].append(sum(e in found for e in evidence) / len(evidence))

    def mean(self, method: str, budget: int, category: int | None = None) -> float:
        chosen = self._chosen(method, budget, category)
        return sum(chosen) / len(chosen) if chosen else 0.0

    def count(self, method: str, budget: int, category: int | None = None) -> int:
        return len(self._chosen(method, budget, category))

    def _chosen(self, method: str, budget: int, category: int | None) -> list[float]:
        by_category = self.values[method][budget]
        if category is not None:
            return list(by_category.get(category, []))
        return [value for values in by_category.values() for value in values]

    def methods(self) -> list[str]:
        return list(self.values)


@dataclass
class Run:
    """What the section measured across conversations."""

    scores: Scores = field(default_factory=Scores)
    latencies_ms: list[float] = field(default_factory=list)
    conversations: list[dict[str, Any]] = field(default_factory=list)


async def run(scale: Scale) -> list[SectionResult]:
    path = data_path()
    found = files(path)
    quick = scale.name == "quick"
    if found:
        chosen = found[: scale.locomo_conversations] if scale.locomo_conversations else found
        conversations = [load(file) for file in chosen]
        source = f"LoCoMo at {path} ({len(chosen)} of {len(found)} conversations)"
    else:
        if not quick:
            return [_absent(path)]
        conversations = [synthetic()]
        source = f"a tiny synthetic conversation (no LoCoMo data at {path})"
    measured = Run()
    started = time.perf_counter()
    for conversation in conversations:
        async with _database(None) as database:
            measured.conversations.append(
                await _conversation(database, conversation, measured, scale.locomo_questions)
            )
    seconds = time.perf_counter() - started
    backend = describe("memory") + ", a fresh database per conversation"
    results = [_result(measured, backend, source, quick, bool(found), seconds)]
    uri = mongodb_uri()
    if uri is not None:
        timed = Run()
        for conversation in conversations[: scale.locomo_server_conversations or None]:
            async with _database(uri) as database:
                timed.conversations.append(
                    await _conversation(database, conversation, timed, scale.locomo_questions)
                )
        results.append(_timed(timed, describe("mongodb", uri) + ", a fresh database per conversation"))
    return results


@asynccontextmanager
async def _database(uri: str | None) -> AsyncIterator[Any]:
    if uri is None:
        async with memory_database() as database:
            yield database
            await database.client.drop_database(database.name)
    else:
        async with motor_database(uri) as database:
            yield database


async def _conversation(
    database: Any, conversation: Conversation, measured: Run, questions: int
) -> dict[str, Any]:
    core_id = f"locomo-{conversation.name}"
    started = time.perf_counter()
    clock, rolls = await ingest(database, conversation, core_id)
    ingest_s = time.perf_counter() - started
    clock.now += ASKED_AFTER
    recall = MemoryRecall(database, clock=clock)
    others = baselines(conversation)
    asked = _sample(list(conversation.questions), questions)
    started = time.perf_counter()
    for question in asked:
        for budget in BUDGETS:
            began = time.perf_counter()
            got = await recall.recall(core_id, question.question, limit=LIMIT, max_messages=budget)
            measured.latencies_ms.append((time.perf_counter() - began) * 1000)
            ids = [str((m.metadata or {}).get("dia_id")) for s in got for m in s.messages]
            if len(ids) > budget:
                raise AssertionError(f"recall returned {len(ids)} messages for a budget of {budget}")
            measured.scores.add(RECALL, budget, question.category, question.evidence, set(ids))
            for name, baseline in others.items():
                measured.scores.add(
                    name,
                    budget,
                    question.category,
                    question.evidence,
                    set(baseline(question.question, budget)),
                )
    return {
        "name": conversation.name,
        "sessions": len(conversation.sessions),
        "turns": len(conversation.turns),
        "questions": len(asked),
        "rolls": rolls,
        "slices": sum(rolls.values()),
        "ingest_seconds": ingest_s,
        "questions_seconds": time.perf_counter() - started,
    }


async def ingest(database: Any, conversation: Conversation, core_id: str) -> tuple[Clock, dict[str, int]]:
    """Record the conversation through ``RollingService`` and index every roll; the clock (at the final
    roll) and how many rolls of each kind stored a slice: ``count`` (36 messages), ``idle`` (at a session
    gap) and ``final`` (the idle roll after the last session: it stores everything not yet stored; a forced
    ``roll`` after it would only store again the context it kept, in a new session's unit)."""
    config = RollingConfig(trigger_limit=TRIGGER_LIMIT)
    first = conversation.sessions[0][0].at
    clock = Clock(first)
    roller = RollingService(database, ExtractiveSummarizer(), config, clock=clock)
    indexer = RecallIndexer(database)
    rolls = {"count": 0, "idle": 0, "final": 0}

    async def indexed(kind: str, rolling: Awaitable[RollingResult | None]) -> None:
        result = await rolling
        if result is not None:
            rolls[kind] += 1
            await indexer.consume(result)

    last: datetime | None = None
    for session in conversation.sessions:
        if last is not None and last + config.idle_after + config.check_interval < session[0].at:
            clock.now = last + config.idle_after + config.check_interval
            await indexed("idle", roller.maybe_roll(core_id, clock.now))
        for turn in session:
            clock.now = last = turn.at
            await indexed("count", roller.record_and_roll(core_id, [turn.message], at=turn.at))
    assert last is not None
    clock.now = last + config.idle_after + config.check_interval
    await indexed("final", roller.maybe_roll(core_id, clock.now))
    return clock, rolls


def _sample(questions: list[Any], count: int) -> list[Any]:
    """Every question (``count`` 0), or ``count`` of them spread over the conversation."""
    if not count or count >= len(questions):
        return questions
    step = len(questions) / count
    return [questions[int(index * step)] for index in range(count)]


def _result(
    measured: Run, backend: str, source: str, quick: bool, real: bool, seconds: float
) -> SectionResult:
    scores = measured.scores
    result = SectionResult(key="recall-locomo", title="7. Recall on LoCoMo: evidence recall", backend=backend)
    judged = real and not quick
    for method in scores.methods():
        for budget in BUDGETS:
            mean = scores.mean(method, budget)
            ours = method == RECALL
            result.rows.append(
                Row(
                    f"evidence recall at {budget} messages: {method}"
                    + (f" (limit {LIMIT} slices)" if ours else ""),
                    f"{mean:.3f} ("
                    + ", ".join(
                        f"{name} {scores.mean(method, budget, number):.3f}"
                        for number, name in CATEGORIES.items()
                        if scores.count(method, budget, number)
                    )
                    + ")",
                    f">= {TARGETS[budget]:.2f}" if ours else "",
                    (mean >= TARGETS[budget]) if ours and judged else None,
                )
            )
    conversations = measured.conversations
    turns = sum(c["turns"] for c in conversations)
    rolls = {kind: sum(c["rolls"][kind] for c in conversations) for kind in ("count", "idle", "final")}
    result.rows.append(
        Row(
            "data",
            f"{len(conversations)} conversations, {turns:,} turns in "
            f"{sum(c['sessions'] for c in conversations)} sessions, "
            f"{scores.count(RECALL, BUDGETS[0]):,} questions; {sum(rolls.values()):,} slices "
            f"({rolls['count']} count rolls, {rolls['idle']} idle rolls at session gaps, "
            f"{rolls['final']} final)",
        )
    )
    result.raw = {
        "source": source,
        "citation": CITATION,
        "budgets": list(BUDGETS),
        "limit": LIMIT,
        "targets": {str(budget): target for budget, target in TARGETS.items()},
        "judged": judged,
        "categories": {str(number): name for number, name in CATEGORIES.items()},
        "recall": {
            method: {
                str(budget): {
                    "all": scores.mean(method, budget),
                    "n": scores.count(method, budget),
                    **{
                        name: {"mean": scores.mean(method, budget, n), "n": scores.count(method, budget, n)}
                        for n, name in CATEGORIES.items()
                    },
                }
                for budget in BUDGETS
            }
            for method in scores.methods()
        },
        "conversations": _counted(conversations),
        "seconds": seconds,
    }
    result.notes.append(f"LoCoMo ({CITATION}), read from {source}, never copied")
    if not real:
        result.notes.append(
            "synthetic stand-in for the LoCoMo data: every path runs, the figures mean nothing"
        )
    elif quick:
        result.notes.append("quick scale: a few questions of one conversation, targets not judged")
    return result


def _counted(conversations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What each conversation was, its timings left out (nothing is timed in memory)."""
    return [{key: value for key, value in c.items() if not key.endswith("_seconds")} for c in conversations]


def _timed(measured: Run, backend: str) -> SectionResult:
    """On the server: how long ingesting and recalling took (the evidence recall is the in-memory row's)."""
    result = SectionResult(
        key="recall-locomo", title="7. Recall on LoCoMo: ingest and recall latency", backend=backend
    )
    conversations = measured.conversations
    turns = sum(c["turns"] for c in conversations)
    ingest_s = sum(c["ingest_seconds"] for c in conversations)
    latencies = measured.latencies_ms
    names = ", ".join(c["name"] for c in conversations)
    result.rows += [
        Row(
            f"ingest (record_and_roll + RecallIndexer.consume), per turn, conversation {names}",
            f"{ingest_s / max(turns, 1) * 1000:.1f} ms per turn ({turns:,} turns)",
        ),
        Row(
            f"recall latency p50 / p95 (limit {LIMIT}, max_messages {' and '.join(map(str, BUDGETS))})",
            f"p50 {percentile(latencies, 0.5):.1f} ms, p95 {percentile(latencies, 0.95):.1f} ms "
            f"({len(latencies):,} recalls)",
        ),
    ]
    result.raw = {
        "recall_latency_ms": {
            "p50": percentile(latencies, 0.5),
            "p95": percentile(latencies, 0.95),
            "mean": statistics.fmean(latencies),
            "n": len(latencies),
        },
        "conversations": conversations,
    }
    return result


def _absent(path: Any) -> SectionResult:
    result = SectionResult(
        key="recall-locomo", title="7. Recall on LoCoMo: evidence recall", backend=describe("memory")
    )
    for budget in BUDGETS:
        result.rows.append(
            Row(
                f"evidence recall at {budget} messages: {RECALL}",
                f"not measured: no LoCoMo data at {path} (give --locomo PATH or PARTNER_REPO_LOCOMO)",
                f">= {TARGETS[budget]:.2f}",
                False,
            )
        )
    return result

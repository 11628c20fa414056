"""The vector channel: with an embedder, recall finds the slices nearest to the query among all of a core's
slices (a paraphrase no word of the query matches), and weighs each message by its own vector; vectors carry
the embedder that made them, and a recall or an index write with another one is refused."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from partner_repo import EmbedderMismatch
from partner_repo.mongo import RECALL_INDEX
from partner_repo.recall import MemoryRecall, RecallIndexer
from tests.recall_support import ASKED, NOW, OTHERS, PUPPY, T0, History, Session, concepts, session


def renamed(name: str, dimensions: int | None = None) -> Any:
    """:func:`concepts` under another name (and, when given, another dimension)."""

    def embedder(texts: Sequence[str]) -> list[list[float]]:
        vectors = concepts(texts)
        return [vector[:dimensions] for vector in vectors] if dimensions else vectors

    embedder.name = name  # type: ignore[attr-defined]
    return embedder


@pytest.fixture
async def history(database: Any) -> History:
    """The puppy's session, then four newer ones about the weather, indexed with :func:`concepts`."""
    history = History(database, embedder=concepts)
    await history.rolls("agent", [PUPPY, *OTHERS])
    return history


async def test_the_vector_channel_finds_a_slice_no_word_of_the_query_names(history: History) -> None:
    without = await history.recall().recall("agent", ASKED, limit=1)
    [found] = await history.recall(embedder=concepts).recall("agent", ASKED, limit=1)

    assert without[0].slice_id != history.rolled[0].slice_id  # the newest answer a query naming nothing
    assert found.slice_id == history.rolled[0].slice_id and "vector" in found.sources


async def test_the_message_nearest_the_query_is_chosen_within_the_budget(database: Any) -> None:
    history = History(database, embedder=concepts)
    errands = session(
        T0,
        "Errands",
        "I went to the market",
        "Did you buy apples?",
        "Our beagle chased a cat",
        "Then it rained",
    )
    await history.rolls("agent", [errands])

    [found] = await history.recall(embedder=concepts).recall("agent", ASKED, max_messages=1)

    assert [message.content for message in found.messages] == ["Our beagle chased a cat"]


async def test_the_core_records_the_embedder_its_vectors_are_of(history: History) -> None:
    core = await history.database[RECALL_INDEX].find_one({"core_id": "agent", "kind": "core"})

    assert core is not None and core["embedder"]["name"] == "concepts"
    assert core["embedder"]["dimensions"] == len(concepts(["x"])[0])


async def test_a_recall_with_another_embedder_is_refused_naming_both(history: History) -> None:
    recall = MemoryRecall(history.database, clock=lambda: NOW, embedder=renamed("another-model", 12))

    with pytest.raises(EmbedderMismatch) as refused:
        await recall.recall("agent", ASKED)

    assert "'concepts' (32 dimensions)" in str(refused.value)
    assert "'another-model' (12 dimensions)" in str(refused.value)


async def test_an_index_write_with_another_embedder_is_refused_and_writes_nothing(history: History) -> None:
    before = await history.database[RECALL_INDEX].count_documents({})
    result = await history.roll("agent", OTHERS[0], index=False)

    with pytest.raises(EmbedderMismatch):
        await RecallIndexer(history.database, embedder=renamed("another-model")).consume(result)

    assert await history.database[RECALL_INDEX].count_documents({}) == before


async def test_a_recall_without_an_embedder_reads_no_vector(history: History) -> None:
    found = await history.recall().recall("agent", "the beagle pup from the shelter")

    assert found[0].slice_id == history.rolled[0].slice_id and "vector" not in found[0].sources


async def test_a_slice_indexed_without_vectors_is_not_found_by_vectors(database: Any) -> None:
    history = History(database)
    await history.rolls("agent", [PUPPY, *OTHERS])

    found = await history.recall(embedder=concepts).recall("agent", ASKED)

    assert all("vector" not in piece.sources for piece in found)


def sea_or_caroline(texts: Sequence[str]) -> list[list[float]]:
    """Two dimensions: "Caroline" said, the sea spoken of."""
    return [[float("caroline" in text.lower()), float("sea" in text or "ocean" in text)] for text in texts]


sea_or_caroline.name = "sea-or-caroline"  # type: ignore[attr-defined]


def chat(day: Any, *lines: tuple[str, str]) -> Session:
    """A session between Caroline (the user) and Melanie: ``(name, content)`` lines."""
    roles = {"Caroline": "user", "Melanie": "assistant"}
    return Session(
        day, "a chat", tuple((roles[name], content) for name, content in lines), tuple(n for n, _ in lines)
    )


SEA = chat(T0, ("Caroline", "I saw it at the sea"), ("Melanie", "the sea is calm today"), ("Caroline", "ok"))
"""Caroline's message has her name and the sea; Melanie's only the sea."""


async def nearest_message(history: History, *sessions: Session) -> list[str]:
    """The one message recall chooses for a question naming Caroline, with ``sessions`` after :data:`SEA`."""
    await history.rolls("agent", [SEA, *sessions])
    [found] = await history.recall(embedder=sea_or_caroline).recall(
        "agent", "What did Caroline say about the ocean?", limit=1, max_messages=1
    )
    return [message.content for message in found.messages]


async def test_a_query_meets_the_vectors_without_the_name_of_a_speaker_of_every_slice(database: Any) -> None:
    """Every slice is a chat with Caroline: her name in the query says only who talks, and the message
    about the sea that Melanie wrote is nearer than Caroline's own that merely has her name."""
    hello = chat(T0 + timedelta(days=1), ("Caroline", "hello"), ("Melanie", "hi"))

    chosen = await nearest_message(History(database, embedder=sea_or_caroline), hello)

    assert chosen == ["the sea is calm today"]


async def test_a_name_only_some_slices_say_stays_in_the_querys_vector(database: Any) -> None:
    others = [session(T0 + timedelta(days=n), "other", "nothing", "much") for n in range(1, 4)]

    chosen = await nearest_message(History(database, embedder=sea_or_caroline), *others)

    assert chosen == ["I saw it at the sea"]

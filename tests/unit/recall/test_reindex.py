"""``RecallIndexer.reindex``: the vectors of slices already indexed, batched and resumable, fenced by each
slice's revision (a delivery beside it writes its own, once), and never for a slice erased meanwhile."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from partner_repo import InvalidInput, MemoryEraser, RollingResult
from partner_repo.mongo import RECALL_INDEX
from partner_repo.recall import RecallIndexer, ReindexReport
from tests.recall_support import CONVERSATION, History, concepts, index_state

ASKED = "the beagle"


class Counting:
    """:func:`concepts`, counting each text it embeds; ``before_call`` runs first at the call numbered
    ``at`` (from 1), standing in for what happens while a model thinks."""

    name = "concepts"

    def __init__(self, at: int = 0, before_call: Callable[[], Awaitable[None]] | None = None) -> None:
        self.texts: Counter[str] = Counter()
        self.calls = 0
        self._at = at
        self._before_call = before_call

    async def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls == self._at and self._before_call is not None:
            await self._before_call()
        self.texts.update(texts)
        return concepts(texts)


async def vectors_of(database: Any, core_id: str = "agent") -> dict[str, str | None]:
    """Each slice of ``core_id`` with the tag of its vectors (None: none)."""
    _, slices = await index_state(database)
    return {row["slice_id"]: row.get("vtag") for row in slices if row["core_id"] == core_id}


@pytest.fixture
async def history(database: Any) -> History:
    """The four sessions of core ``agent``, indexed without an embedder."""
    history = History(database)
    await history.rolls("agent", CONVERSATION)
    return history


async def test_reindex_gives_vectors_to_slices_indexed_without_them(history: History) -> None:
    report = await RecallIndexer(history.database, embedder=concepts).reindex("agent")

    assert (report.slices, report.embedded, report.skipped) == (4, 4, 0)
    assert len(set((await vectors_of(history.database)).values()) - {None}) == 1
    [found, *_] = await history.recall(embedder=concepts).recall("agent", "whales seen from the sea")
    assert "vector" in found.sources


async def test_reindex_run_again_embeds_nothing_twice(history: History) -> None:
    embedder = Counting()
    indexer = RecallIndexer(history.database, embedder=embedder)
    await indexer.reindex("agent")

    again = await indexer.reindex("agent")

    assert (again.embedded, again.skipped) == (0, 4)
    assert max(count for text, count in embedder.texts.items() if text != "partner-repo") == 1


async def test_an_interrupted_reindex_says_where_it_stopped_and_a_second_run_finishes(
    history: History,
) -> None:
    async def outage() -> None:
        raise RuntimeError("the embedder is down")

    first = Counting(at=4, before_call=outage)  # call 1 learns the dimension, calls 2 and 3 a slice each
    report = ReindexReport()

    with pytest.raises(RuntimeError, match="down"):
        await RecallIndexer(history.database, embedder=first).reindex("agent", page=1, report=report)

    assert report.embedded == 2 and report.where() == "core 'agent' after slice number 2"
    second = Counting()
    finished = await RecallIndexer(history.database, embedder=second).reindex("agent", page=1)
    assert (finished.embedded, finished.skipped) == (2, 2)
    assert all(tag is not None for tag in (await vectors_of(history.database)).values())
    embedded_twice = set(first.texts) & set(second.texts) - {"partner-repo"}
    assert not embedded_twice


async def test_a_delivery_beside_a_reindex_writes_its_revision_s_vectors_and_the_reindex_leaves_them(
    history: History,
) -> None:
    listener = RecallIndexer(history.database, embedder=concepts)
    newer = revised(history.rolled[0], "A walk on the coast, whales from the cliffs")

    async def delivered_meanwhile() -> None:
        await listener.consume(newer)  # a re-summarized slice, delivered while the reindex embeds it

    report = await RecallIndexer(
        history.database, embedder=Counting(at=2, before_call=delivered_meanwhile)
    ).reindex("agent", page=1)

    assert (report.embedded, report.changed) == (3, 1)
    stored = await history.database[RECALL_INDEX].find_one({"slice_id": newer.slice_id})
    assert stored is not None and (stored["revision"], stored["summary"]) == (1, newer.summary)
    assert stored["vtag"] is not None


async def test_forget_during_a_reindex_leaves_no_vector_of_the_erased_core(history: History) -> None:
    await history.rolls("other", CONVERSATION[:1])

    async def forgotten_meanwhile() -> None:
        await MemoryEraser(history.database).forget("agent")

    await RecallIndexer(history.database, embedder=Counting(at=3, before_call=forgotten_meanwhile)).reindex(
        page=1
    )

    left = await history.database[RECALL_INDEX].count_documents({"core_id": "agent"})
    assert left == 0
    assert await history.recall(embedder=concepts).recall("agent", "whales") == []


async def test_reindex_with_another_embedder_replaces_the_vectors_and_the_core_names_it(
    history: History,
) -> None:
    await RecallIndexer(history.database, embedder=concepts).reindex("agent")
    other = Counting()
    other.name = "concepts-v2"

    report = await RecallIndexer(history.database, embedder=other).reindex("agent")

    assert report.embedded == 4 and report.replaced == {"agent": "'concepts' (32 dimensions)"}
    core = await history.database[RECALL_INDEX].find_one({"core_id": "agent", "kind": "core"})
    assert core is not None and core["embedder"]["name"] == "concepts-v2"


async def test_reindex_without_an_embedder_is_refused(history: History) -> None:
    with pytest.raises(InvalidInput, match="needs an embedder"):
        await RecallIndexer(history.database).reindex("agent")


def revised(result: RollingResult, summary: str) -> RollingResult:
    """The delivery of ``result``'s slice once its summary was replaced (what ``resummarize`` leads to)."""
    piece = result.memory_slice.model_copy(update={"summary": summary, "revision": result.revision + 1})
    return RollingResult.from_slice(result.unit_id, result.core_id, piece, result.increment_messages)

"""``RecallIndexer``, the AfterRolling consumer that builds the recall index: idempotent under at-least-once
delivery (a redelivery, or a delivery after a crash, leaves the index one delivery leaves), newest revision
wins, erasure removes everything derived from the erased units, and the topic extractor is pluggable.

The index's counters (each core's slices, each topic node's) must say what the indexed slices say after
every step (:func:`assert_counters_derive_from_slices`); a write stopped half-way may leave them low, never
high, and the index check sets them again.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from partner_repo import InvalidInput, Message, RollingConfig, RollingResult, RollingService
from partner_repo.mongo import RECALL_INDEX, driver
from partner_repo.recall import (
    MemoryRecall,
    RecallIndexCheck,
    RecallIndexer,
    Topic,
    TopicNode,
    TopicProfile,
    TopicRequest,
)
from partner_repo.rolling import extractive_summarizer
from tests.erasure_support import Crash
from tests.recall_support import (
    BREAD,
    CONVERSATION,
    HIKE,
    PROJECT,
    T0,
    TRAVEL,
    Fickle,
    History,
    assert_counters_derive_from_slices,
    contents,
    crashing_index,
    erasure_of,
    index_state,
    session,
)

SHORT = session(T0 + timedelta(days=3), "bread", "sourdough starter", "Clint the starter")


def revised(result: RollingResult, summary: str, revision: int = 1) -> RollingResult:
    """The delivery of ``result``'s slice once its summary was replaced (what ``resummarize`` leads to)."""
    piece = result.memory_slice.model_copy(update={"summary": summary, "revision": revision})
    return RollingResult.from_slice(result.unit_id, result.core_id, piece, result.increment_messages)


async def test_every_slice_is_indexed_once_with_counters_that_count_it_once(memory_db: Any) -> None:
    history = History(memory_db)
    await history.rolls("agent", CONVERSATION)

    counters, slices = await index_state(memory_db)
    assert [row["slice_id"] for row in slices] == sorted(r.slice_id for r in history.rolled)
    assert counters[("agent", "core", "")] == (4, 4)  # four slices, the last one numbered 4
    assert sorted(row["seq"] for row in slices) == [1, 2, 3, 4]
    await assert_counters_derive_from_slices(memory_db)


async def test_no_document_of_the_index_holds_a_list_of_slices(memory_db: Any) -> None:
    """What made 0.4's vocabulary grow with the history: a document per term listing every slice."""
    history = History(memory_db)
    await history.rolls("agent", CONVERSATION)

    async for row in memory_db[RECALL_INDEX].find({"kind": {"$ne": "slice"}}):
        assert not any(isinstance(value, list) and len(value) > 8 for value in row.values()), row


async def test_a_slice_is_found_by_the_words_of_its_raw_messages_not_only_its_summary(memory_db: Any) -> None:
    history = History(memory_db)
    await history.rolls("agent", [HIKE, BREAD])

    [found] = await history.recall().recall("agent", "Clint", limit=1)  # only a message names the starter

    assert found.summary == BREAD.summary and "Clint" in " ".join(contents(found.messages))


async def test_redelivering_a_roll_later_leaves_the_index_as_it_was(memory_db: Any) -> None:
    history = History(memory_db)
    first, *_ = await history.rolls("agent", CONVERSATION)
    before = await index_state(memory_db)

    await history.indexer.consume(first)  # delivered again, after three more slices were indexed
    await history.indexer.consume(first)

    assert await index_state(memory_db) == before


async def test_redelivery_neither_asks_the_extractor_again_nor_changes_anything(memory_db: Any) -> None:
    extractor = Fickle()
    history = History(memory_db, topics=extractor)
    first, *_ = await history.rolls("agent", [HIKE, BREAD])
    before, asked = await index_state(memory_db), extractor.calls

    await history.indexer.consume(first)

    assert await index_state(memory_db) == before and extractor.calls == asked


async def test_two_deliveries_of_one_slice_at_once_index_it_once(memory_db: Any) -> None:
    """Both read the slice as absent; the second write finds it written and writes nothing, not even a
    counter (the slice's document is the fence of the whole write)."""
    history = History(memory_db)
    await history.rolls("agent", [HIKE])
    result = await history.roll("agent", SHORT, index=False)
    other = RecallIndexer(memory_db)
    stored = await other._store.stored(result.core_id, result.unit_id, result.slice_id)
    document, labels, _ = await other._document(result, stored)

    await history.indexer.consume(result)
    assert not await other._store.put(document, stored, labels)

    await assert_counters_derive_from_slices(memory_db)


async def first_delivery(history: History) -> RollingResult:
    await history.rolls("agent", [HIKE])
    return await history.roll("agent", SHORT, index=False)


async def new_revision(history: History) -> RollingResult:
    [result] = await history.rolls("agent", [SHORT])
    return revised(result, "a loaf of rye with caraway")


@pytest.mark.parametrize("deliver", [first_delivery, new_revision], ids=["first delivery", "new revision"])
async def test_a_delivery_after_a_crash_at_its_write_leaves_the_index_one_delivery_leaves(
    memory_db: Any, deliver: Any
) -> None:
    """The indexer dies at its one write (with an extractor that answers differently each time, as an LLM
    may), and the listener delivers the roll again: the new delivery asks again and writes what it gets."""
    extractor = Fickle()
    history = History(memory_db, topics=extractor)
    result = await deliver(history)
    crashing = crashing_index(memory_db, at=1)
    with pytest.raises(Crash):
        await RecallIndexer(crashing, topics=extractor).consume(result)
    assert len(crashing.calls) == 1  # stopped at its first write: the slice's own document

    await history.indexer.consume(result)  # the listener delivers it again

    await assert_counters_derive_from_slices(memory_db)
    _, slices = await index_state(memory_db)
    [indexed] = [row for row in slices if row["slice_id"] == result.slice_id]
    assert (indexed["summary"], indexed["revision"]) == (result.summary, result.revision)
    [found] = await history.recall().recall("agent", result.summary, limit=1)
    assert found.slice_id == result.slice_id


def stopping_after(applied: int) -> Any:
    """``driver.bulk_write`` as a server that stopped half-way through an ordered batch: the first
    ``applied`` operations are applied, then the connection is gone."""
    real = driver.bulk_write

    async def stopping(collection: Any, requests: list[Any], *, ordered: bool = True) -> Any:
        await real(collection, requests[:applied], ordered=ordered)
        raise Crash(f"the server stopped after {applied} operation(s)")

    return stopping


@pytest.mark.parametrize("deliver", [first_delivery, new_revision], ids=["first delivery", "new revision"])
async def test_a_write_stopped_half_way_leaves_counters_low_and_the_check_sets_them(
    memory_db: Any, deliver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = History(memory_db)
    result = await deliver(history)
    applied = 1
    while True:
        _, slices = await index_state(memory_db)
        with monkeypatch.context() as patched, pytest.raises(Crash):
            patched.setattr(driver, "bulk_write", stopping_after(applied))
            await RecallIndexer(memory_db).consume(result)
        stopped = await index_state(memory_db)
        if stopped[1] != slices:  # the slice's document went in: what follows it is the counters
            break
        applied += 1
    await history.indexer.consume(result)  # delivered again: the revision is indexed, nothing moves
    _, now = await index_state(memory_db)
    [indexed] = [row for row in now if row["slice_id"] == result.slice_id]
    assert indexed["revision"] == result.revision

    [report] = await RecallIndexCheck(memory_db).check("agent")
    assert not report.ok and all(off.recorded is None or off.recorded < off.counted for off in report.nodes)
    await RecallIndexCheck(memory_db).repair("agent")

    assert all(found.ok for found in await RecallIndexCheck(memory_db).check("agent"))
    await assert_counters_derive_from_slices(memory_db)


async def test_an_older_revision_delivered_after_a_newer_one_is_ignored(memory_db: Any) -> None:
    history = History(memory_db)
    [first] = await history.rolls("agent", [BREAD])
    await history.indexer.consume(revised(first, "a loaf of rye with caraway"))
    before = await index_state(memory_db)

    await history.indexer.consume(first)  # revision 0, late

    assert await index_state(memory_db) == before
    [found] = await history.recall().recall("agent", "rye caraway")
    assert found.summary == "a loaf of rye with caraway"


async def test_a_resummarized_slice_is_indexed_again_under_its_new_summary(memory_db: Any) -> None:
    history = History(memory_db)
    [first, _] = await history.rolls("agent", [BREAD, HIKE])

    await history.indexer.consume(revised(first, "a loaf of rye with caraway"))

    recall = history.recall()
    [found] = await recall.recall("agent", "caraway")
    assert found.slice_id == first.slice_id and found.summary == "a loaf of rye with caraway"
    assert contents(found.messages) == [content for _, content in BREAD.lines]
    [by_message, *_] = await recall.recall("agent", "Clint")  # its messages still count
    assert by_message.slice_id == first.slice_id
    _, slices = await index_state(memory_db)
    assert [row["seq"] for row in slices if row["slice_id"] == first.slice_id] == [1]  # its number stays
    await assert_counters_derive_from_slices(memory_db)


async def test_a_term_only_the_old_summary_had_no_longer_counts(memory_db: Any) -> None:
    history = History(memory_db, topics=lambda request: Topic(path=request.summary.split()[1]))
    [first] = await history.rolls("agent", [session(T0, "the zeppelin plan", "we talked", "about bread")])

    await history.indexer.consume(revised(first, "bread talk"))

    counters, slices = await index_state(memory_db)
    assert not any("zeppelin" in path for _, _, path in counters)  # its topic node went with it
    assert not any("zeppelin" in row["terms"] for row in slices)
    found = await history.recall().recall("agent", "zeppelin")
    assert [piece.sources for piece in found] == [("recent",)]  # named by nothing: only as the newest slice
    await assert_counters_derive_from_slices(memory_db)


async def test_on_erased_removes_the_erased_units_slices_and_every_count_of_them(memory_db: Any) -> None:
    history = History(memory_db)
    erased = await history.rolls("agent", [HIKE, PROJECT])
    kept = await history.rolls("other", [BREAD])

    await history.indexer.on_erased(erasure_of(erased, core_id="agent"))

    counters, slices = await index_state(memory_db)
    assert [row["slice_id"] for row in slices] == [kept[0].slice_id]
    assert {core for core, _, _ in counters} == {"other"}  # not a node of the erased slices is left
    await assert_counters_derive_from_slices(memory_db)
    [found] = await history.recall().recall("other", "sourdough")
    assert found.slice_id == kept[0].slice_id


async def test_on_erased_keeps_the_nodes_other_slices_still_hold(memory_db: Any) -> None:
    history = History(memory_db, topics=lambda request: Topic(path="coast->" + request.summary.split()[0]))
    erased = await history.roll("agent", HIKE, end_session=True)
    again = session(T0 + timedelta(days=2), "lighthouse again", "the lighthouse", "yes")
    kept = await history.roll("agent", again)
    assert kept.unit_id != erased.unit_id

    await history.indexer.on_erased(erasure_of([erased], core_id="agent"))

    counters, _ = await index_state(memory_db)
    assert counters[("agent", "node", "coast")] == (1, "coast")
    assert ("agent", "node", "coast->A") not in counters  # the erased slice's own node is gone
    await assert_counters_derive_from_slices(memory_db)


async def test_on_erased_again_or_for_units_never_indexed_changes_nothing(memory_db: Any) -> None:
    history = History(memory_db)
    erased = await history.rolls("agent", [HIKE])
    await history.rolls("other", [BREAD])
    await history.indexer.on_erased(erasure_of(erased, core_id="agent"))
    after = await index_state(memory_db)

    await history.indexer.on_erased(erasure_of(erased, core_id="agent"))
    await history.indexer.on_erased(erasure_of([], core_id="nobody"))

    assert await index_state(memory_db) == after


async def test_a_custom_topic_extractor_places_each_slice_in_the_tree(memory_db: Any) -> None:
    def by_language(request: TopicRequest) -> Topic:
        chinese = any("\u4e00" <= char <= "\u9fff" for char in request.summary)
        return Topic(path="聊天->中文" if chinese else "chat->english", profile=TopicProfile(activation=0.9))

    history = History(memory_db, topics=by_language)
    await history.rolls("agent", CONVERSATION)

    assert await history.recall().topics("agent") == [
        TopicNode("chat", 2),
        TopicNode("chat->english", 2),
        TopicNode("聊天", 2),
        TopicNode("聊天->中文", 2),
    ]


async def test_an_async_topic_extractor_is_awaited(memory_db: Any) -> None:
    async def remote(request: TopicRequest) -> Topic:
        return Topic(path="remote->model", related=("remote->cache",))

    history = History(memory_db, topics=remote)
    await history.rolls("agent", [BREAD])

    [found] = await history.recall().recall("agent", "sourdough")
    assert found.topic == "remote->model"
    assert [node.path for node in await history.recall().topics("agent")] == ["remote", "remote->model"]


BAD_TOPICS: dict[str, object] = {
    "a string": "kitchen->bread",
    "None": None,
    "an empty path": Topic(path=""),
    "an empty name": Topic(path="kitchen->->bread"),
    "a blank related path": Topic(path="kitchen", related=(" ",)),
    "too deep": Topic(path="->".join("abcdefghi")),
    "too many related": Topic(path="kitchen", related=tuple(f"r{n}" for n in range(9))),
}


@pytest.mark.parametrize("answer", BAD_TOPICS.values(), ids=BAD_TOPICS.keys())
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_an_extractor_answering_something_else_than_a_topic_is_refused_and_nothing_is_indexed(
    memory_db: Any, answer: object, kind: str
) -> None:
    def sync(request: TopicRequest) -> Any:
        return answer

    async def asynchronous(request: TopicRequest) -> Any:
        return answer

    history = History(memory_db, topics=sync if kind == "sync" else asynchronous)
    result = await history.roll("agent", BREAD, index=False)

    with pytest.raises(InvalidInput) as raised:
        await history.indexer.consume(result)

    assert "\n" not in str(raised.value)
    assert await memory_db[RECALL_INDEX].count_documents({}) == 0


def test_a_profile_weight_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(InvalidInput, match="activation"):
        TopicProfile(activation=1.5)


async def test_the_indexer_is_an_after_rolling_consumer_named_recall_index(memory_db: Any) -> None:
    indexer = RecallIndexer(memory_db)

    assert indexer.name == "recall-index"
    assert RecallIndexer(memory_db, name="recall-2").name == "recall-2"
    assert callable(indexer.consume) and callable(indexer.on_erased)


async def test_slices_of_a_chinese_conversation_are_found_by_any_two_characters_of_a_word(
    memory_db: Any,
) -> None:
    history = History(memory_db)
    await history.rolls("agent", [TRAVEL, PROJECT])

    for query, expected in (("西湖", TRAVEL), ("高铁", TRAVEL), ("检索", PROJECT), ("原始消息", PROJECT)):
        [found, *_] = await history.recall().recall("agent", query)
        assert found.summary == expected.summary, query


async def test_role_names_and_speaker_labels_are_never_topics(database: Any) -> None:
    """The extractive summary prefixes each sentence with its role (``user: ...``) and a message may carry
    its speaker's name: ``topics`` showed ``Lyon->user``."""
    rolling = RollingService(database, extractive_summarizer, RollingConfig(trigger_limit=4))
    indexer = RecallIndexer(database)
    turns = [
        ("My sister Mia lives in Lyon.", "Lyon is lovely in spring."),
        ("She teaches piano there.", "A musical family!"),
    ]
    for question, answer in turns:
        messages = [
            Message(role="user", content=question, name="Alice"),
            Message(role="assistant", content=answer, name="Partner"),
        ]
        result = await rolling.record_and_roll("alice", messages)
        if result is not None:
            await indexer.consume(result)

    names = {
        name.lower()
        for node in await MemoryRecall(database).topics("alice")
        for name in node.path.split("->")
    }

    assert names and names.isdisjoint({"user", "assistant", "system", "tool", "alice", "partner"})
    assert "lyon" in names

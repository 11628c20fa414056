"""``RecallIndexer``, the AfterRolling consumer that builds the recall index: idempotent under at-least-once
delivery (a redelivery, or a delivery after a crash anywhere, leaves the index one delivery leaves), newest
revision wins, erasure removes everything derived from the erased units, and the topic extractor is pluggable.

Document frequencies are the sizes of the ``slices`` lists in ``recall_vocabulary``: after every step the
vocabulary must hold exactly what the indexed slices hold (:func:`assert_vocabulary_derives_from_slices`).
"""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any

import pytest

from partner_repo import InvalidInput, RollingResult, in_memory_database, init_repository
from partner_repo.mongo._indexes import RECALL_SLICES, RECALL_VOCABULARY
from partner_repo.recall import RecallIndexer, Topic, TopicNode, TopicProfile, TopicRequest
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
    assert_vocabulary_derives_from_slices,
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


async def test_every_slice_is_indexed_once_with_a_vocabulary_that_counts_it_once(memory_db: Any) -> None:
    history = History(memory_db)
    await history.rolls("agent", CONVERSATION)

    vocabulary, slices = await index_state(memory_db)
    assert [row["slice_id"] for row in slices] == sorted(r.slice_id for r in history.rolled)
    assert len(vocabulary[("agent", "core", "")]) == 4
    assert (
        len(vocabulary[("agent", "term", "lighthous")]) == 1
        and len(vocabulary[("agent", "term", "记忆")]) == 1
    )
    await assert_vocabulary_derives_from_slices(memory_db)


async def test_a_slice_is_found_by_the_words_of_its_raw_messages_not_only_its_summary(memory_db: Any) -> None:
    history = History(memory_db)
    await history.rolls("agent", [HIKE, BREAD])

    [found] = await history.recall().recall("agent", "Clint", limit=1)  # only a message names the starter

    assert found.summary == BREAD.summary and "Clint" in " ".join(contents(found.messages))


async def test_redelivering_a_roll_later_leaves_the_index_as_it_was(memory_db: Any) -> None:
    history = History(memory_db)
    first, *_ = await history.rolls("agent", CONVERSATION)
    before = await index_state(memory_db)

    await history.indexer.consume(first)  # delivered again, after three more slices changed the vocabulary
    await history.indexer.consume(first)

    assert await index_state(memory_db) == before


async def test_redelivery_changes_nothing_even_when_the_extractor_answers_differently(memory_db: Any) -> None:
    history = History(memory_db, topics=Fickle())
    first, *_ = await history.rolls("agent", [HIKE, BREAD])
    before = await index_state(memory_db)

    await history.indexer.consume(first)

    assert await index_state(memory_db) == before


async def first_delivery(history: History) -> RollingResult:
    await history.rolls("agent", [HIKE])
    return await history.roll("agent", SHORT, index=False)


async def new_revision(history: History) -> RollingResult:
    [result] = await history.rolls("agent", [SHORT])
    return revised(result, "a loaf of rye with caraway")


@pytest.mark.parametrize("deliver", [first_delivery, new_revision], ids=["first delivery", "new revision"])
async def test_a_delivery_after_a_crash_at_any_write_leaves_the_index_one_delivery_leaves(
    deliver: Any,
) -> None:
    """The indexer dies at write 1, then at write 2, ... of a delivery (with an extractor that answers
    differently each time, as an LLM may), and the listener delivers the roll again."""
    crash_at, crashed = 0, True
    while crashed:
        crash_at += 1
        database = await init_repository(in_memory_database(f"crash_{crash_at}"))
        extractor = Fickle()
        history = History(database, topics=extractor)
        result = await deliver(history)
        asked = extractor.calls
        crashing = crashing_index(database, at=crash_at)
        with contextlib.suppress(Crash):
            await RecallIndexer(crashing, topics=extractor).consume(result)
        crashed = len(crashing.calls) >= crash_at

        await history.indexer.consume(result)  # the listener delivers it again

        await assert_vocabulary_derives_from_slices(database)
        _, slices = await index_state(database)
        [indexed] = [row for row in slices if row["slice_id"] == result.slice_id]
        assert (indexed["summary"], indexed["revision"]) == (result.summary, result.revision), crash_at
        assert extractor.calls - asked == (2 if crash_at == 1 else 1), crash_at  # the crashed write finished
        [found] = await history.recall().recall("agent", result.summary, limit=1)
        assert found.slice_id == result.slice_id, crash_at
    assert crash_at > 5  # every write of the delivery was, once, the one that crashed


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
    await assert_vocabulary_derives_from_slices(memory_db)


async def test_a_term_only_the_old_summary_had_no_longer_counts(memory_db: Any) -> None:
    history = History(memory_db)
    [first] = await history.rolls("agent", [session(T0, "the zeppelin plan", "we talked", "about bread")])

    await history.indexer.consume(revised(first, "bread talk"))

    vocabulary, _ = await index_state(memory_db)
    assert not any(value == "zeppelin" for _, _, value in vocabulary)
    assert [piece.sources for piece in await history.recall().recall("agent", "zeppelin")] == []


async def test_on_erased_removes_the_erased_units_slices_and_every_count_of_them(memory_db: Any) -> None:
    history = History(memory_db)
    erased = await history.rolls("agent", [HIKE, PROJECT])
    kept = await history.rolls("other", [BREAD])

    await history.indexer.on_erased(erasure_of(erased, core_id="agent"))

    vocabulary, slices = await index_state(memory_db)
    assert [row["slice_id"] for row in slices] == [kept[0].slice_id]
    assert {core for core, _, _ in vocabulary} == {"other"}  # not a word of the erased slices is left
    await assert_vocabulary_derives_from_slices(memory_db)
    [found] = await history.recall().recall("other", "sourdough")
    assert found.slice_id == kept[0].slice_id


async def test_on_erased_keeps_the_words_other_slices_still_hold(memory_db: Any) -> None:
    history = History(memory_db)
    erased = await history.roll("agent", HIKE, end_session=True)
    again = session(T0 + timedelta(days=2), "lighthouse again", "the lighthouse", "yes")
    kept = await history.roll("agent", again)
    assert kept.unit_id != erased.unit_id

    await history.indexer.on_erased(erasure_of([erased], core_id="agent"))

    vocabulary, _ = await index_state(memory_db)
    assert vocabulary[("agent", "term", "lighthous")] == [[kept.unit_id, kept.slice_id]]
    await assert_vocabulary_derives_from_slices(memory_db)


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
    assert await memory_db[RECALL_SLICES].count_documents({}) == 0
    assert await memory_db[RECALL_VOCABULARY].count_documents({}) == 0


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

"""``MemoryRecall.recall``: the slices a query is about, best first, each with the raw messages it came from;
filters before ranking, date cues from the query or from the caller, and nothing of another core."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from partner_repo import MemoryEraser, MemoryUnitRepository
from partner_repo.recall import (
    ActivatedSlice,
    DateCue,
    RecallWeights,
    Topic,
    TopicCue,
    TopicNode,
    TopicRequest,
)
from tests.erasure_support import Crash
from tests.recall_support import (
    BREAD,
    CONVERSATION,
    HIKE,
    NOW,
    PROJECT,
    T0,
    TRAVEL,
    History,
    contents,
    crashing_index,
    index_state,
    session,
)


@pytest.fixture
async def history(memory_db: Any) -> History:
    """The English and Chinese conversation of core ``agent``, one slice per session, indexed."""
    history = History(memory_db)
    await history.rolls("agent", CONVERSATION)
    return history


async def test_an_english_query_finds_its_slice_and_returns_its_raw_messages(history: History) -> None:
    [hike, *_] = await history.recall().recall("agent", "Which whales did we see near the lighthouse?")

    assert (hike.slice_id, hike.unit_id, hike.core_id) == (
        history.rolled[0].slice_id,
        history.rolled[0].unit_id,
        "agent",
    )
    assert hike.summary == HIKE.summary and hike.day == date(2026, 11, 20)
    assert contents(hike.messages) == [content for _, content in HIKE.lines]
    assert [message.role for message in hike.messages] == [role for role, _ in HIKE.lines]
    assert hike.positions == (0, 1, 2, 3)


async def test_a_chinese_query_finds_its_slice_and_returns_its_raw_messages(history: History) -> None:
    [project, *_] = await history.recall().recall("agent", "项目的记忆模块是怎么讨论的？")  # noqa: RUF001

    assert project.slice_id == history.rolled[3].slice_id and project.summary == PROJECT.summary
    assert contents(project.messages) == [content for _, content in PROJECT.lines]
    assert project.day == date(2026, 11, 30)


async def test_a_query_mixing_chinese_and_english_finds_both_languages(history: History) -> None:
    found = await history.recall().recall("agent", "sourdough starter 和杭州西湖")

    assert {piece.summary for piece in found[:2]} == {BREAD.summary, TRAVEL.summary}


async def test_max_messages_keeps_the_messages_that_matter_within_the_slice_in_order(memory_db: Any) -> None:
    history = History(memory_db)
    chatter = [f"small talk number {n} about the weather" for n in range(10)]
    long = session(T0, "a long morning", *chatter[:6], "I left my passport in the blue drawer", *chatter[6:])
    [rolled] = await history.rolls("agent", [long])

    [found] = await history.recall().recall("agent", "where is my passport?", max_messages=3)

    assert found.slice_id == rolled.slice_id and len(found.messages) == 3
    assert "I left my passport in the blue drawer" in contents(found.messages)
    assert list(found.positions) == sorted(found.positions)
    assert contents(found.messages) == [contents(rolled.increment_messages)[p] for p in found.positions]


async def test_limit_caps_the_number_of_slices(history: History) -> None:
    query = "lighthouse sourdough 杭州 记忆"

    assert len(await history.recall().recall("agent", query, limit=4)) == 4
    assert len(await history.recall().recall("agent", query, limit=2)) == 2


async def test_max_messages_is_a_budget_across_the_slices(history: History) -> None:
    found = await history.recall().recall("agent", "lighthouse sourdough 杭州 记忆", max_messages=5)

    assert sum(len(piece.messages) for piece in found) == 5


async def test_since_and_until_filter_before_ranking(memory_db: Any) -> None:
    """Many slices that match better lie outside the window; the one inside it is still found, although
    each channel only brings back its best few."""
    history = History(memory_db)
    outside = [
        session(
            T0 + timedelta(days=n), f"lighthouse day {n}", "the lighthouse lighthouse keeper", "lighthouse"
        )
        for n in range(12)
    ]
    inside = session(T0 + timedelta(days=20), "a walk", "we walked past a lighthouse once", "nice")
    await history.rolls("agent", [*outside, inside])
    since, until = T0 + timedelta(days=19), T0 + timedelta(days=21)

    recall = history.recall()

    for limit in (1, 10):  # one: fewer candidates per channel than better slices outside; ten: room to spare
        found = await recall.recall("agent", "lighthouse", limit=limit, since=since, until=until)
        assert [piece.summary for piece in found] == ["a walk"]


async def test_a_slice_is_in_the_window_when_its_conversation_overlaps_it(history: History) -> None:
    day = PROJECT.day

    within = await history.recall().recall("agent", "记忆模块", since=day + timedelta(minutes=2), until=NOW)
    after = await history.recall().recall("agent", "记忆模块", since=day + timedelta(hours=1))

    assert [piece.summary for piece in within] == [PROJECT.summary] and after == []


@pytest.mark.parametrize(
    "query",
    ["What did we talk about yesterday?", "我们昨天聊了什么？", "on 2026-11-30"],  # noqa: RUF001
)
async def test_a_date_in_the_query_brings_that_days_slices(history: History, query: str) -> None:
    [found, *_] = await history.recall().recall("agent", query)

    assert found.summary == PROJECT.summary and "date" in found.sources


async def test_the_days_a_query_names_are_days_in_the_time_zone_given(history: History) -> None:
    """20:00 UTC on 30 November is 04:00 on 1 December in Shanghai: "yesterday" there, at NOW, is not it."""
    late = session(datetime(2026, 11, 30, 20, 0, tzinfo=UTC), "a late call about the tides", "tides", "ok")
    await history.rolls("agent", [late])

    def dated(found: list[ActivatedSlice]) -> set[str]:
        return {piece.summary for piece in found if "date" in piece.sources}

    recall = history.recall()
    assert dated(await recall.recall("agent", "yesterday")) == {PROJECT.summary, late.summary}
    assert dated(await recall.recall("agent", "yesterday", tz="Asia/Shanghai")) == {PROJECT.summary}
    assert dated(await history.recall(tz="Asia/Shanghai").recall("agent", "今天")) == {late.summary}


async def test_date_cues_given_by_the_caller_replace_the_ones_read_from_the_query(history: History) -> None:
    bread_day = DateCue(date(2026, 11, 24), date(2026, 11, 25), "the day Clint was fed")

    [found] = await history.recall().recall("agent", "yesterday", cues=[bread_day])

    assert found.summary == BREAD.summary and found.sources == ("date",)


async def test_no_cues_from_the_caller_means_none_from_the_query_either(history: History) -> None:
    found = await history.recall().recall("agent", "yesterday", cues=[])

    assert all("date" not in piece.sources for piece in found)


async def test_topic_cues_given_by_the_caller_find_the_slices_under_that_topic(memory_db: Any) -> None:
    paths = {HIKE.summary: "outdoors->coast", BREAD.summary: "kitchen->bread"}
    history = History(memory_db, topics=lambda request: Topic(path=paths.get(request.summary, "misc")))
    await history.rolls("agent", [HIKE, BREAD])

    [found] = await history.recall().recall("agent", "anything at all", cues=[TopicCue("kitchen->bread")])

    assert found.summary == BREAD.summary and found.topic == "kitchen->bread"
    assert "topic" in found.sources


async def test_explain_fills_why_with_what_each_part_of_the_score_contributed(history: History) -> None:
    recall = history.recall()
    [explained, *_] = await recall.recall("agent", "sourdough starter", explain=True)
    [plain, *_] = await recall.recall("agent", "sourdough starter")

    assert plain.why is None and explained.why is not None
    assert explained.why["text"] > 0 and {"recency", "activation", "independence"} <= set(explained.why)
    assert sum(explained.why.values()) == pytest.approx(explained.score, abs=1e-5)


async def test_sources_name_the_channels_that_found_each_slice(history: History) -> None:
    found = {
        piece.summary: piece.sources
        for piece in await history.recall().recall("agent", "sourdough yesterday")
    }

    assert found[BREAD.summary] == ("text",)
    assert "date" in found[PROJECT.summary] and "text" not in found[PROJECT.summary]


async def test_topics_shows_the_cores_topic_tree(memory_db: Any) -> None:
    paths = {HIKE.summary: "life->outdoors", BREAD.summary: "life->kitchen", PROJECT.summary: "work->记忆"}
    history = History(memory_db, topics=lambda request: Topic(path=paths[request.summary]))
    await history.rolls("agent", [HIKE, BREAD, PROJECT])

    assert await history.recall().topics("agent") == [
        TopicNode("life", 2),
        TopicNode("life->kitchen", 1),
        TopicNode("life->outdoors", 1),
        TopicNode("work", 1),
        TopicNode("work->记忆", 1),
    ]
    assert [node.depth for node in await history.recall().topics("agent")] == [1, 2, 2, 1, 2]


async def test_the_default_topics_come_from_the_slices_own_words(history: History) -> None:
    tree = await history.recall().topics("agent")

    assert len([node for node in tree if node.depth == 1]) >= 2 and all(node.slices >= 1 for node in tree)
    [project, *_] = await history.recall().recall("agent", "记忆模块")
    assert project.topic in {node.path for node in tree}


async def test_a_core_with_nothing_indexed_recalls_nothing(history: History) -> None:
    assert await history.recall().recall("somebody else", "lighthouse") == []
    assert await history.recall().topics("somebody else") == []


@pytest.mark.parametrize("query", ["zebra quantum", "what did we talk about?", "remind me", "zzzz"])
async def test_a_query_naming_nothing_the_index_knows_returns_the_most_recent_slices(
    history: History, query: str
) -> None:
    """docs/recall.md and ``recall search --help``: a query that names nothing the index knows (no word the
    core used, no topic, no date) gets the newest slices, as an empty one does."""
    found = await history.recall().recall("agent", query, limit=2)

    assert [piece.summary for piece in found] == [PROJECT.summary, TRAVEL.summary]
    assert all(piece.sources == ("recent",) for piece in found)


async def test_a_query_of_stopwords_only_returns_the_most_recent_slices(history: History) -> None:
    found = await history.recall().recall("agent", "what did we", limit=2)

    assert [piece.summary for piece in found] == [PROJECT.summary, TRAVEL.summary]
    assert all(piece.sources == ("recent",) for piece in found)


async def test_an_empty_query_returns_the_most_recent_slices(history: History) -> None:
    [newest] = await history.recall().recall("agent", "", limit=1)

    assert newest.summary == PROJECT.summary


async def test_another_cores_slices_never_come_back(history: History) -> None:
    await history.rolls("other", [HIKE])

    for query in ("whales near the lighthouse", ""):
        assert {piece.core_id for piece in await history.recall().recall("agent", query)} == {"agent"}
        assert {piece.core_id for piece in await history.recall().recall("other", query)} == {"other"}
    ours = {piece.unit_id for piece in await history.recall().recall("agent", "lighthouse", limit=100)}
    assert ours == {history.rolled[0].unit_id}


async def test_forget_leaves_nothing_of_the_core_in_the_recall_index(history: History) -> None:
    await history.rolls("other", [HIKE])

    await MemoryEraser(history.database).forget("agent")  # no listener has told the indexer yet

    counters, slices = await index_state(history.database)
    assert {row["core_id"] for row in slices} == {"other"}
    assert {core for core, _, _ in counters} == {"other"}  # not a node of the erased conversation
    for query in ("whales near the lighthouse", "记忆模块", "yesterday", ""):
        assert await history.recall().recall("agent", query) == []


async def test_nothing_erased_comes_back_even_when_the_erasure_stopped_before_the_index(
    history: History,
) -> None:
    crashing = crashing_index(history.database, at=1)  # the units are gone; their index entries are not

    with pytest.raises(Crash):
        await MemoryEraser(crashing).forget("agent")

    _, slices = await index_state(history.database)
    assert len(slices) == 4
    for query in ("whales near the lighthouse", "记忆模块", "yesterday", ""):
        assert await history.recall().recall("agent", query) == []


async def test_a_slice_whose_unit_is_gone_is_never_returned(memory_db: Any) -> None:
    history = History(memory_db)
    hike = await history.roll("agent", HIKE, end_session=True)  # the next roll goes to another unit
    await history.roll("agent", BREAD)
    await MemoryUnitRepository(memory_db).delete(hike.unit_id)  # not an erasure: the index is not told

    found = await history.recall().recall("agent", "lighthouse whales sourdough", limit=10)

    assert [piece.summary for piece in found] == [BREAD.summary]


async def test_the_topic_extractor_sees_the_slices_summary_messages_and_keywords(memory_db: Any) -> None:
    seen: list[TopicRequest] = []

    def remember(request: TopicRequest) -> Topic:
        seen.append(request)
        return Topic(path="x")

    await History(memory_db, topics=remember).rolls("agent", [BREAD])

    [request] = seen
    assert (request.core_id, request.summary) == ("agent", BREAD.summary)
    assert contents(request.messages) == [c for _, c in BREAD.lines]
    assert "sourdough" in request.keywords and request.roots == []


async def test_a_name_in_the_query_weighs_more_than_a_plain_word(memory_db: Any) -> None:
    """Each term is in one slice; the plain word is said twice, the name once: only the name's stress
    puts its slice first."""
    history = History(memory_db)
    await history.rolls(
        "agent",
        [
            session(T0, "moving", "we are becoming neighbours, becoming close", "nice"),
            session(T0 + timedelta(days=1), "the market", "I met Nicole at the market", "nice"),
        ],
    )
    query = "what about becoming like Nicole"

    [stressed, *_] = await history.recall().recall("agent", query)
    [plain, *_] = await history.recall(weights=RecallWeights(emphasis=1.0)).recall("agent", query)

    assert stressed.summary == "the market" and plain.summary == "moving"


async def test_a_quoted_phrase_weighs_more_than_a_plain_word(memory_db: Any) -> None:
    history = History(memory_db)
    await history.rolls(
        "agent",
        [
            session(T0, "the harbour", "the harbour was busy, the harbour at dawn", "nice"),
            session(T0 + timedelta(days=1), "a house", "they painted it, a blue door", "nice"),
        ],
    )

    [found, *_] = await history.recall().recall("agent", 'the "blue door" by the harbour')

    assert found.summary == "a house"


async def test_days_before_an_event_narrow_to_the_days_before_the_slice_that_tells_of_it(
    memory_db: Any,
) -> None:
    history = History(memory_db)
    await history.rolls(
        "agent",
        [
            session(T0, "groceries", "shopping for groceries", "ok"),
            session(T0 + timedelta(days=7), "beach things", "shopping for sunscreen and a hat", "ok"),
            session(T0 + timedelta(days=9), "the trip", "our trip to Lisbon starts today", "enjoy"),
            session(T0 + timedelta(days=10), "a lamp", "shopping for a new lamp", "ok"),
        ],
    )
    recall = history.recall()

    before_trip = await recall.recall(
        "agent", "what shopping did we do two days before the trip?", explain=True
    )
    before_concert = await recall.recall("agent", "what shopping did we do two days before the concert?")

    shopping = [piece for piece in before_trip if piece.summary != "the trip"]
    assert shopping[0].summary == "beach things" and "date" in shopping[0].sources
    assert all("date" not in piece.sources for piece in before_concert)  # no slice tells of a concert


async def test_a_slice_next_to_a_found_one_in_its_unit_ranks_above_an_equal_stranger(memory_db: Any) -> None:
    """ "its sequel" and "a stranger" say the same; the sequel follows the best slice in its unit."""
    history = History(memory_db)
    plan = await history.roll("agent", session(T0, "the plan", "we planned the garden shed", "ok"))
    sequel = await history.roll(
        "agent", session(T0 + timedelta(hours=2), "its sequel", "the roof leaks", "ok"), end_session=True
    )
    stranger = await history.roll(
        "agent", session(T0 + timedelta(days=1), "a stranger", "the roof leaks", "ok")
    )
    assert sequel.unit_id == plan.unit_id != stranger.unit_id

    found = await history.recall().recall("agent", "garden shed roof", explain=True)

    assert [piece.summary for piece in found] == ["the plan", "its sequel", "a stranger"]
    assert (
        found[1].why is not None and found[1].why["adjacent"] > 0 and "adjacent" not in (found[2].why or {})
    )

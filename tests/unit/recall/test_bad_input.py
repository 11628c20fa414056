"""Bad input to recall is refused with one line naming what is wrong, before anything is read or written."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest

from partner_repo import InvalidInput
from partner_repo.recall import DateCue, MemoryRecall, TopicCue
from tests.recall_support import BREAD, NOW, History, index_state

NAIVE = datetime(2026, 11, 30, 12, 0)
DAY = date(2026, 11, 30)

BAD_CALLS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "blank core id": (("  ", "bread"), {}),
    "empty core id": (("", "bread"), {}),
    "core id not a string": ((7, "bread"), {}),
    "query not a string": (("agent", 7), {}),
    "query as bytes": (("agent", b"bread"), {}),
    "query missing": (("agent", None), {}),
    "limit 0": (("agent", "bread"), {"limit": 0}),
    "limit 101": (("agent", "bread"), {"limit": 101}),
    "limit a bool": (("agent", "bread"), {"limit": True}),
    "limit a float": (("agent", "bread"), {"limit": 2.0}),
    "max_messages 0": (("agent", "bread"), {"max_messages": 0}),
    "max_messages a string": (("agent", "bread"), {"max_messages": "40"}),
    "since naive": (("agent", "bread"), {"since": NAIVE}),
    "until naive": (("agent", "bread"), {"until": NAIVE}),
    "now naive": (("agent", "bread"), {"now": NAIVE}),
    "since not a datetime": (("agent", "bread"), {"since": "2026-11-30"}),
    "since a date": (("agent", "bread"), {"since": DAY}),
    "since equal to until": (("agent", "bread"), {"since": NOW, "until": NOW}),
    "since after until": (("agent", "bread"), {"since": NOW, "until": datetime(2026, 1, 1, tzinfo=UTC)}),
    "unknown time zone": (("agent", "bread"), {"tz": "Mars/Olympus_Mons"}),
    "time zone not a name": (("agent", "bread"), {"tz": 8}),
    "cues as a string": (("agent", "bread"), {"cues": "yesterday"}),
    "cue of another type": (("agent", "bread"), {"cues": [("2026-11-30", "2026-12-01")]}),
    "date cue of strings": (("agent", "bread"), {"cues": [DateCue("2026-11-30", "2026-12-01", "x")]}),  # type: ignore[arg-type]
    "date cue of datetimes": (("agent", "bread"), {"cues": [DateCue(DAY, NOW, "x")]}),
    "date cue ending first": (("agent", "bread"), {"cues": [DateCue(DAY, date(2026, 11, 1), "x")]}),
    "topic cue blank": (("agent", "bread"), {"cues": [TopicCue(" ")]}),
    "topic cue not a string": (("agent", "bread"), {"cues": [TopicCue(3)]}),  # type: ignore[arg-type]
    "topic cue with an empty name": (("agent", "bread"), {"cues": [TopicCue("a->->b")]}),
}


@pytest.fixture
async def history(memory_db: Any) -> History:
    history = History(memory_db)
    await history.rolls("agent", [BREAD])
    return history


@pytest.mark.parametrize("call", BAD_CALLS.values(), ids=BAD_CALLS.keys())
async def test_bad_input_to_recall_is_one_line_and_changes_nothing(
    history: History, call: tuple[tuple[Any, ...], dict[str, Any]]
) -> None:
    args, options = call
    before = await index_state(history.database)

    with pytest.raises(InvalidInput) as raised:
        await history.recall().recall(*args, **options)

    assert str(raised.value) and "\n" not in str(raised.value)
    assert await index_state(history.database) == before


@pytest.mark.parametrize("core_id", ["", " ", None, 3])
async def test_topics_of_a_bad_core_id_is_refused(history: History, core_id: Any) -> None:
    with pytest.raises(InvalidInput, match="core_id"):
        await history.recall().topics(core_id)


@pytest.mark.parametrize(
    "options",
    [{"tz": "Nowhere/Else"}, {"tz": 0}, {"embedder": "not callable"}],
    ids=["zone", "zone type", "embedder"],
)
def test_a_recall_built_with_bad_options_is_refused(memory_db: Any, options: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        MemoryRecall(memory_db, **options)


async def test_a_naive_time_is_refused_saying_to_give_a_zone(history: History) -> None:
    with pytest.raises(InvalidInput, match="since must be an aware datetime"):
        await history.recall().recall("agent", "bread", since=NAIVE)

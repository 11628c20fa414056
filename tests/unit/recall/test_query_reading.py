"""What recall reads from a query's wording by rules, besides its date cues: the words it stresses (proper
names, quoted phrases) and the times it names relative to an event."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from partner_repo.recall import terms
from partner_repo.recall._cues import EventCue, event_cues
from partner_repo.recall._emphasis import emphasized

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def events(query: str) -> list[EventCue]:
    return event_cues(query, now=NOW, tz=ZoneInfo("UTC"))


def test_a_quoted_phrase_is_stressed_with_the_tokenizers_terms() -> None:
    assert emphasized('what did she read in "The Four Seasons"?', terms) == {"four", "season"}


def test_chinese_title_marks_and_corner_quotes_stress_their_text() -> None:
    assert emphasized("我们聊过《三体》和「深海」吗", terms) == {"三体", "深海"}


def test_a_capitalized_word_inside_a_sentence_is_a_name() -> None:
    assert emphasized("When did Jon go to Paris", terms) == {"jon", "pari"}


def test_the_capital_that_begins_a_sentence_is_not_a_name() -> None:
    assert emphasized("Painting is what we talked about. Hiking too", terms) == set()


def test_an_acronym_is_a_name_even_where_a_sentence_begins() -> None:
    assert emphasized("NASA said so", terms) == {"nasa"}


def test_n_days_before_an_event_names_the_event_and_the_days() -> None:
    assert events("what did we buy two days before the trip?") == [
        EventCue(before=True, days=2, event="the trip", text="two days before the trip")
    ]


def test_a_bare_after_an_event_has_no_count_of_days() -> None:
    assert events("What did Melanie do after the road trip to relax?") == [
        EventCue(before=False, days=None, event="the road trip", text="after the road trip")
    ]


def test_the_week_before_an_event() -> None:
    [cue] = events("what happened the week before my birthday party")

    assert (cue.before, cue.days, cue.event) == (True, 7, "my birthday party")


def test_a_chinese_event_with_days_before_it() -> None:
    assert events("旅行前两天我们买了什么") == [
        EventCue(before=True, days=2, event="旅行", text="旅行前两天")
    ]


def test_a_phrase_naming_a_day_is_a_date_cue_not_an_event() -> None:
    assert events("the day before yesterday and two weeks before August 11, 2026") == []


def test_an_event_whose_words_name_days_is_a_date_cue() -> None:
    assert events("what came after the last week?") == []


def test_a_date_phrase_said_twice_is_a_date_cue_both_times() -> None:
    assert events("last week was busy; what came after the last week?") == []

"""Date cues read from a query by rules, as half-open day intervals in the caller's time zone."""

from __future__ import annotations

from datetime import UTC as UTC_OFFSET
from datetime import date, datetime
from zoneinfo import ZoneInfo

import pytest

from partner_repo.recall import DateCue, date_cues

UTC = ZoneInfo("UTC")
SHANGHAI = ZoneInfo("Asia/Shanghai")
# A Wednesday.
NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC_OFFSET)


def days(query: str, *, now: datetime = NOW, tz: ZoneInfo = UTC) -> list[tuple[date, date]]:
    return [(cue.start, cue.end) for cue in date_cues(query, now=now, tz=tz)]


def one_day(year: int, month: int, day: int) -> tuple[date, date]:
    start = date(year, month, day)
    return start, date.fromordinal(start.toordinal() + 1)


def test_an_iso_date_is_that_day_with_dashes_or_slashes() -> None:
    assert days("on 2026-11-30 and 2025/1/5") == [one_day(2026, 11, 30), one_day(2025, 1, 5)]


def test_a_date_that_does_not_exist_gives_no_cue() -> None:
    assert days("2026-02-30 or 2月30日") == []


def test_today_yesterday_and_the_day_before_yesterday() -> None:
    assert days("today") == [one_day(2026, 12, 2)]
    assert days("Yesterday?") == [one_day(2026, 12, 1)]
    assert days("the day before yesterday") == [one_day(2026, 11, 30)]


def test_the_longer_form_wins_where_two_overlap() -> None:
    cues = date_cues("what did we say the day before yesterday", now=NOW, tz=UTC)
    assert cues == [DateCue(date(2026, 11, 30), date(2026, 12, 1), "the day before yesterday")]


def test_n_days_ago_in_digits_or_words() -> None:
    assert days("3 days ago") == [one_day(2026, 11, 29)]
    assert days("a day ago") == [one_day(2026, 12, 1)]
    assert days("ten days ago") == [one_day(2026, 11, 22)]


def test_this_week_and_last_week_start_on_monday() -> None:
    assert days("this week") == [(date(2026, 11, 30), date(2026, 12, 7))]
    assert days("last week") == [(date(2026, 11, 23), date(2026, 11, 30))]


def test_last_week_asked_on_a_monday_is_the_seven_days_before_it() -> None:
    monday = datetime(2026, 11, 30, 0, 30, tzinfo=UTC_OFFSET)
    assert days("last week", now=monday) == [(date(2026, 11, 23), date(2026, 11, 30))]
    assert days("上周", now=monday) == [(date(2026, 11, 23), date(2026, 11, 30))]


def test_last_month_and_this_month_are_calendar_months() -> None:
    assert days("last month") == [(date(2026, 11, 1), date(2026, 12, 1))]
    assert days("this month") == [(date(2026, 12, 1), date(2027, 1, 1))]


def test_last_month_in_january_is_december_of_the_year_before() -> None:
    january = datetime(2027, 1, 15, tzinfo=UTC_OFFSET)
    assert days("last month", now=january) == [(date(2026, 12, 1), date(2027, 1, 1))]
    assert days("上个月", now=january) == [(date(2026, 12, 1), date(2027, 1, 1))]


def test_a_month_name_date_with_or_without_a_year() -> None:
    assert days("May 7") == [one_day(2026, 5, 7)]
    assert days("7 May 2023") == [one_day(2023, 5, 7)]
    assert days("Sept. 3rd, 2024") == [one_day(2024, 9, 3)]
    assert days("the 7th of december") == [one_day(2025, 12, 7)]


def test_a_month_day_without_a_year_is_the_most_recent_not_after_now() -> None:
    assert days("December 2") == [one_day(2026, 12, 2)]
    assert days("December 3") == [one_day(2025, 12, 3)]


def test_a_month_day_across_the_year_boundary_is_last_year() -> None:
    new_year = datetime(2027, 1, 1, 8, tzinfo=UTC_OFFSET)
    assert days("12月31日", now=new_year) == [one_day(2026, 12, 31)]
    assert days("Dec 31", now=new_year) == [one_day(2026, 12, 31)]
    assert days("yesterday", now=new_year) == [one_day(2026, 12, 31)]


def test_february_29_without_a_year_is_the_last_leap_day() -> None:
    assert days("Feb 29") == [one_day(2024, 2, 29)]


def test_a_month_with_a_year_is_that_whole_month() -> None:
    assert days("what happened in May 2022?") == [(date(2022, 5, 1), date(2022, 6, 1))]
    assert days("August, 2023") == [(date(2023, 8, 1), date(2023, 9, 1))]


def test_in_a_month_without_a_year_is_the_most_recent_one_that_has_begun() -> None:
    assert days("which park did she visit in May?") == [(date(2026, 5, 1), date(2026, 6, 1))]
    assert days("during December") == [(date(2026, 12, 1), date(2027, 1, 1))]


def test_a_month_name_is_a_cue_only_after_in_or_during_or_before_a_year() -> None:
    assert days("I may go there, may I?") == []


def test_in_a_year_is_that_whole_year_and_last_year_the_one_before() -> None:
    assert days("in 2023") == [(date(2023, 1, 1), date(2024, 1, 1))]
    assert days("last year") == [(date(2025, 1, 1), date(2026, 1, 1))]
    assert days("this year") == [(date(2026, 1, 1), date(2027, 1, 1))]


def test_n_weeks_ago_is_the_week_holding_that_day() -> None:
    assert days("two weeks ago") == [(date(2026, 11, 16), date(2026, 11, 23))]


def test_n_months_ago_is_that_calendar_month() -> None:
    assert days("3 months ago") == [(date(2026, 9, 1), date(2026, 10, 1))]


def test_last_weekend_is_the_saturday_and_sunday_before_this_week() -> None:
    assert days("last weekend") == [(date(2026, 11, 28), date(2026, 11, 30))]


def test_chinese_years_and_a_month_of_a_year() -> None:
    assert days("去年") == [(date(2025, 1, 1), date(2026, 1, 1))]
    assert days("今年") == [(date(2026, 1, 1), date(2027, 1, 1))]
    assert days("2023年5月的项目") == [(date(2023, 5, 1), date(2023, 6, 1))]
    assert days("2023年5月7日") == [one_day(2023, 5, 7)]


def test_chinese_days_relative_to_today() -> None:
    assert days("今天") == [one_day(2026, 12, 2)]
    assert days("昨天说的") == [one_day(2026, 12, 1)]
    assert days("前天") == [one_day(2026, 11, 30)]


def test_chinese_weeks_and_months() -> None:
    last_week = [(date(2026, 11, 23), date(2026, 11, 30))]
    this_week = [(date(2026, 11, 30), date(2026, 12, 7))]
    assert days("上周") == days("上星期") == days("上个星期") == last_week
    assert days("本周") == days("这周") == this_week
    assert days("上个月") == [(date(2026, 11, 1), date(2026, 12, 1))]


def test_chinese_month_day_with_ri_or_hao_and_an_optional_year() -> None:
    assert days("11月30日") == [one_day(2026, 11, 30)]
    assert days("11月30号") == [one_day(2026, 11, 30)]
    assert days("2025年5月7日") == [one_day(2025, 5, 7)]


def test_chinese_n_days_ago_in_digits_or_chinese_numerals() -> None:
    assert days("3天前") == [one_day(2026, 11, 29)]
    assert days("三天前") == [one_day(2026, 11, 29)]
    assert days("十二天前") == [one_day(2026, 11, 20)]


def test_full_width_digits_are_read_as_digits() -> None:
    assert days("\uff13\uff10\u5929\u524d") == [one_day(2026, 11, 2)]


def test_english_forms_are_found_inside_chinese_text() -> None:
    assert days("我today做了memory") == [one_day(2026, 12, 2)]


def test_english_forms_are_not_found_inside_other_words() -> None:
    assert days("todayish, yesterdays") == []


def test_the_day_is_taken_in_the_given_time_zone() -> None:
    late_utc = datetime(2026, 12, 1, 20, 0, tzinfo=UTC_OFFSET)  # already 2 December in Shanghai
    assert days("today", now=late_utc, tz=UTC) == [one_day(2026, 12, 1)]
    assert days("today", now=late_utc, tz=SHANGHAI) == [one_day(2026, 12, 2)]


def test_cues_come_in_query_order_one_per_interval() -> None:
    cues = date_cues("昨天 and last week, yesterday too", now=NOW, tz=UTC)
    assert [cue.text for cue in cues] == ["昨天", "last week"]


def test_empty_or_punctuation_only_query_has_no_cues() -> None:
    assert days("") == []
    assert days("?!\u3002\uff0c...") == []


def test_a_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        date_cues("today", now=datetime(2026, 12, 2), tz=UTC)


def test_n_days_or_weeks_before_a_day_is_the_span_from_then_to_that_day() -> None:
    assert days("what did we buy 3 days before 2026-11-10") == [(date(2026, 11, 7), date(2026, 11, 11))]
    assert days("the puppy she got two weeks before August 11, 2026") == [
        (date(2026, 7, 28), date(2026, 8, 12))
    ]


def test_after_a_day_is_the_span_from_that_day_to_then() -> None:
    assert days("a week after May 7, 2026") == [(date(2026, 5, 7), date(2026, 5, 15))]
    assert days("a month after May 31, 2026") == [(date(2026, 5, 31), date(2026, 7, 1))]


def test_the_weekday_or_weekend_before_a_day_reaches_back_to_it() -> None:
    # 2026-10-25 is a Sunday: the Sunday before it is the 18th, the weekend before it the 17th and 18th.
    assert days("on the Sunday before October 25, 2026") == [(date(2026, 10, 18), date(2026, 10, 26))]
    assert days("last weekend before October 25, 2026") == [(date(2026, 10, 17), date(2026, 10, 26))]


def test_a_relative_phrase_is_one_cue_not_also_one_relative_to_now() -> None:
    cues = date_cues("what did Maria do last weekend before April 10, 2026?", now=NOW, tz=UTC)

    assert cues == [DateCue(date(2026, 4, 4), date(2026, 4, 11), "last weekend before April 10, 2026")]


def test_chinese_days_before_or_after_a_day() -> None:
    assert days("2026年5月7日前两天") == [(date(2026, 5, 5), date(2026, 5, 8))]
    assert days("5月7日之后3天") == [(date(2026, 5, 7), date(2026, 5, 11))]

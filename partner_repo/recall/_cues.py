"""Date cues read from a query by rules: which days a question is about, relative to a given now and zone.

"What did we decide yesterday?", "上周说的那个项目", "on May 7": recall filters on days *before* ranking, so
the days a query names are read first, by rules, with no model and no network. Each cue is a half-open
interval of days ``[start, end)`` in the caller's time zone, with the text it was read from.

Forms read (case-insensitive; the query is NFKC-normalized first, so full-width digits count):

- ISO dates: ``2026-11-30``, ``2026/11/30``;
- ``today``, ``yesterday``, ``the day before yesterday``, ``N days ago``, ``N weeks ago``, ``N months ago``
  (digits or ``a``/``one`` to ``ten``), ``this week``, ``last week``, ``last weekend``, ``this month``,
  ``last month``, ``this year``, ``last year``;
- month-name dates: ``May 7``, ``May 7th, 2023``, ``7 May 2023``, ``7th of May`` (full or short names);
- months and years: ``May 2023``, ``in May`` / ``during May`` (the whole month), ``in 2023`` (the whole
  year);
- dates relative to a named day: ``N days/weeks/months before|after <day>``, ``the day/week/weekend/month
  before|after <day>``, ``the <weekday> before|after <day>`` (``last`` for ``the`` too: "last weekend before
  April 10, 2023"), where ``<day>`` is one of the day forms above (an ISO date or a month-name date), and
  ``X月X日前N天`` / ``X月X日后N天`` (also ``之前``/``之后``, ``周``/``星期`` for weeks);
- Chinese (numbers in digits unless said): 今天/今日, 昨天/昨日, 前天, 上周/上星期/上礼拜,
  本周/这周/这星期, 本月/这个月, 上个月/上月, 今年, 去年,
  ``N天前`` (digits or Chinese numerals up to 99), ``X月X日``/``X月X号`` with an optional ``YYYY年``,
  ``YYYY年X月`` (the month).

A week starts on Monday; ``N weeks ago`` is the week (Monday to Sunday) holding the day N weeks back, and
``last weekend`` the Saturday and Sunday before this week. A month-day without a year is the most recent such
day not after ``now`` (asked on 2027-01-02, "12月31日" is 2026-12-31), and a month without a year the most
recent such month that has begun (asked in May, "in May" is this May). A date relative to a named day is the
span from the one to the other, both included ("two weeks before August 11" is July 28 to August 11): the
conversation that tells of an event is as likely on the day it was counted from ("two weeks ago I got a
puppy", said on August 11) as on the event's own day. Where two forms overlap the longer
one wins ("the day before yesterday" is not also "yesterday"); a date that does not exist (``2026-02-30``)
gives no cue. Cues come in the order of the query, one per distinct interval.

A time named relative to an event ("two days before the trip", "after the charity race", "旅行前两天") names
no day until the event is found, so :func:`event_cues` reads it as an :class:`EventCue` (which way, how
many days, the event's words) and recall resolves it among its candidates (``MemoryRecall``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

__all__ = ["DateCue", "EventCue", "date_cues", "event_cues"]


@dataclass(frozen=True, slots=True)
class DateCue:
    """The days ``[start, end)`` (in the caller's time zone) a query names, and the text naming them."""

    start: date
    end: date
    text: str


@dataclass(frozen=True, slots=True)
class EventCue:
    """A time a query names relative to an event rather than a day ("two days before the trip", "after the
    charity race", "旅行前两天"): recall finds the event among its candidates and narrows by the days around
    it. ``days`` is None for a bare "before"/"after" (recall then uses the event's own days and
    :data:`BARE_EVENT_DAYS` beside them)."""

    before: bool
    days: int | None
    event: str
    text: str


BARE_EVENT_DAYS = 7
"""The days on the named side of an event a bare "before"/"after" reaches (the conversations that tell what
followed it are most often the same or the next)."""


_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = "(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_ORDINAL = r"(?:st|nd|rd|th)?"
# Where an English form may start and end: not inside a Latin word or number. Not ``\b``: a Chinese
# character is a word character too, and "我today做了" names today.
_A = r"(?<![a-z0-9])"
_Z = r"(?![a-z0-9])"
_ENGLISH_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
    "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
}  # fmt: skip
_CHINESE_DIGITS = {
    "零": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_CHINESE_NUMBER = "[零一二两三四五六七八九十]+"

_Reader = Callable[[re.Match[str], date], tuple[date, date] | None]


def _day(day: date) -> tuple[date, date]:
    return day, day + timedelta(days=1)


def _ymd(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _recent(month: int, day: int, today: date) -> date | None:
    """The most recent ``month``/``day`` not after ``today`` (a 29 February looks back to a leap year)."""
    for year in range(today.year, today.year - 9, -1):
        found = _ymd(year, month, day)
        if found is not None and found <= today:
            return found
    return None


def _dated(year: str | None, month: int, day: int, today: date) -> tuple[date, date] | None:
    found = _ymd(int(year), month, day) if year else _recent(month, day, today)
    return _day(found) if found else None


def _monday(today: date) -> date:
    return today - timedelta(days=today.weekday())


def _month_start(today: date, back: int) -> date:
    index = today.year * 12 + today.month - 1 - back
    return date(index // 12, index % 12 + 1, 1)


def _chinese_number(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    if "十" not in text:
        return _CHINESE_DIGITS[text] if len(text) == 1 else None
    tens, _, ones = text.partition("十")
    if "十" in ones or len(tens) > 1 or len(ones) > 1:
        return None
    return (_CHINESE_DIGITS[tens] if tens else 1) * 10 + (_CHINESE_DIGITS[ones] if ones else 0)


def _days_ago(count: int | None, today: date) -> tuple[date, date] | None:
    return _day(today - timedelta(days=count)) if count is not None else None


def _this_week(match: re.Match[str], today: date) -> tuple[date, date]:
    return _monday(today), _monday(today) + timedelta(days=7)


def _last_week(match: re.Match[str], today: date) -> tuple[date, date]:
    return _monday(today) - timedelta(days=7), _monday(today)


def _this_month(match: re.Match[str], today: date) -> tuple[date, date]:
    return _month_start(today, 0), _month_start(today, -1)


def _last_month(match: re.Match[str], today: date) -> tuple[date, date]:
    return _month_start(today, 1), _month_start(today, 0)


def _back(days: int) -> _Reader:
    return lambda m, t: _day(t - timedelta(days=days))


def _month(year: int, month: int) -> tuple[date, date] | None:
    if not 1 <= month <= 12 or not 1 <= year <= 9998:
        return None
    return date(year, month, 1), _month_start(date(year, month, 1), -1)


def _recent_month(month: int, today: date) -> tuple[date, date] | None:
    return _month(today.year if month <= today.month else today.year - 1, month)


def _year(year: int) -> tuple[date, date] | None:
    return (date(year, 1, 1), date(year + 1, 1, 1)) if 1 <= year <= 9998 else None


def _count(text: str) -> int:
    return int(text) if text.isdigit() else _ENGLISH_NUMBERS[text.lower()]


def _weeks_ago(match: re.Match[str], today: date) -> tuple[date, date]:
    monday = _monday(today - timedelta(weeks=_count(match["count"])))
    return monday, monday + timedelta(days=7)


def _months_ago(match: re.Match[str], today: date) -> tuple[date, date]:
    back = _count(match["count"])
    return _month_start(today, back), _month_start(today, back - 1)


def _last_weekend(match: re.Match[str], today: date) -> tuple[date, date]:
    return _monday(today) - timedelta(days=2), _monday(today)


_COUNT = r"(?P<count>\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

# What may stand before "before|after <day>": a count of units, one unit, or a weekday (a rule's prefix).
_SHIFT = re.compile(
    rf"{_A}(?:{_COUNT}\s+(?P<units>days?|weeks?|months?)|(?:the|last|that)\s+(?P<unit>day|weekend|week|month)"
    rf"|(?:the|last|that|on\s+the)\s+(?P<weekday>{'|'.join(_WEEKDAYS)}))\s+(?P<direction>before|after)\s+"
    r"(?:on\s+)?$",
    re.IGNORECASE,
)
_CHINESE_SHIFT = re.compile(
    rf"\s*之?(?P<direction>[前后後])\s*(?P<count>\d+|{_CHINESE_NUMBER})\s*(?P<unit>天|周|个?星期)"
)


def _shifted(day: date, before: bool, days: int = 0, months: int = 0) -> date:
    if months:
        start = _month_start(day, months if before else -months)
        length = (_month_start(start, -1) - start).days
        return start + timedelta(days=min(day.day, length) - 1)
    return day - timedelta(days=days) if before else day + timedelta(days=days)


def _span(anchor: tuple[date, date], before: bool, other: tuple[date, date]) -> tuple[date, date]:
    """The span from a shifted period to the day it was counted from, both included."""
    return (other[0], anchor[1]) if before else (anchor[0], other[1])


def _relative(match: re.Match[str], anchor: tuple[date, date]) -> tuple[date, date]:
    """The span a :data:`_SHIFT` prefix names relative to the day ``anchor`` ("the week" is one week)."""
    day, before = anchor[0], match["direction"].lower() == "before"
    if match["weekday"]:
        wanted = _WEEKDAYS.index(match["weekday"].lower())
        step = -1 if before else 1
        found = day + timedelta(days=step)
        while found.weekday() != wanted:
            found += timedelta(days=step)
        return _span(anchor, before, _day(found))
    count, unit = (_count(match["count"]), match["units"]) if match["units"] else (1, match["unit"])
    unit = unit.lower().rstrip("s")
    if unit == "weekend":  # the Saturday and Sunday wholly before (after) the day
        saturday = _shifted(day, before, days=2 if before else 1)
        while saturday.weekday() != 5:
            saturday = _shifted(saturday, before, days=1)
        return _span(anchor, before, (saturday, saturday + timedelta(days=2)))
    if unit == "month":
        return _span(anchor, before, _day(_shifted(day, before, months=count)))
    return _span(anchor, before, _day(_shifted(day, before, days=count * (7 if unit == "week" else 1))))


def _chinese_relative(match: re.Match[str], anchor: tuple[date, date]) -> tuple[date, date] | None:
    days = _chinese_days(match)
    if days is None:
        return None
    before = match["direction"] == "前"
    return _span(anchor, before, _day(_shifted(anchor[0], before, days=days)))


def _chinese_days(match: re.Match[str]) -> int | None:
    """The days ``N天`` or ``N周``/``N星期`` name (None for a numeral it cannot read)."""
    count = _chinese_number(match["count"])
    return None if count is None else count * (1 if match["unit"] == "天" else 7)


# The rules, longest forms first: a match overlapping an earlier rule's match is dropped. The first
# _DAY_RULES name one day, which a date may be relative to.
_DAY_RULES = 4
_RULES: list[tuple[re.Pattern[str], _Reader]] = [
    (
        re.compile(r"(?<!\d)(?P<year>\d{4})(?P<sep>[-/])(?P<month>\d{1,2})(?P=sep)(?P<day>\d{1,2})(?!\d)"),
        lambda m, t: _dated(m["year"], int(m["month"]), int(m["day"]), t),
    ),
    (
        re.compile(
            r"(?:(?<!\d)(?P<year>\d{4})\s*年\s*)?(?<!\d)(?P<month>\d{1,2})\s*月\s*(?P<day>\d{1,2})\s*[日号號]"
        ),
        lambda m, t: _dated(m["year"], int(m["month"]), int(m["day"]), t),
    ),
    (
        re.compile(
            rf"{_A}{_MONTH}\s+(?P<day>\d{{1,2}}){_ORDINAL}(?:,?\s+(?P<year>\d{{4}}))?{_Z}", re.IGNORECASE
        ),
        lambda m, t: _dated(m["year"], _MONTHS[m["month"].lower()], int(m["day"]), t),
    ),
    (
        re.compile(
            rf"{_A}(?P<day>\d{{1,2}}){_ORDINAL}\s+(?:of\s+)?{_MONTH}(?:,?\s+(?P<year>\d{{4}}))?{_Z}", re.I
        ),
        lambda m, t: _dated(m["year"], _MONTHS[m["month"].lower()], int(m["day"]), t),
    ),
    (
        re.compile(r"(?<!\d)(?P<year>\d{4})\s*年\s*(?P<month>\d{1,2})\s*月(?![\d份]*\s*[日号號])"),
        lambda m, t: _month(int(m["year"]), int(m["month"])),
    ),
    (
        re.compile(rf"{_A}{_MONTH},?\s+(?:of\s+)?(?P<year>\d{{4}}){_Z}", re.IGNORECASE),
        lambda m, t: _month(int(m["year"]), _MONTHS[m["month"].lower()]),
    ),
    (
        re.compile(rf"{_A}(?:in|during)\s+(?:early\s+|late\s+|mid-?)?{_MONTH}{_Z}", re.IGNORECASE),
        lambda m, t: _recent_month(_MONTHS[m["month"].lower()], t),
    ),
    (
        re.compile(rf"{_A}(?:in|during)\s+(?:the\s+year\s+)?(?P<year>(?:19|20|21)\d\d){_Z}", re.IGNORECASE),
        lambda m, t: _year(int(m["year"])),
    ),
    (re.compile(rf"{_A}{_COUNT}\s+weeks?\s+ago{_Z}", re.IGNORECASE), _weeks_ago),
    (re.compile(rf"{_A}{_COUNT}\s+months?\s+ago{_Z}", re.IGNORECASE), _months_ago),
    (re.compile(rf"{_A}last\s+weekend{_Z}", re.IGNORECASE), _last_weekend),
    (re.compile(rf"{_A}last\s+year{_Z}", re.IGNORECASE), lambda m, t: _year(t.year - 1)),
    (re.compile(rf"{_A}this\s+year{_Z}", re.IGNORECASE), lambda m, t: _year(t.year)),
    (re.compile("去年"), lambda m, t: _year(t.year - 1)),
    (re.compile("今年"), lambda m, t: _year(t.year)),
    (re.compile(rf"{_A}(?:the\s+)?day\s+before\s+yesterday{_Z}", re.IGNORECASE), _back(2)),
    (re.compile(rf"{_A}{_COUNT}\s+days?\s+ago{_Z}", re.I), lambda m, t: _days_ago(_count(m["count"]), t)),
    (
        re.compile(rf"(?P<count>\d+|{_CHINESE_NUMBER})\s*天(?:以)?前"),
        lambda m, t: _days_ago(_chinese_number(m["count"]), t),
    ),
    (re.compile(rf"{_A}yesterday{_Z}", re.IGNORECASE), _back(1)),
    (re.compile(rf"{_A}today{_Z}", re.IGNORECASE), _back(0)),
    (re.compile(rf"{_A}this\s+week{_Z}", re.IGNORECASE), _this_week),
    (re.compile(rf"{_A}last\s+week{_Z}", re.IGNORECASE), _last_week),
    (re.compile(rf"{_A}this\s+month{_Z}", re.IGNORECASE), _this_month),
    (re.compile(rf"{_A}last\s+month{_Z}", re.IGNORECASE), _last_month),
    (re.compile("前天"), _back(2)),
    (re.compile("昨[天日]"), _back(1)),
    (re.compile("今[天日]"), _back(0)),
    (re.compile("上(?:个)?(?:周|星期|礼拜)"), _last_week),
    (re.compile("(?:本|这个?)(?:周|星期|礼拜)"), _this_week),
    (re.compile("上个?月"), _last_month),
    (re.compile("(?:本|这个)月"), _this_month),
]


def date_cues(query: str, *, now: datetime, tz: ZoneInfo) -> list[DateCue]:
    """The date cues of ``query``, in its order, relative to ``now`` (aware) as a day in ``tz``.

    Raises :class:`ValueError` if ``now`` is naive: "today" depends on the zone, and a naive time names none.
    """
    found = _found(unicodedata.normalize("NFKC", query), _today(now, tz))
    cues: list[DateCue] = []
    seen: set[tuple[date, date]] = set()
    for _, _, cue in sorted(found, key=lambda item: item[0]):
        if (cue.start, cue.end) not in seen:
            seen.add((cue.start, cue.end))
            cues.append(cue)
    return cues


def _today(now: datetime, tz: ZoneInfo) -> date:
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("date_cues needs an aware now (with a time zone), not a naive datetime")
    return now.astimezone(tz).date()


def _found(text: str, today: date) -> list[tuple[int, int, DateCue]]:
    """Each date cue of ``text`` (normalized) where it stands, ``(begin, end, cue)``, in the rules' order;
    repeats included."""
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, int, DateCue]] = []
    for index, (pattern, read) in enumerate(_RULES):
        for match in pattern.finditer(text):
            begin, end = match.span()
            if any(begin < other_end and other_begin < end for other_begin, other_end in taken):
                continue
            interval = read(match, today)
            if interval is not None and index < _DAY_RULES:
                begin, end, interval = _relative_to(text, begin, end, interval)
            taken.append((begin, end))
            if interval is not None:
                found.append((begin, end, DateCue(interval[0], interval[1], text[begin:end])))
    return found


def _relative_to(
    text: str, begin: int, end: int, day: tuple[date, date]
) -> tuple[int, int, tuple[date, date] | None]:
    """The span of text and the days a day form names with what stands around it: the day itself, or the
    span a relative phrase before it ("two weeks before") or, in Chinese, after it ("前两天") names."""
    before = _SHIFT.search(text, 0, begin)
    if before is not None:
        return before.start(), end, _relative(before, day)
    after = _CHINESE_SHIFT.match(text, end)
    if after is not None:
        return begin, after.end(), _chinese_relative(after, day)
    return begin, end, day


_EVENT_STOP = r"(?:to|and|or|with|when|while|that|because|so|in|on|at|for|from|during|since|but)"
_EVENT = re.compile(
    rf"{_A}(?:(?:{_COUNT}\s+(?P<units>days?|weeks?))|(?:the|a)\s+(?P<unit>day|week))?\s*"
    rf"(?P<direction>before|after)\s+(?P<event>(?:the|my|our|his|her|their|your)\s+(?:(?!{_EVENT_STOP}{_Z})"
    rf"[^\W\d_][\w'-]*\s*){{1,4}})",
    re.IGNORECASE,
)
_CHINESE_EVENT = re.compile(
    rf"(?P<event>[\u4e00-\u9fff]{{2,8}}?)之?(?P<direction>[前后後])\s*(?P<count>\d+|{_CHINESE_NUMBER})\s*"
    r"(?P<unit>天|周|个?星期)"
)


def event_cues(query: str, *, now: datetime, tz: ZoneInfo) -> list[EventCue]:
    """The times ``query`` names relative to an event (see :class:`EventCue`), in its order; a phrase that
    names a day ("the day before yesterday", "two weeks before August 11") is a date cue, not an event."""
    text = unicodedata.normalize("NFKC", query)
    taken = [(begin, end) for begin, end, _ in _found(text, _today(now, tz))]
    cues: list[EventCue] = []
    for match in [*_EVENT.finditer(text), *_CHINESE_EVENT.finditer(text)]:
        begin, end = match.span()
        if any(begin < other_end and other_begin < end for other_begin, other_end in taken):
            continue
        cue = _event(match)
        if cue is not None:
            cues.append(cue)
    return cues


def _event(match: re.Match[str]) -> EventCue | None:
    before = match["direction"].lower() in ("before", "前")
    event = match["event"].strip()
    if match.re is _CHINESE_EVENT:
        days = _chinese_days(match)
        return None if days is None else EventCue(before, days, event, match.group().strip())
    if match["units"]:
        days = _count(match["count"]) * (7 if match["units"].lower().startswith("week") else 1)
    elif match["unit"]:
        days = 7 if match["unit"].lower() == "week" else 1
    else:
        days = None
    return EventCue(before, days, event, match.group().strip())

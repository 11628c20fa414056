"""What a recall is asked, checked once at the door: bad input is one :class:`InvalidInput` line and reads
nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from partner_repo.errors import InvalidInput
from partner_repo.recall._cues import DateCue
from partner_repo.recall._topics import parts
from partner_repo.validation import optional_datetime, require_id

MAX_LIMIT = 100
MAX_MESSAGES = 1000


@dataclass(frozen=True)
class TopicCue:
    """A topic path the caller's own cue extractor (Partner's LLM) read from the input: a node's path, or
    its label as :meth:`~.service.MemoryRecall.topics` shows it."""

    path: str


Cue = DateCue | TopicCue


@dataclass(frozen=True)
class Asked:
    """A recall's arguments, checked: the times aware and in UTC, the zone resolved, the cues validated
    (None: read them from the query)."""

    core_id: str
    query: str
    limit: int
    max_messages: int
    since: datetime | None
    until: datetime | None
    now: datetime
    zone: ZoneInfo
    cues: list[Cue] | None


def checked(
    core_id: object,
    query: object,
    *,
    limit: object,
    max_messages: object,
    since: object,
    until: object,
    cues: Sequence[Cue] | None,
    now: object,
    tz: object,
) -> Asked:
    """A recall's arguments, checked (``now`` and ``tz`` already defaulted by the caller)."""
    core = require_id(core_id, "core_id")
    if not isinstance(query, str):
        raise InvalidInput(f"query must be a string, got {type(query).__name__}")
    first, last = bounded(limit, "limit", MAX_LIMIT), bounded(max_messages, "max_messages", MAX_MESSAGES)
    start, end = aware(since, "since"), aware(until, "until")
    if start is not None and end is not None and start >= end:
        raise InvalidInput(f"since ({start.isoformat()}) must be before until ({end.isoformat()})")
    moment = aware(now, "now")
    assert moment is not None  # the caller passes the clock's time when none is given
    return Asked(core, query, first, last, start, end, moment, zone(tz), checked_cues(cues))


def checked_cues(cues: Sequence[Cue] | None) -> list[Cue] | None:
    if cues is None:
        return None
    if isinstance(cues, str | bytes) or not isinstance(cues, Sequence):
        raise InvalidInput(f"cues must be a list of DateCue and TopicCue, got {type(cues).__name__}")
    for cue in cues:
        if not isinstance(cue, DateCue | TopicCue):
            raise InvalidInput(f"a cue must be a DateCue or a TopicCue, got {type(cue).__name__}")
        if isinstance(cue, TopicCue):
            parts(cue.path)
        elif not all(type(day) is date for day in (cue.start, cue.end)):  # a datetime is a date too
            kinds = f"{type(cue.start).__name__} and {type(cue.end).__name__}"
            raise InvalidInput(f"a date cue's start and end must be dates (not datetimes), got {kinds}")
        elif not cue.start < cue.end:
            raise InvalidInput(f"a date cue's start must be before its end, got {cue.start} to {cue.end}")
    return list(cues)


def aware(value: object, what: str) -> datetime | None:
    """An aware datetime as UTC, or None: a naive one is refused (recall reads days in a time zone, so a time
    without one would be ambiguous)."""
    if isinstance(value, datetime) and value.utcoffset() is None:
        raise InvalidInput(
            f"{what} must be an aware datetime (with a time zone), got naive {value.isoformat()}"
        )
    return optional_datetime(value, what)


def bounded(value: object, what: str, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise InvalidInput(f"{what} must be an integer from 1 to {most}, got {value!r}")
    return value


def zone(value: object) -> ZoneInfo:
    if isinstance(value, ZoneInfo):
        return value
    if isinstance(value, str):
        try:
            return ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise InvalidInput(f"unknown time zone {value!r}") from exc
    raise InvalidInput(f"tz must be a ZoneInfo or a zone name, got {type(value).__name__}")


def day_range(cue: DateCue, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """A date cue's days in ``tz`` as a half-open range of UTC times."""
    start = datetime.combine(cue.start, time(), tzinfo=tz).astimezone(UTC)
    end = datetime.combine(cue.end, time(), tzinfo=tz).astimezone(UTC)
    return start, end


__all__ = [
    "MAX_LIMIT",
    "MAX_MESSAGES",
    "Asked",
    "Cue",
    "TopicCue",
    "aware",
    "bounded",
    "checked",
    "checked_cues",
    "day_range",
    "zone",
]

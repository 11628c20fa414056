"""Time as BSON keeps it: timezone-aware UTC, millisecond precision.

Every datetime the library stores or returns goes through :func:`to_utc_ms`, so a value read back equals the
value written, whatever the backend (Motor with ``tz_aware=False`` or mongomock return naive UTC).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from bson.tz_util import utc as bson_utc
from pydantic import AfterValidator


def to_utc_ms(value: datetime) -> datetime:
    """Return ``value`` as aware UTC truncated to milliseconds; a naive value is taken to be UTC.

    This runs for every datetime read (each slice's ``created_at``), so the shapes the driver decodes (naive,
    or aware in bson's UTC zone) and values already normalized take one copy at most, not a zone conversion.
    """
    zone = value.tzinfo
    excess = value.microsecond % 1000
    if zone is UTC and not excess:
        return value
    if zone is None or zone is bson_utc:  # bson's UTC zone: a fixed zero offset, only the zone object differs
        return value.replace(tzinfo=UTC, microsecond=value.microsecond - excess)
    value = value.astimezone(UTC)
    return value.replace(microsecond=value.microsecond - value.microsecond % 1000)


def utc_now() -> datetime:
    """The current time, already in stored precision."""
    return to_utc_ms(datetime.now(UTC))


def _field_in_utc(value: datetime) -> datetime:
    try:
        return to_utc_ms(value)
    except OverflowError:  # year 1 east of UTC, or year 9999 west of it: no datetime holds it in UTC
        raise ValueError(f"{value.isoformat()} is not a time in UTC (before year 1 or after 9999)") from None


UtcDatetime = Annotated[datetime, AfterValidator(_field_in_utc)]
"""A datetime field that always holds aware UTC with millisecond precision (one no datetime can hold in UTC
is refused as invalid, as any other bad value)."""

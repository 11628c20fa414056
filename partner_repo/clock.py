"""Time as BSON keeps it: timezone-aware UTC, millisecond precision.

Every datetime the library stores or returns goes through :func:`to_utc_ms`, so a value read back equals the
value written, whatever the backend (Motor with ``tz_aware=False`` or mongomock return naive UTC).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator


def to_utc_ms(value: datetime) -> datetime:
    """Return ``value`` as aware UTC truncated to milliseconds; a naive value is taken to be UTC."""
    if value.tzinfo is None:  # as the driver decodes stored times: one copy (this runs for every slice read)
        return value.replace(tzinfo=UTC, microsecond=value.microsecond - value.microsecond % 1000)
    value = value.astimezone(UTC)
    return value.replace(microsecond=value.microsecond - value.microsecond % 1000)


def utc_now() -> datetime:
    """The current time, already in stored precision."""
    return to_utc_ms(datetime.now(UTC))


UtcDatetime = Annotated[datetime, AfterValidator(to_utc_ms)]
"""A datetime field that always holds aware UTC with millisecond precision."""

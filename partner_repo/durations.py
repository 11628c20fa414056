"""Durations as people write them, read the same way by every setting and every command-line option.

Seconds (``90``, ``2.5``), ISO 8601 durations (``PT30M``, ``P1DT2H``; the designators in either case) or
``[D day[s], ]HH:MM:SS`` (``1:30:00``): what pydantic accepts for a ``timedelta``, plus seconds as text.
"""

from __future__ import annotations

import re
from datetime import timedelta

from pydantic import TypeAdapter, ValidationError

DURATION_FORMS = "seconds (90, 2.5), ISO 8601 (PT30M) or HH:MM:SS"
"""The forms :func:`parse_duration` accepts, as error messages name them."""

_SECONDS = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")
_ISO_8601 = re.compile(r"[+-]?P", re.IGNORECASE)
_TIMEDELTA: TypeAdapter[timedelta] = TypeAdapter(timedelta)


def parse_duration(value: object) -> timedelta:
    """``value`` as a :class:`~datetime.timedelta`, or :class:`ValueError` naming the accepted forms.

    The value is not quoted in the error: a setting's value is not echoed (see :func:`load_settings`).
    """
    if isinstance(value, str):
        value = value.strip()
        if _SECONDS.fullmatch(value):
            value = float(value)
        elif _ISO_8601.match(value):
            value = value.upper()
    if isinstance(value, bool):
        raise ValueError(f"not a duration: give {DURATION_FORMS}")
    try:
        return _TIMEDELTA.validate_python(value)
    except ValidationError:
        raise ValueError(f"not a duration: give {DURATION_FORMS}") from None


__all__ = ["DURATION_FORMS", "parse_duration"]

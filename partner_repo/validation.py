"""Checking caller input at the public boundary, once, before anything is written.

Every refusal is an :class:`InvalidInput` (a ``PartnerRepoError``) that names what was wrong; pydantic's
validation error is kept as the cause. A public entry point checks what it is given; what it hands on inside
the library is trusted. Where one public call goes through another's write (a service's turn through the
core repository's), the checked value travels as a type of its own (:class:`Turn`), so the second door
does not check it again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter, ValidationError

from partner_repo.clock import to_utc_ms
from partner_repo.encoding import require_encodable
from partner_repo.errors import InvalidInput
from partner_repo.models import MAX_ID_LENGTH, Message

_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


def require_id(value: object, what: str) -> str:
    """A non-blank, storable string id of at most :data:`~partner_repo.models.MAX_ID_LENGTH` characters, or
    :class:`InvalidInput` (every id the API accepts must fit in a page cursor: each one is checked here)."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InvalidInput(f"{what} must not be empty or blank")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidInput(f"{what} must be at most {MAX_ID_LENGTH} characters, got {len(value)}")
    return require_encodable(value, what)


def optional_id(value: object, what: str) -> str | None:
    """None, or an id as :func:`require_id` accepts it."""
    return None if value is None else require_id(value, what)


def id_problem(value: object, what: str) -> str | None:
    """Why ``value`` is not an acceptable id (:func:`require_id`'s message), or None when it is one."""
    try:
        require_id(value, what)
    except InvalidInput as exc:
        return str(exc)
    return None


def require_count(value: object, what: str) -> int:
    """A non-negative int, or :class:`InvalidInput`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{what} must be an integer, got {type(value).__name__}")
    if value < 0:
        raise InvalidInput(f"{what} must not be negative, got {value}")
    return value


def parse_messages(messages: object, *, allow_empty: bool = True) -> list[Message]:
    """Messages given as :class:`Message` or ``{"role", "content"}`` mappings, validated as a whole."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Iterable):
        raise InvalidInput("messages must be a list of messages")
    items: list[Any] = [m.model_dump() if isinstance(m, Message) else m for m in messages]
    for position, item in enumerate(items):
        if item is None:
            raise InvalidInput(f"message {position} is None")
    try:
        parsed = _MESSAGES.validate_python(items)
    except ValidationError as exc:
        raise InvalidInput(f"invalid message: {first_error(exc)}") from exc
    if not parsed and not allow_empty:
        raise InvalidInput("messages must not be empty")
    for position, message in enumerate(parsed):
        require_encodable(message.content, f"the content of message {position}")
    return parsed


def optional_datetime(value: object, what: str) -> datetime | None:
    """None, or ``value`` as aware UTC at millisecond precision (:func:`~partner_repo.clock.to_utc_ms`)."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInput(f"{what} must be a datetime, got {type(value).__name__}")
    try:
        return to_utc_ms(value)
    except OverflowError:  # year 1 east of UTC, or year 9999 west of it: no datetime holds it in UTC
        raise InvalidInput(
            f"{what} {value.isoformat()} is not a time in UTC (before year 1 or after 9999)"
        ) from None


EARLIEST_RECORDED = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_RECORDED = datetime(9000, 1, 1, tzinfo=UTC)
"""The times a conversation's events may carry (a turn, a roll, a slice): from the Unix epoch (Partner's own
times are milliseconds since it) to well before the end of ``datetime``'s range, so that the arithmetic done
with them (an idle threshold subtracted, a lease added) never leaves it. Go's and .NET's zero time
(``0001-01-01T00:00:00Z``), which a host sends for "unset", is refused rather than stored."""


def optional_recorded_time(value: object, what: str) -> datetime | None:
    """None, or ``value`` as :func:`optional_datetime` gives it, when it is a time a conversation's event may
    carry (:data:`EARLIEST_RECORDED` to :data:`LATEST_RECORDED`); else :class:`InvalidInput`."""
    stamp = optional_datetime(value, what)
    if stamp is not None and not EARLIEST_RECORDED <= stamp < LATEST_RECORDED:
        raise InvalidInput(
            f"{what} {stamp.isoformat()} is not a time of a conversation (from 1970 to 8999); a zero time "
            "usually means 'unset': leave it out and the time of recording is used"
        )
    return stamp


def first_error(exc: ValidationError) -> str:
    """pydantic's first complaint, as ``location: message``."""
    first = exc.errors()[0]
    location = ".".join(str(part) for part in first["loc"])
    return f"{location}: {first['msg']}" if location else str(first["msg"])


@dataclass(frozen=True)
class Turn:
    """A turn as the public entry points take it, checked: the core it goes to, its messages, their time.

    Made by :meth:`checked` (the one place a turn is validated); the writes that take a ``Turn``
    (``MemoryCoreRepository.record_turn``) trust it.
    """

    core_id: str
    messages: list[Message]
    at: datetime | None

    @classmethod
    def checked(cls, core_id: object, messages: object, at: object) -> Turn:
        """The turn, or :class:`InvalidInput` for the first thing wrong with it (the core id, a message, the
        time)."""
        core = require_id(core_id, "core_id")
        return cls(core, parse_messages(messages), optional_recorded_time(at, "at"))

"""What each tool takes: one pydantic model per tool, its JSON Schema the tool's ``inputSchema``.

The models are the boundary: a call's arguments are validated here once (:func:`parse_arguments`), and a
refusal is one :class:`~partner_repo.errors.InvalidInput` line naming the argument, never pydantic's
multi-line report, so an agent reads what to change. What the library checks on its own (a message's
``name`` length, storable text, a core id's limits) is checked again where it always is: the services.

Times are ISO 8601 strings (``2026-11-16``, ``2026-11-16T09:30Z``, ``...+08:00``), UTC unless they carry an
offset, as on the command line. A client that sends ``messages`` as a JSON string holding the list (some
hosts encode every array argument that way) is read as if it had sent the list.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
    WithJsonSchema,
)

from partner_repo.clock import to_utc_ms
from partner_repo.errors import InvalidInput
from partner_repo.models import MAX_ID_LENGTH, Role
from partner_repo.recall import MAX_LIMIT, MAX_MESSAGES
from partner_repo.validation import first_error

MAX_CONTEXT_SLICES = 50
"""The most summaries ``context`` returns: a prompt's worth, not an export (``partner-repo slices list``)."""

A = TypeVar("A", bound="ToolArguments")


def _when(value: object) -> object:
    """An ISO 8601 date or date-time string as aware UTC (UTC when it names no offset)."""
    if not isinstance(value, str):
        return value  # strict validation refuses it with the type it has
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"{value!r} is not an ISO 8601 date or date-time (e.g. 2026-11-16T09:30Z)") from None
    try:
        return to_utc_ms(parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC))
    except OverflowError:  # year 1 east of UTC: no datetime holds it in UTC
        raise ValueError(f"{value!r} is not a time in UTC (before year 1)") from None


def _json_list(value: object) -> object:
    """A list sent as a JSON string (``"[{...}]"``) is the list; any other string stays one, to be refused."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


Timestamp = Annotated[
    datetime,
    BeforeValidator(_when),
    WithJsonSchema(
        {
            "type": "string",
            "description": "ISO 8601 date or date-time, UTC unless it has an offset (2026-11-16T09:30Z)",
        }
    ),
]
CoreId = Annotated[
    StrictStr,
    Field(
        min_length=1,
        max_length=MAX_ID_LENGTH,
        description="The agent's memory core (one per agent or user): the id the memory is kept under.",
    ),
]


class ToolArguments(BaseModel):
    """Strict JSON types, no unknown argument: a typo in an argument's name is an error, not ignored."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class MessageArgument(BaseModel):
    """One message of a turn, as an agent has it."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    role: Role
    content: StrictStr
    name: Annotated[
        StrictStr | None,
        Field(description="The speaker (a user's name), or the tool a tool message answers for."),
    ] = None


class RecordTurnArguments(ToolArguments):
    core_id: CoreId
    messages: Annotated[
        list[MessageArgument],
        BeforeValidator(_json_list),
        Field(min_length=1, description="The turn's messages, in order: usually the user's, then yours."),
    ]
    at: Annotated[
        Timestamp | None,
        Field(description="When the turn happened (default: now), for transcripts replayed."),
    ] = None


class RecallArguments(ToolArguments):
    core_id: CoreId
    query: Annotated[
        StrictStr,
        Field(description="What to remember, in the user's words; dates such as 'last week' or 上周 count."),
    ]
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, description="The most slices (memories) returned.")] = 5
    max_messages: Annotated[
        int, Field(ge=1, le=MAX_MESSAGES, description="The most raw messages over all slices returned.")
    ] = 20
    since: Annotated[
        Timestamp | None, Field(description="Only memories of conversations that went on at or after this.")
    ] = None
    until: Annotated[
        Timestamp | None, Field(description="Only memories of conversations that began before this.")
    ] = None


class ContextArguments(ToolArguments):
    core_id: CoreId
    slices: Annotated[
        int,
        Field(
            ge=0,
            le=MAX_CONTEXT_SLICES,
            description="How many of the latest summaries come before the window.",
        ),
    ] = 3


class TopicsArguments(ToolArguments):
    core_id: CoreId


class ForgetArguments(ToolArguments):
    core_id: CoreId
    confirm: Annotated[
        StrictBool,
        Field(description="true erases; false (the default) only counts what would be erased."),
    ] = False


def parse_arguments(model: type[A], arguments: dict[str, Any] | None) -> A:
    """``arguments`` as ``model``, or :class:`InvalidInput` naming the first problem on one line."""
    try:
        return model.model_validate(arguments or {})
    except ValidationError as exc:
        problem = first_error(exc).replace("Value error, ", "")
        raise InvalidInput(f"invalid arguments: {problem}") from None


def input_schema(model: type[ToolArguments]) -> dict[str, Any]:
    """The tool's ``inputSchema``: the model's JSON Schema (2020-12, an object at the root)."""
    return model.model_json_schema()


__all__ = [
    "MAX_CONTEXT_SLICES",
    "ContextArguments",
    "ForgetArguments",
    "MessageArgument",
    "RecallArguments",
    "RecordTurnArguments",
    "ToolArguments",
    "TopicsArguments",
    "input_schema",
    "parse_arguments",
]

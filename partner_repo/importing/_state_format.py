"""Reading one Partner unit object (a ``memory-unit<ID>.json``) into a :class:`MemoryUnit`, item by item.

Whatever Partner's own loader would skip is skipped here too, and so is what could never be stored: text that
is not valid Unicode (a lone surrogate, half of an emoji, which JSON can spell ``"\\ud83d"``) and a timestamp
that is no time (NaN, Infinity, a number past the years 1-9999). Each skip is an :class:`ImportIssue` naming
the file, the item and why, so one bad value costs that value, never the import.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from partner_repo.clock import to_utc_ms
from partner_repo.encoding import require_encodable, storable_json_object
from partner_repo.errors import InvalidInput
from partner_repo.models import MemorySlice, MemoryUnit, Message
from partner_repo.normalization import new_slice_id
from partner_repo.rolling import SUMMARY_ON_EXCEPTION
from partner_repo.validation import id_problem

MEMORY_JSON = Path("core") / "memory.json"
UNITS_DIR = Path("core") / "memory"
UNIT_PREFIX = "memory-unit"
ROLES = ("user", "assistant", "system", "tool")
MESSAGE_TIME_FIELDS = ("timestamp", "created_timestamp")
"""Where a Partner message may carry its time (epoch milliseconds); the first one present is taken."""
SLICE_FIELDS = ("id", "start_index", "end_index", "summary", "created_timestamp")
UNIT_FIELDS = ("id", "update_timestamp", "conversation_messages", "memory_slices")
"""The keys of a Partner unit object; any other key is reported (``ImportReport.unknown_keys``), ignored."""
CORE_FIELDS = ("memory_session_id", "memory_unit_uuid_set")
"""The keys of ``core/memory.json``; any other key is reported and ignored."""

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FIRST_MS = -62_135_596_800_000
"""0001-01-01T00:00:00Z in epoch milliseconds: the earliest time a datetime holds."""
LAST_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z in epoch milliseconds: the latest."""
SHOWN = 32
"""How many characters of a bad value a reason quotes."""


class ImportIssue(BaseModel):
    """Something the import skipped or wants you to know: the file (relative to the state directory), the
    item in it (``file``, ``unit``, ``message 3``, ``slice 0``...) and why."""

    file: str
    item: str
    reason: str


def partner_unit(
    data: Mapping[str, Any], unit_id: str, core_id: str, name: str, issues: list[ImportIssue]
) -> MemoryUnit:
    """A unit from a Partner unit object, before normalization. Skipped messages, slices and values are added
    to ``issues`` (notes about the whole unit have ``item == "unit"``).

    Slice indexes refer to positions in the file; when messages are skipped they are shifted so each slice
    still covers the same (kept) messages it summarised.
    """
    stated_id = data.get("id")
    if stated_id is not None and stated_id != unit_id:
        issues.append(
            ImportIssue(
                file=name,
                item="unit",
                reason=f"its id field is {stated_id!r}; stored under the file name's id {unit_id!r}, "
                "as Partner loads it",
            )
        )
    raw_messages = _list_field(data, "conversation_messages", name, issues)
    messages: list[Message] = []
    kept_before = [0]
    for position, raw in enumerate(raw_messages):
        message = _message(raw, f"message {position}", name, issues)
        if message is not None:
            messages.append(message)
        kept_before.append(len(messages))
    skipped = len(raw_messages) - len(messages)
    slices: list[MemorySlice | None] = []
    for position, raw in enumerate(_list_field(data, "memory_slices", name, issues)):
        piece = _slice(raw, f"slice {position}", name, issues)
        if piece is not None:
            piece.start_index = _shifted(piece.start_index, kept_before)
            piece.end_index = _shifted(piece.end_index, kept_before)
            slices.append(piece)
    if skipped and slices:
        issues.append(
            ImportIssue(
                file=name,
                item="unit",
                reason=f"{skipped} skipped message(s): slice indexes shifted to the kept messages",
            )
        )
    try:
        updated_at = epoch_ms(data.get("update_timestamp"), "update_timestamp")
    except InvalidInput as exc:
        reason = f"{exc}; the file's modification time is used instead"
        issues.append(ImportIssue(file=name, item="update_timestamp", reason=reason))
        updated_at = None
    return MemoryUnit(
        id=unit_id, core_id=core_id, conversation_messages=messages, slices=slices, updated_at=updated_at
    )


def state_directory_problem(path: str | Path) -> str | None:
    """Why ``path`` is no Partner state directory (not a directory, or no ``core/memory.json`` in it), or
    ``None``. The library imports such a directory anyway (what it finds, reported); ``import-state``
    refuses it, as it is most likely the wrong directory."""
    root = Path(path)
    if not root.is_dir():
        return f"{printable(str(path))} is not a directory"
    if not (root / MEMORY_JSON).is_file():
        return f"{printable(str(path))} is not a Partner state directory (it has no {MEMORY_JSON.as_posix()})"
    return None


def unknown_keys(data: Mapping[str, Any], known: tuple[str, ...]) -> list[str]:
    """The keys of ``data`` that are not part of Partner's format (``known``), in the file's order, printable:
    a unit whose slices sit under ``"slices"`` rather than ``"memory_slices"`` has the unknown key ``slices``
    (and no slices)."""
    return [printable(str(key)) for key in data if key not in known]


def epoch_ms(value: Any, what: str) -> datetime | None:
    """Epoch milliseconds as a datetime. Absent, not a number, or <= 0 is missing (``None``), as in Partner;
    a number that is no time at all (NaN, +-Infinity, outside the years 1-9999) is :class:`InvalidInput`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if (isinstance(value, float) and not math.isfinite(value)) or not FIRST_MS <= value <= LAST_MS:
        raise InvalidInput(
            f"{what} {_shown(value)} is not a time (epoch milliseconds within the years 1-9999)"
        )
    if value <= 0:
        return None
    return to_utc_ms(EPOCH + timedelta(milliseconds=value))


def printable(text: str) -> str:
    """``text`` with what cannot be encoded (lone surrogates, undecodable file name bytes) escaped."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _shown(value: int | float) -> str:
    text = json.dumps(value)  # as the file spells it: NaN, Infinity, 1e+300
    return text if len(text) <= SHOWN else f"{text[: SHOWN // 2]}... ({len(text)} digits)"


def _shown_value(value: Any) -> str:
    """Any JSON value as the file spells it, cut to :data:`SHOWN` characters."""
    text = json.dumps(value, ensure_ascii=False)
    return printable(text if len(text) <= SHOWN else f"{text[: SHOWN - 1]}…")


def _list_field(data: Mapping[str, Any], field: str, name: str, issues: list[ImportIssue]) -> list[Any]:
    value = data.get(field)
    if value is None:
        return []
    if not isinstance(value, list):
        issues.append(ImportIssue(file=name, item=field, reason=f"not a list (a {type(value).__name__})"))
        return []
    return value


def _message(raw: Any, item: str, name: str, issues: list[ImportIssue]) -> Message | None:
    if not isinstance(raw, dict):
        issues.append(ImportIssue(file=name, item=item, reason="not an object"))
        return None
    role, content = raw.get("role"), raw.get("content")
    if role is None or content is None:
        lacking = " and ".join(f for f, v in (("role", role), ("content", content)) if v is None)
        issues.append(ImportIssue(file=name, item=item, reason=f"no {lacking}"))
        return None
    if role not in ROLES:
        issues.append(ImportIssue(file=name, item=item, reason=f"unknown role {role!r}"))
        return None
    if not isinstance(content, str):
        issues.append(ImportIssue(file=name, item=item, reason=f"content is a {type(content).__name__}"))
        return None
    try:
        require_encodable(content, "content")
    except InvalidInput as exc:
        issues.append(ImportIssue(file=name, item=item, reason=str(exc)))
        return None
    return Message(role=role, content=content, **_message_extras(raw, item, name, issues))


def _message_extras(
    raw: Mapping[str, Any], item: str, name: str, issues: list[ImportIssue]
) -> dict[str, Any]:
    """What a message carries besides role and content: ``name``, ``tool_call_id``, ``metadata`` and its time
    (``timestamp`` or ``created_timestamp``, epoch milliseconds as Partner writes times). A value that cannot
    be stored is dropped and noted; the message is kept."""
    extras: dict[str, Any] = {}
    for field in ("name", "tool_call_id"):
        value = raw.get(field)
        if value is not None and (problem := id_problem(value, field)) is not None:
            issues.append(ImportIssue(file=name, item=item, reason=f"{problem}; imported without it"))
        elif value is not None:
            extras[field] = value
    if raw.get("metadata") is not None:
        try:
            extras["metadata"] = storable_json_object(raw["metadata"], "metadata")
        except InvalidInput as exc:
            issues.append(ImportIssue(file=name, item=item, reason=f"{exc}; imported without it"))
    at, unreadable = message_time(raw)
    if at is not None:
        extras["at"] = at
    elif unreadable is not None:
        issues.append(ImportIssue(file=name, item=item, reason=f"{unreadable}; imported without a time"))
    return extras


def message_time(raw: Mapping[str, Any]) -> tuple[datetime | None, str | None]:
    """A message's time, from the first of :data:`MESSAGE_TIME_FIELDS` that holds a readable one; without
    one, why a field that holds something could not be read (``None`` when none holds anything: absent,
    null, or Partner's ``<= 0`` for unset), so no unreadable time is dropped unsaid."""
    unreadable: list[str] = []
    for field in MESSAGE_TIME_FIELDS:
        value = raw.get(field)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            unreadable.append(f"{field} {_shown_value(value)} is not a time (epoch milliseconds, a number)")
            continue
        try:
            at = epoch_ms(value, field)
        except InvalidInput as exc:
            unreadable.append(str(exc))
            continue
        if at is not None:
            return at, None
    return None, "; ".join(unreadable) or None


def _slice(raw: Any, item: str, name: str, issues: list[ImportIssue]) -> MemorySlice | None:
    if not isinstance(raw, dict):
        issues.append(ImportIssue(file=name, item=item, reason="not an object"))
        return None
    lacking = [field for field in SLICE_FIELDS if raw.get(field) is None]
    if lacking:
        issues.append(ImportIssue(file=name, item=item, reason=f"missing {', '.join(lacking)}"))
        return None
    slice_id, start, end = raw["id"], raw["start_index"], raw["end_index"]
    summary, created = raw["summary"], raw["created_timestamp"]
    wrong = [
        field
        for field, ok in (
            ("id", isinstance(slice_id, str)),
            ("start_index", _is_int(start)),
            ("end_index", _is_int(end)),
            ("summary", isinstance(summary, str)),
            ("created_timestamp", _is_int(created) or isinstance(created, float)),
        )
        if not ok
    ]
    if wrong:
        issues.append(ImportIssue(file=name, item=item, reason=f"wrong type for {', '.join(wrong)}"))
        return None
    try:
        require_encodable(slice_id, "id")
        require_encodable(summary, "summary")
        created_at = epoch_ms(created, "created_timestamp")
    except InvalidInput as exc:
        issues.append(ImportIssue(file=name, item=item, reason=str(exc)))
        return None
    if slice_id.strip() and (problem := id_problem(slice_id, "its id")) is not None:
        slice_id = new_slice_id()
        issues.append(
            ImportIssue(file=name, item="unit", reason=f"{item}: {problem}; stored as {slice_id!r}")
        )
    unsummarized = summary == SUMMARY_ON_EXCEPTION  # Partner's placeholder: resummarize replaces it
    return MemorySlice(
        id=slice_id,
        start_index=start,
        end_index=end,
        summary=summary,
        created_at=created_at,
        unsummarized=unsummarized,
    )


def _shifted(index: int | None, kept_before: list[int]) -> int | None:
    """A file position mapped onto the kept messages; out-of-range positions stay out of range."""
    if index is None or index <= 0:
        return index
    last = len(kept_before) - 1
    return kept_before[min(index, last)] + max(index - last, 0)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


__all__ = [
    "CORE_FIELDS",
    "UNIT_FIELDS",
    "ImportIssue",
    "epoch_ms",
    "message_time",
    "partner_unit",
    "printable",
    "state_directory_problem",
    "unknown_keys",
]

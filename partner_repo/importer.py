"""Import of Partner's on-disk memory (its state directory) into MongoDB.

Partner keeps ``core/memory.json`` (the current session id and the set of unit ids) and one
``core/memory/memory-unit<ID>.json`` per unit. Everything that can be imported is: a broken file, a unit
listed without a file, a message or slice Partner's own loader would skip are reported (file and reason),
never fatal. Units already in the database are left exactly as they are, so running the import again
changes nothing and reports 0 new. Files are read one at a time, so memory does not grow with the directory.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from partner_repo.admin.inspection import normalization_violations
from partner_repo.clock import to_utc_ms
from partner_repo.cores import DEFAULT_CORE_ID, MemoryCoreRepository
from partner_repo.database import MongoDatabase
from partner_repo.errors import ConflictError, DuplicateSliceId, InvalidInput, UnitTooLarge
from partner_repo.models import MemorySlice, MemoryUnit, Message
from partner_repo.normalization import new_slice_id, normalize_unit
from partner_repo.units import MemoryUnitRepository
from partner_repo.validation import id_problem, require_id

MEMORY_JSON = Path("core") / "memory.json"
UNITS_DIR = Path("core") / "memory"
UNIT_PREFIX = "memory-unit"
ROLES = ("user", "assistant", "system")
SLICE_FIELDS = ("id", "start_index", "end_index", "summary", "created_timestamp")

Progress = Callable[[int, int], None]
"""Called after each unit file with (files done, files in total)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class ImportIssue(BaseModel):
    """Something the import skipped or wants you to know: the file (relative to the state directory), the
    item in it (``file``, ``unit``, ``message 3``, ``slice 0``...) and why."""

    file: str
    item: str
    reason: str


class ImportReport(BaseModel):
    """What an import did. ``units_imported`` is what was new; units already stored count as unchanged."""

    core_id: str
    units_imported: int = 0
    messages_imported: int = 0
    slices_imported: int = 0
    units_unchanged: int = 0
    session_id: str | None = None
    session_set: bool = False
    skipped: list[ImportIssue] = []
    warnings: list[ImportIssue] = []

    @property
    def new(self) -> int:
        return self.units_imported


async def import_partner_state(
    path: str | Path,
    database: MongoDatabase,
    *,
    core_id: str = DEFAULT_CORE_ID,
    progress: Progress | None = None,
) -> ImportReport:
    """Import Partner's state directory ``path`` into ``core_id``; see the module docstring for the rules.

    Raises :class:`InvalidInput` only when ``path`` is not a directory; every other problem is reported.
    """
    root = Path(path)
    if not await asyncio.to_thread(root.is_dir):
        raise InvalidInput(f"{path} is not a directory (expected Partner's state directory)")
    core_id = require_id(core_id, "core_id")
    report = ImportReport(core_id=core_id)
    session_id, listed = await asyncio.to_thread(_read_memory_json, root, report)
    files = await asyncio.to_thread(_unit_files, root)
    missing = [unit_id for unit_id in dict.fromkeys(listed or []) if unit_id not in files]
    for unit_id in missing:
        report.skipped.append(
            ImportIssue(
                file=_relative(_unit_path(root, unit_id), root),
                item="unit",
                reason="listed in core/memory.json but the file does not exist",
            )
        )
    units = MemoryUnitRepository(database)
    total = len(files)
    for done, (unit_id, file) in enumerate(sorted(files.items()), 1):
        if listed is not None and unit_id not in listed:
            report.warnings.append(
                ImportIssue(
                    file=_relative(file, root),
                    item="unit",
                    reason="not listed in core/memory.json (memory_unit_uuid_set); imported anyway",
                )
            )
        await _import_file(units, root, file, unit_id, core_id, report)
        if progress is not None:
            progress(done, total)
    if session_id is not None:
        await _adopt_session(database, units, core_id, session_id, report)
    return report


# -- reading the state directory -------------------------------------------------------------------------


def _read_memory_json(root: Path, report: ImportReport) -> tuple[str | None, list[str] | None]:
    """Partner's session id and unit set; (None, None) with a report when the file is missing or broken."""
    name = MEMORY_JSON.as_posix()
    data = _load_object(root / MEMORY_JSON, name, report)
    if data is None:
        return None, None
    session = data.get("memory_session_id")
    if (problem := id_problem(session, "it")) is not None:
        usable = isinstance(session, str) and session.strip()
        reason = problem if usable else "missing or not a non-blank string"
        report.skipped.append(ImportIssue(file=name, item="memory_session_id", reason=reason))
        session = None
    raw = data.get("memory_unit_uuid_set")
    if not isinstance(raw, list):
        report.skipped.append(
            ImportIssue(file=name, item="memory_unit_uuid_set", reason="missing or not a list")
        )
        return session, None
    listed: list[str] = []
    for position, entry in enumerate(raw):
        if id_problem(entry, "it") is None:
            listed.append(entry)
        else:
            report.skipped.append(
                ImportIssue(
                    file=name, item=f"memory_unit_uuid_set[{position}]", reason=f"not a unit id: {entry!r}"
                )
            )
    return session, listed


def _unit_files(root: Path) -> dict[str, Path]:
    """``memory-unit<ID>.json`` files by unit id (the id follows the prefix directly)."""
    directory = root / UNITS_DIR
    if not directory.is_dir():
        return {}
    files: dict[str, Path] = {}
    for file in directory.iterdir():
        if file.name.startswith(UNIT_PREFIX) and file.name.endswith(".json") and file.is_file():
            files[file.name[len(UNIT_PREFIX) : -len(".json")]] = file
    return files


def _unit_path(root: Path, unit_id: str) -> Path:
    return root / UNITS_DIR / f"{UNIT_PREFIX}{unit_id}.json"


def _load_object(file: Path, name: str, report: ImportReport) -> dict[str, Any] | None:
    if not file.is_file():
        report.skipped.append(ImportIssue(file=name, item="file", reason="does not exist"))
        return None
    try:
        data = json.loads(file.read_bytes())
    except json.JSONDecodeError as exc:
        report.skipped.append(
            ImportIssue(file=name, item="file", reason=f"invalid JSON: {exc.msg} (line {exc.lineno})")
        )
        return None
    except (OSError, UnicodeDecodeError) as exc:
        report.skipped.append(ImportIssue(file=name, item="file", reason=f"cannot be read: {exc}"))
        return None
    if not isinstance(data, dict):
        report.skipped.append(
            ImportIssue(file=name, item="file", reason=f"not a JSON object (a {type(data).__name__})")
        )
        return None
    return data


# -- one unit ----------------------------------------------------------------------------------------------


async def _import_file(
    units: MemoryUnitRepository, root: Path, file: Path, unit_id: str, core_id: str, report: ImportReport
) -> None:
    name = _relative(file, root)
    if (refusal := id_problem(unit_id, "the unit id of the file name")) is not None:
        report.skipped.append(ImportIssue(file=name, item="unit", reason=refusal))
        return
    data, modified_at = await asyncio.to_thread(_read_unit_file, file, name, report)
    if data is None:
        return
    issues: list[ImportIssue] = []
    unit = partner_unit(data, unit_id, core_id, name, issues)
    report.skipped += [i for i in issues if i.item != "unit"]
    report.warnings += [i for i in issues if i.item == "unit"]
    existing = await units.get(unit_id)
    if existing is not None:
        report.units_unchanged += 1
        if existing.core_id != core_id or not _same_content(existing, normalize_unit(unit, now=modified_at)):
            where = f"core {existing.core_id!r}" if existing.core_id != core_id else "the database"
            report.warnings.append(
                ImportIssue(
                    file=name,
                    item="unit",
                    reason=f"already in {where} with different content; left unchanged "
                    "(delete the stored unit to import the file again)",
                )
            )
        return
    for problem in normalization_violations(unit):
        report.warnings.append(ImportIssue(file=name, item="unit", reason=f"normalized: {problem.detail}"))
    stored = await _save(units, unit, modified_at, name, report)
    if stored is not None:
        report.units_imported += 1
        report.messages_imported += len(stored.conversation_messages)
        report.slices_imported += len(stored.complete_slices())


async def _save(
    units: MemoryUnitRepository, unit: MemoryUnit, now: datetime, name: str, report: ImportReport
) -> MemoryUnit | None:
    """Insert the unit; a slice id another unit already uses is replaced by a fresh one (and reported)."""
    for _ in range(len(unit.slices) + 1):
        try:
            return await units.save(unit, now=now)
        except DuplicateSliceId as exc:
            fresh = new_slice_id()
            for piece in unit.slices:
                if piece is not None and piece.id == exc.slice_id:
                    piece.id = fresh
            report.warnings.append(
                ImportIssue(
                    file=name,
                    item="unit",
                    reason=f"slice id {exc.slice_id!r} is already used by another unit; stored as {fresh!r}",
                )
            )
        except UnitTooLarge as exc:
            report.skipped.append(ImportIssue(file=name, item="unit", reason=str(exc)))
            return None
        except ConflictError:
            report.units_unchanged += 1
            report.warnings.append(
                ImportIssue(
                    file=name, item="unit", reason="created concurrently by another writer; left as is"
                )
            )
            return None
    report.skipped.append(ImportIssue(file=name, item="unit", reason="its slice ids kept colliding"))
    return None


def partner_unit(
    data: Mapping[str, Any], unit_id: str, core_id: str, name: str, issues: list[ImportIssue]
) -> MemoryUnit:
    """A unit from a Partner unit object, before normalization. Skipped messages and slices are added to
    ``issues`` (notes about the whole unit have ``item == "unit"``).

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
    return MemoryUnit(
        id=unit_id,
        core_id=core_id,
        conversation_messages=messages,
        slices=slices,
        updated_at=_timestamp(data.get("update_timestamp")),
    )


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
    return Message(role=role, content=content)


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
    created_at = _timestamp(created)
    if created > 0 and created_at is None:
        issues.append(
            ImportIssue(file=name, item=item, reason=f"created_timestamp {created} is out of range")
        )
        return None
    if slice_id.strip() and (problem := id_problem(slice_id, "its id")) is not None:
        slice_id = new_slice_id()
        issues.append(
            ImportIssue(file=name, item="unit", reason=f"{item}: {problem}; stored as {slice_id!r}")
        )
    return MemorySlice(id=slice_id, start_index=start, end_index=end, summary=summary, created_at=created_at)


def _shifted(index: int | None, kept_before: list[int]) -> int | None:
    """A file position mapped onto the kept messages; out-of-range positions stay out of range."""
    if index is None or index <= 0:
        return index
    last = len(kept_before) - 1
    return kept_before[min(index, last)] + max(index - last, 0)


def _timestamp(value: Any) -> datetime | None:
    """Epoch milliseconds as a datetime; missing, non-numeric or <= 0 counts as missing (as in Partner)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    try:
        return to_utc_ms(_EPOCH + timedelta(milliseconds=value))
    except OverflowError:
        return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _read_unit_file(file: Path, name: str, report: ImportReport) -> tuple[dict[str, Any] | None, datetime]:
    """The unit object and when Partner last wrote the file (the update time of a unit without one)."""
    data = _load_object(file, name, report)
    modified_at = to_utc_ms(datetime.fromtimestamp(file.stat().st_mtime, UTC)) if data is not None else _EPOCH
    return data, modified_at


def _same_content(stored: MemoryUnit, imported: MemoryUnit) -> bool:
    def intervals(unit: MemoryUnit) -> list[tuple[str, int | None, int | None]]:
        return sorted((s.summary, s.start_index, s.end_index) for s in unit.complete_slices())

    return stored.conversation_messages == imported.conversation_messages and intervals(stored) == intervals(
        imported
    )


async def _adopt_session(
    database: MongoDatabase, units: MemoryUnitRepository, core_id: str, session_id: str, report: ImportReport
) -> None:
    """Make Partner's current session the core's, unless the core already records into its own session."""
    cores = MemoryCoreRepository(database)
    report.session_id = session_id
    core = await cores.get(core_id)
    if core is None:
        report.session_set = await cores.set_session(core_id, session_id)
    elif core.memory_session_id == session_id:
        return
    elif await units.head(core.memory_session_id) is None:
        report.session_set = await cores.set_session(core_id, session_id, expected=core.memory_session_id)
    if not report.session_set and core is not None and core.memory_session_id != session_id:
        report.warnings.append(
            ImportIssue(
                file=MEMORY_JSON.as_posix(),
                item="memory_session_id",
                reason=f"core {core_id!r} already records into session {core.memory_session_id!r}; "
                f"kept it instead of {session_id!r}",
            )
        )


def _relative(file: Path, root: Path) -> str:
    try:
        return file.relative_to(root).as_posix()
    except ValueError:
        return file.as_posix()


__all__ = ["ImportIssue", "ImportReport", "import_partner_state", "partner_unit"]

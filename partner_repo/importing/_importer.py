"""Import of Partner's on-disk memory (its state directory) into MongoDB.

Partner keeps ``core/memory.json`` (the current session id and the set of unit ids) and one
``core/memory/memory-unit<ID>.json`` per unit. Everything that can be imported is: a broken file, a unit
listed without a file, a message or slice Partner's own loader would skip, text that is not valid Unicode, a
timestamp that is no time are reported (file, item and reason), never fatal; whatever else one file's content
raises is reported for that file too (:data:`CONTENT_ERRORS`), while a database error stops the import.
Units already in the database are left exactly as they are, so running the import again changes nothing and
reports 0 new. Files are read one at a time, so memory does not grow with the directory.

Into a second core: a unit belongs to one core (its ``core_id``), and a core whose session is another
core's unit can never roll (every append there is refused). So before an import writes anything it looks up
the state's unit ids (the unit files and the current session): one stored under another core refuses the
import, naming that core. Asked for a copy instead (``import-state --as-copy``, ``as_copy=True``), every unit
id, the session and every slice id get new ids derived from the core and the original id (UUID5), so a copy
imported again under the same core finds its units present and changes nothing.

The last step adopts the state's current session as the core's: a core that already records into a session
of its own keeps it (reported); one whose session has no unit yet takes Partner's, with a compare-and-set on
the session it had. A clear's reservation under the core's session is a unit here too: the core keeps that
session, or the mark the reservation fences with would be lost.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from bson.errors import InvalidDocument
from pydantic import BaseModel

from partner_repo.admin import normalization_violations
from partner_repo.callables import Progress
from partner_repo.clock import to_utc_ms
from partner_repo.cores import DEFAULT_CORE_ID, MemoryCoreRepository
from partner_repo.encoding import require_encodable
from partner_repo.errors import ConflictError, DuplicateSliceId, InvalidInput, UnitOfAnotherCore, UnitTooLarge
from partner_repo.importing._state_format import (
    CORE_FIELDS,
    EPOCH,
    MEMORY_JSON,
    UNIT_FIELDS,
    UNIT_PREFIX,
    UNITS_DIR,
    ImportIssue,
    partner_unit,
    printable,
    unknown_keys,
)
from partner_repo.models import MemoryUnit
from partner_repo.mongo import UNITS, MongoDatabase, PyMongoError
from partner_repo.normalization import new_slice_id, normalize_unit
from partner_repo.units import MemoryUnitRepository
from partner_repo.validation import id_problem, require_id


async def adopt_session(
    database: MongoDatabase, units: MemoryUnitRepository, core_id: str, session_id: str
) -> tuple[bool, ImportIssue | None]:
    """Make Partner's current session the core's, unless the core already records into its own session:
    whether it did, and the note when the core kept its own."""
    cores = MemoryCoreRepository(database)
    core = await cores.get(core_id)
    if core is None:
        return await cores.set_session(core_id, session_id), None
    if core.memory_session_id == session_id:
        return False, None
    adopted = False
    fence = await units.fence(core.memory_session_id)
    if fence.head is None and fence.reservation is None:
        # a clear's reservation is a unit here too: adopting over it would lose the mark it fences with
        adopted = await cores.set_session(core_id, session_id, expected=core.memory_session_id)
    if adopted:
        return True, None
    kept = ImportIssue(
        file=MEMORY_JSON.as_posix(),
        item="memory_session_id",
        reason=f"core {core_id!r} already records into session {core.memory_session_id!r}; "
        f"kept it instead of {session_id!r}",
    )
    return False, kept


COPY_NAMESPACE = uuid.UUID("5b0b1f4e-6a3c-4c59-9a51-2f6e0f7f3c31")
"""The namespace of the ids a copy gets (any fixed UUID: the ids only need to be stable)."""

LOOKUP_BATCH = 1000
"""Unit ids looked up per query."""


def copy_id(core_id: str, original: str, kind: str = "unit") -> str:
    """The id the copy of ``original`` (a unit or slice id of the state) gets in core ``core_id``."""
    return str(uuid.uuid5(COPY_NAMESPACE, f"{kind}\x00{core_id}\x00{original}"))


class Copies:
    """The renaming of one import as a copy into ``core_id``."""

    def __init__(self, core_id: str) -> None:
        self.core_id = core_id

    def unit_id(self, original: str) -> str:
        return copy_id(self.core_id, original)

    def of(self, unit: MemoryUnit) -> MemoryUnit:
        """``unit`` under its copy's ids: its own, the unit it continues, each slice's."""
        slices = [
            piece
            if piece is None or piece.id is None  # no id: normalization mints one
            else piece.model_copy(update={"id": copy_id(self.core_id, f"{unit.id}\x00{piece.id}", "slice")})
            for piece in unit.slices
        ]
        previous = None if unit.previous_unit_id is None else self.unit_id(unit.previous_unit_id)
        copied: MemoryUnit = unit.model_copy(
            update={"id": self.unit_id(unit.id), "previous_unit_id": previous, "slices": slices}
        )
        return copied


async def refuse_units_of_other_cores(database: MongoDatabase, core_id: str, unit_ids: Sequence[str]) -> None:
    """:class:`UnitOfAnotherCore` (nothing written) when one of ``unit_ids`` is stored under another core."""
    ids = sorted({unit_id for unit_id in unit_ids if _storable(unit_id)})  # the others are reported skipped
    for start in range(0, len(ids), LOOKUP_BATCH):
        query: dict[str, Any] = {
            "_id": {"$in": ids[start : start + LOOKUP_BATCH]},
            "core_id": {"$exists": True, "$ne": core_id},
        }
        found = await database[UNITS].find_one(query, {"core_id": 1})
        if found is not None:
            hint = ": import it into that core, or a copy under new ids (import-state --as-copy)"
            raise UnitOfAnotherCore(found["_id"], found["core_id"], core_id, hint=hint)


def _storable(unit_id: str) -> bool:
    """Whether ``unit_id`` could be a stored unit's id (one the import skips is no other core's)."""
    try:
        unit_id.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return bool(unit_id.strip()) and id_problem(unit_id, "it") is None


T = TypeVar("T")

CONTENT_ERRORS = (ValueError, ArithmeticError, RecursionError, InvalidDocument, OSError)
"""What one file can raise anywhere, reported for that file (``InvalidInput``, ``UnicodeError`` and pydantic's
``ValidationError`` are ``ValueError`` subclasses, JSON nested too deeply a ``RecursionError``, a file gone an
``OSError``). Database errors (``PyMongoError``, network errors too) are not the file's: they stop it."""


class ImportReport(BaseModel):
    """What an import did. ``units_imported`` is what was new; units already stored count as unchanged.
    ``messages_without_time`` counts the imported messages that carry no time (none in the file, or one that
    could not be read: each of those is noted too).
    ``unknown_keys`` maps a file (relative to the state directory) to its keys that are no part of Partner's
    format, which were ignored (a misspelt key is data the import did not bring in)."""

    core_id: str
    units_imported: int = 0
    messages_imported: int = 0
    messages_without_time: int = 0
    slices_imported: int = 0
    units_unchanged: int = 0
    session_id: str | None = None
    session_set: bool = False
    skipped: list[ImportIssue] = []
    warnings: list[ImportIssue] = []
    unknown_keys: dict[str, list[str]] = {}

    @property
    def new(self) -> int:
        return self.units_imported


async def import_partner_state(
    path: str | Path,
    database: MongoDatabase,
    *,
    core_id: str = DEFAULT_CORE_ID,
    progress: Progress | None = None,
    as_copy: bool = False,
) -> ImportReport:
    """Import Partner's state directory ``path`` into ``core_id``; see the module docstring for the rules.

    A unit of the state stored already under another core is refused before anything is written
    (:class:`UnitOfAnotherCore`); ``as_copy`` imports a copy under new ids instead (:mod:`.copies`).

    :class:`InvalidInput` for a bad argument (not a directory, an unusable ``core_id``); database errors
    pass; every problem of the state directory is reported.
    """
    root = Path(path)
    if not await asyncio.to_thread(root.is_dir):
        raise InvalidInput(f"{path} is not a directory (expected Partner's state directory)")
    core_id = require_encodable(require_id(core_id, "core_id"), "core_id")
    if not isinstance(as_copy, bool):
        raise InvalidInput(f"as_copy must be a bool, got {type(as_copy).__name__}")
    report = ImportReport(core_id=core_id)
    session_id, listed = await _guarded(
        asyncio.to_thread(_read_memory_json, root, report), (None, None), MEMORY_JSON.as_posix(), report
    )
    files = await asyncio.to_thread(_unit_files, root)
    renamed = Copies(core_id) if as_copy else None
    if renamed is None:
        await refuse_units_of_other_cores(database, core_id, [*files, *([session_id] if session_id else [])])
    elif session_id is not None:
        session_id = renamed.unit_id(session_id)
    _note_missing(root, files, listed, report)
    units = MemoryUnitRepository(database)
    total = len(files)
    if progress is not None:
        progress(0, total)
    for done, (unit_id, file) in enumerate(sorted(files.items()), 1):
        if listed is not None and unit_id not in listed:
            report.warnings.append(
                ImportIssue(
                    file=_relative(file, root),
                    item="unit",
                    reason="not listed in core/memory.json (memory_unit_uuid_set); imported anyway",
                )
            )
        await _guarded(
            _import_file(units, root, file, unit_id, core_id, report, renamed),
            None,
            _relative(file, root),
            report,
        )
        if progress is not None:
            progress(done, total)
    if session_id is not None:
        report.session_id = session_id
        report.session_set, kept = await adopt_session(database, units, core_id, session_id)
        report.warnings += [kept] if kept is not None else []
    return report


def _note_missing(root: Path, files: dict[str, Path], listed: list[str] | None, report: ImportReport) -> None:
    """Units ``core/memory.json`` lists without a file, reported as skipped."""
    for unit_id in dict.fromkeys(listed or []):
        if unit_id not in files:
            report.skipped.append(
                ImportIssue(
                    file=_relative(_unit_path(root, unit_id), root),
                    item="unit",
                    reason="listed in core/memory.json but the file does not exist",
                )
            )


async def _guarded(work: Awaitable[T], fallback: T, name: str, report: ImportReport) -> T:
    """``work``'s result; when one file's content makes it raise, that is reported, ``fallback`` returned."""
    try:
        return await work
    except PyMongoError:
        raise  # the database, not the file: nothing else could be imported either
    except CONTENT_ERRORS as exc:
        reason = printable(f"cannot be imported: {type(exc).__name__}: {_first_line(exc)}")
        report.skipped.append(ImportIssue(file=name, item="file", reason=reason))
        return fallback


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else "no detail"


# -- reading the state directory -------------------------------------------------------------------------


def _read_memory_json(root: Path, report: ImportReport) -> tuple[str | None, list[str] | None]:
    """Partner's session id and unit set; (None, None) with a report when the file is missing or broken."""
    name = MEMORY_JSON.as_posix()
    data = _load_object(root / MEMORY_JSON, name, report)
    if data is None:
        return None, None
    _note_unknown_keys(data, CORE_FIELDS, name, report)
    session = data.get("memory_session_id")
    if not isinstance(session, str) or not session.strip():
        report.skipped.append(
            ImportIssue(file=name, item="memory_session_id", reason="missing or not a non-blank string")
        )
        session = None
    elif not _encodable(session, "memory_session_id", name, report):
        session = None
    elif (problem := id_problem(session, "it")) is not None:
        report.skipped.append(ImportIssue(file=name, item="memory_session_id", reason=problem))
        session = None
    raw = data.get("memory_unit_uuid_set")
    if not isinstance(raw, list):
        report.skipped.append(
            ImportIssue(file=name, item="memory_unit_uuid_set", reason="missing or not a list")
        )
        return session, None
    listed: list[str] = []
    for position, entry in enumerate(raw):
        if isinstance(entry, str) and entry.strip():
            if _encodable(entry, f"memory_unit_uuid_set[{position}]", name, report):
                if (problem := id_problem(entry, "it")) is None:
                    listed.append(entry)
                else:
                    report.skipped.append(
                        ImportIssue(file=name, item=f"memory_unit_uuid_set[{position}]", reason=problem)
                    )
        else:
            report.skipped.append(
                ImportIssue(
                    file=name, item=f"memory_unit_uuid_set[{position}]", reason=f"not a unit id: {entry!r}"
                )
            )
    return session, listed


def _encodable(text: str, item: str, name: str, report: ImportReport, *, what: str = "it") -> bool:
    """Whether ``text`` can be stored; when not, that is reported as skipped."""
    try:
        require_encodable(text, what)
    except InvalidInput as exc:
        report.skipped.append(ImportIssue(file=name, item=item, reason=str(exc)))
        return False
    return True


def _note_unknown_keys(data: dict[str, Any], known: tuple[str, ...], name: str, report: ImportReport) -> None:
    if unknown := unknown_keys(data, known):
        report.unknown_keys[name] = unknown


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
    units: MemoryUnitRepository,
    root: Path,
    file: Path,
    unit_id: str,
    core_id: str,
    report: ImportReport,
    renamed: Copies | None,
) -> None:
    name = _relative(file, root)
    if not unit_id.strip():
        report.skipped.append(ImportIssue(file=name, item="unit", reason="the file name carries no unit id"))
        return
    if not _encodable(unit_id, "unit", name, report, what="the unit id of the file name"):
        return
    if (refusal := id_problem(unit_id, "the unit id of the file name")) is not None:
        report.skipped.append(ImportIssue(file=name, item="unit", reason=refusal))
        return
    data, modified_at = await asyncio.to_thread(_read_unit_file, file, name, report)
    if data is None:
        return
    _note_unknown_keys(data, UNIT_FIELDS, name, report)
    issues: list[ImportIssue] = []
    unit = partner_unit(data, unit_id, core_id, name, issues)
    if renamed is not None:
        unit = renamed.of(unit)
        unit_id = unit.id
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
        report.messages_without_time += sum(m.at is None for m in stored.conversation_messages)
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


def _read_unit_file(file: Path, name: str, report: ImportReport) -> tuple[dict[str, Any] | None, datetime]:
    """The unit object and when Partner last wrote the file (the update time of a unit without one)."""
    data = _load_object(file, name, report)
    modified_at = to_utc_ms(datetime.fromtimestamp(file.stat().st_mtime, UTC)) if data is not None else EPOCH
    return data, modified_at


def _same_content(stored: MemoryUnit, imported: MemoryUnit) -> bool:
    def intervals(unit: MemoryUnit) -> list[tuple[str, int | None, int | None]]:
        return sorted((s.summary, s.start_index, s.end_index) for s in unit.complete_slices())

    return stored.conversation_messages == imported.conversation_messages and intervals(stored) == intervals(
        imported
    )


def _relative(file: Path, root: Path) -> str:
    """The name a report shows: relative to the state directory, bytes that are no UTF-8 escaped."""
    try:
        return printable(file.relative_to(root).as_posix())
    except ValueError:
        return printable(file.as_posix())


__all__ = [
    "COPY_NAMESPACE",
    "Copies",
    "ImportReport",
    "adopt_session",
    "copy_id",
    "import_partner_state",
    "refuse_units_of_other_cores",
]

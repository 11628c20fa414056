"""Give cores and units written before 0.4 (by 0.1-0.3, other tools, Partner's importer) positions, once.

0.4 finds a roll's increment by position: message ``i`` of a core's window is at ``window_start + i``, and
the unit a roll appends to keeps a mark, ``taken_until`` (every position below it is stored in the unit, or
was discarded on purpose by a clear), trusted while ``taken_count`` equals the unit's ``message_count``.
Data written before has neither. The library derives a missing mark lazily, from Partner's content overlap,
at a core's first roll; this migration does it ahead of time for every core:

1. **Cores.** ``window_start`` becomes 0 where it is missing or null (how the library reads it; guarded on
   that, so a trim that set it meanwhile is never undone). A missing or null ``chat_messages`` becomes an
   empty array with ``window_size`` 0 (the library reads it as empty either way, but ``record`` cannot push
   to a null array, in 0.3 nor in 0.4, and 0.3 can never count a missing one: both wedge the core).
2. **Marks.** For each core, in batches of ``BATCH_SIZE`` (read without their windows): the unit of its
   current session, or, when that unit does not exist yet and the session continues a full unit, the unit it
   continues (as the library resolves a roll). When that unit has no trusted mark, it gets ``taken_until =
   window_start + k`` and ``taken_count = message_count``, where ``k`` is how many of the window's first
   messages the unit already holds:

   - the window's stored front recorded by 0.3's last roll (``window_stored``), when it names this unit at
     its current message count and the unit really ends with that front: exact, what 0.3's next roll would
     have used;
   - otherwise Partner's content overlap (``resolveChatIncrement``, frozen below) of the unit's last messages
     (and, when it holds fewer than the window, the last ones of the unit it continues) with the window.

   Only the unit's head and a ``$slice`` of its last messages are read, never a whole unit; the unit is read
   before the core's window and the write is guarded by the unit's version (and its count and mark) as
   read, so the mark always describes the unit as it was when the window was read. ``version`` is bumped
   (every change of a mark does: a 0.4 roller's append guarded by the head it read then fails and re-reads)
   and ``size_bytes`` moves by exactly the bytes of the two fields. A write that loses its race re-reads
   (a 0.4 roll that wrote a trusted mark meanwhile wins, and the unit is skipped). Skipped, and counted in
   the log: units whose mark is trusted already, fences (documents of ``memory_units`` without ``core_id``:
   erased units' tombstones and the marks clears reserve), units without the derived fields (the library
   adopts them on first use, which rewrites them) and units of another core. A unit that keeps changing
   through ``ATTEMPTS`` writes is left, named in the log, to the lazy path (its next roll derives its mark
   the same way); the run still succeeds, except inside a transaction. Units that are no core's current or
   continued unit need no mark: no roll appends to them again.
3. **Cores.** The obsolete ``window_stored`` hint is removed.

A rerun (or a run after a failed one) skips what is done: cores that have a ``window_start``, trusted
marks, removed hints; a rerun of a finished run writes nothing.

Frozen on purpose, like every migration: the layout and the overlap rule are copies, not imports.

Backward makes the database right for 0.3 again, which ignores positions: it removes ``taken_until`` and
``taken_count`` from every unit (the library's own marks too, ``size_bytes`` kept exact, guarded and
version-bumped the same way) and deletes the marks reserved for units not yet created (0.3 would try to adopt
such a document as a unit and fail). A mark left behind would be dangerous, not useless: 0.3's
``clear_window`` empties a window without moving ``window_start``, so after an upgrade back to 0.4 a trusted
mark would take the new messages for stored ones. It keeps ``window_start`` (0.3 ignores it; a 0 set here
reads as the missing value did; and a 0.4 process still running meanwhile keeps consistent positions),
keeps empty windows empty (null ones wedge 0.3) and does not bring ``window_stored`` back (a hint 0.3's next
roll writes again). Stop 0.4 rollers before running it: one still running may write a mark again.
"""

# No `from __future__ import annotations`: Beanie loads this file outside sys.modules, where pydantic could
# not resolve string annotations.
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import bson
from beanie import Document, free_fall_migration
from pymongo.errors import WriteError

from partner_repo.mongo import driver

UNITS = "memory_units"
CORES = "memory_cores"
ATTEMPTS = 50
"""How often one unit is re-read and marked again when concurrent writers keep changing it."""
BATCH_SIZE = 100
"""Cores read (without their windows) per batch; their units' heads are read with one query per batch."""
TAIL_MARGIN = 16
"""Messages read beyond a window's counted size: turns recorded between reading its count and its window."""
NAMED = 5
"""Units named in a log line about units left."""

log = logging.getLogger("partner_repo.migrations.positions")


class UnitCollection(Document):
    """Binds the migration to its database; documents of both collections are read raw."""

    class Settings:
        name = UNITS


class KeptChanging(RuntimeError):
    """Concurrent writers changed the unit before each of its ``ATTEMPTS`` guarded writes."""


class UnitsLeft(RuntimeError):
    """Units Backward could not write; it must run again for them."""


# -- the frozen layout (partner-repo 0.4.0) ------------------------------------------------------------------

MISSING_START = {"window_start": None}
"""A core without ``window_start``, or with a null one: read as 0."""

NO_WINDOW = {"$and": [{"chat_messages": {"$not": {"$type": "array"}}}, {"chat_messages": None}]}
"""A core whose window is missing or null (not an array holding a null)."""

CORE_STATE = {"memory_session_id": 1, "session_continues": 1, "window_size": 1}
"""What a batch reads of each core: its session and its window's count, never the window."""

CORE_WINDOW = {
    "memory_session_id": 1,
    "session_continues": 1,
    "window_start": 1,
    "window_stored": 1,
    "chat_messages": 1,
}
"""What resolving one core reads: its window, where it starts, and 0.3's stored front, in one read."""

UNIT_HEAD = {
    "core_id": 1,
    "message_count": 1,
    "slice_count": 1,
    "size_bytes": 1,
    "slice_ids": {"$slice": -1},
    "version": 1,
    "previous_unit_id": 1,
    "taken_until": 1,
    "taken_count": 1,
}
"""A unit without its messages (at most one slice id): O(1) bytes at any unit size."""

DERIVED_FIELDS = ("message_count", "slice_count", "slice_ids", "size_bytes")

RESERVED_MARK = {
    "core_id": {"$exists": False},
    "erased_at": {"$exists": True},
    "taken_until": {"$exists": True},
    "conversation_messages": {"$exists": False},
    "slices": {"$exists": False},
}
"""The tombstone a 0.4 clear leaves for a session whose unit does not exist yet, holding its mark:
``{_id, erased_at, taken_until, taken_count}`` (an erased unit's tombstone has no ``taken_until``; another
tool's unit has messages, slices)."""


def is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def is_fence(document: Mapping[str, Any]) -> bool:
    """A tombstone or a reserved mark: not a unit (every document of the library's units has a core)."""
    return "core_id" not in document


def has_derived_fields(document: Mapping[str, Any]) -> bool:
    return all(name in document for name in DERIVED_FIELDS)


def message_count(document: Mapping[str, Any]) -> int:
    value = document.get("message_count")
    return value if is_count(value) else 0


def is_trusted(document: Mapping[str, Any]) -> bool:
    """The unit's mark can be trusted: a count, set when the unit held exactly the messages it holds."""
    until, count = document.get("taken_until"), document.get("taken_count")
    return is_count(until) and is_count(count) and count == message_count(document)


def start_of(core: Mapping[str, Any]) -> int:
    """``window_start`` as the library reads it: missing, null or another tool's value is 0."""
    value = core.get("window_start")
    return value if is_count(value) else 0


def field_bytes(name: str, value: Any) -> int:
    """The bytes one field takes in a BSON document (an int past 2**31 - 1 takes 8, not 4)."""
    return len(bson.encode({name: value})) - len(bson.encode({}))


def mark_size_change(before: Mapping[str, Any], until: int, count: int) -> int:
    """How many bytes a unit grows by when its mark fields become ``until`` and ``count``."""
    change = 0
    for name, new in (("taken_until", until), ("taken_count", count)):
        change += field_bytes(name, new) - (field_bytes(name, before[name]) if name in before else 0)
    return change


def as_read(document: Mapping[str, Any], name: str) -> Any:
    """A guard on a field holding what was read, or being absent as it was."""
    return document.get(name, {"$exists": False})


def message_key(message: Any) -> Any:
    """What makes two stored messages equal for the library: role and content; anything else never is."""
    if isinstance(message, Mapping):
        return (message.get("role"), message.get("content"))
    return object()


def overlap(stored_tail: Sequence[Any], window: Sequence[Any]) -> int:
    """Partner's ``resolveChatIncrement``: the largest ``k`` with ``stored_tail[-k:] == window[:k]``, or 0."""
    stored = [message_key(m) for m in stored_tail]
    front = [message_key(m) for m in window]
    for k in range(min(len(stored), len(front)), 0, -1):
        if stored[-k:] == front[:k]:
            return k
    return 0


def stored_front(
    core: Mapping[str, Any], unit: Mapping[str, Any], tail: Sequence[Any], window: Sequence[Any]
) -> int | None:
    """How many of the window's first messages 0.3's last roll left stored in ``unit`` (``window_stored``),
    when that hint names this unit as it still is and the unit ends with them; None otherwise."""
    hint = core.get("window_stored")
    if not isinstance(hint, Mapping) or hint.get("unit_id") != unit["_id"]:
        return None
    count, front = hint.get("message_count"), hint.get("front")
    if not (is_count(count) and is_count(front)) or front > count or count != message_count(unit):
        return None
    if front > len(window) or front > len(tail):
        return None
    if [message_key(m) for m in tail[len(tail) - front :]] != [message_key(m) for m in window[:front]]:
        return None
    return int(front)


# -- Forward -------------------------------------------------------------------------------------------------


def _in_transaction(session: Any) -> bool:
    return bool(getattr(session, "in_transaction", False))


async def migrate_all(session: Any) -> dict[str, int]:
    """Forward: the three steps of the module docstring; the counts it logs."""
    units = driver.document_collection(UnitCollection)
    cores = units.database[CORES]
    counts = dict.fromkeys(
        (
            "window_start",
            "empty_windows",
            "cores",
            "marked",
            "trusted",
            "no_unit",
            "fences",
            "not_adopted",
            "foreign",
            "left",
            "window_stored",
        ),
        0,
    )
    counts["window_start"] = (
        await cores.update_many(MISSING_START, {"$set": {"window_start": 0}}, session=session)
    ).modified_count
    counts["empty_windows"] = (
        await cores.update_many(NO_WINDOW, {"$set": {"chat_messages": [], "window_size": 0}}, session=session)
    ).modified_count
    left: list[Any] = []
    batch: list[dict[str, Any]] = []
    cursor = cores.find({}, CORE_STATE, session=session).sort("_id", 1).batch_size(BATCH_SIZE)
    async for core in cursor:
        batch.append(core)
        if len(batch) == BATCH_SIZE:
            await _mark_batch(units, cores, batch, session, counts, left)
            batch = []
    if batch:
        await _mark_batch(units, cores, batch, session, counts, left)
    counts["window_stored"] = (
        await cores.update_many(
            {"window_stored": {"$exists": True}}, {"$unset": {"window_stored": ""}}, session=session
        )
    ).modified_count
    log.info(
        "positions: window_start set on %(window_start)d cores, %(empty_windows)d missing windows stored "
        "empty; of %(cores)d cores' units %(marked)d marked, %(trusted)d already trusted, %(no_unit)d cores "
        "without a unit yet, %(fences)d fences, %(not_adopted)d units left for the library to adopt, "
        "%(foreign)d units of another core, %(left)d left to the lazy path; window_stored removed from "
        "%(window_stored)d cores",
        counts,
    )
    if left:
        named = ", ".join(repr(unit_id) for unit_id in left[:NAMED])
        more = f" and {len(left) - NAMED} more" if len(left) > NAMED else ""
        log.warning(
            "positions: %d unit(s) kept changing under concurrent writes and are left unmarked (%s%s); their "
            "next roll derives the mark the same way",
            len(left),
            named,
            more,
        )
    return counts


async def _mark_batch(
    units: Any,
    cores: Any,
    batch: list[dict[str, Any]],
    session: Any,
    counts: dict[str, int],
    left: list[Any],
) -> None:
    """Read the heads of a batch of cores' units in at most two queries; resolve only those needing a mark."""
    sessions = await _heads(units, [c.get("memory_session_id") for c in batch], session)
    continued = [
        c.get("session_continues")
        for c in batch
        if (head := sessions.get(c.get("memory_session_id"))) is None or is_fence(head)
    ]
    heads = {**sessions, **await _heads(units, continued, session)}

    async def known(unit_id: Any) -> dict[str, Any] | None:
        return heads.get(unit_id)

    for core in batch:
        counts["cores"] += 1
        outcome, _unit, _previous = await _target(core, known)
        if outcome is None:
            try:
                outcome = await _mark_one(units, cores, core, session)
            except (KeptChanging, WriteError) as exc:
                if _in_transaction(session):
                    raise
                unit_id = _unit["_id"] if _unit is not None else None
                log.warning("positions: unit %r of core %r left unmarked: %s", unit_id, core["_id"], exc)
                left.append(unit_id)
                outcome = "left"
        counts[outcome] += 1


async def _heads(units: Any, unit_ids: list[Any], session: Any) -> dict[Any, dict[str, Any]]:
    wanted = list({unit_id for unit_id in unit_ids if isinstance(unit_id, str)})
    if not wanted:
        return {}
    cursor = units.find({"_id": {"$in": wanted}}, UNIT_HEAD, session=session)
    return {document["_id"]: document async for document in cursor}


async def _target(core: Mapping[str, Any], read: Any) -> tuple[str | None, dict[str, Any] | None, Any]:
    """Which unit of ``core`` a roll appends to next and the unit before it (whose tail continues its own):
    ``(None, unit, previous)`` when that unit needs a mark, else ``(why not, unit or None, None)``.
    ``read(unit_id)`` gives a unit's document (head, maybe with a tail) or None."""
    session_id, continues = core.get("memory_session_id"), core.get("session_continues")
    unit = await read(session_id) if isinstance(session_id, str) else None
    fence = unit is not None and is_fence(unit)
    if unit is not None and not fence:
        previous = unit.get("previous_unit_id") or continues
    elif isinstance(continues, str) and continues:
        unit = await read(continues)
        if unit is None:
            return "no_unit", None, None
        if is_fence(unit):
            return "fences", None, None
        previous = unit.get("previous_unit_id")
    else:
        return ("fences" if fence else "no_unit"), None, None
    if not has_derived_fields(unit):
        return "not_adopted", unit, None
    if unit.get("core_id") != core["_id"]:
        return "foreign", unit, None
    if is_trusted(unit):
        return "trusted", unit, None
    return None, unit, previous


async def _mark_one(units: Any, cores: Any, core: Mapping[str, Any], session: Any) -> str:
    """Mark the unit of one core (see the module docstring); the outcome counted."""
    size = core.get("window_size")
    wanted = (size if is_count(size) else 0) + TAIL_MARGIN
    for _ in range(ATTEMPTS):
        tail_projection = {**UNIT_HEAD, "conversation_messages": {"$slice": -wanted}}

        async def read(unit_id: Any, projection: dict[str, Any] = tail_projection) -> dict[str, Any] | None:
            found: dict[str, Any] | None = await units.find_one({"_id": unit_id}, projection, session=session)
            return found

        outcome, unit, previous = await _target(core, read)
        if outcome is not None:
            return outcome
        assert unit is not None
        tail = _messages(unit)
        stored = tail
        if isinstance(previous, str) and len(tail) < wanted:
            before = await read(
                previous, {"core_id": 1, "conversation_messages": {"$slice": -(wanted - len(tail))}}
            )
            stored = (_messages(before) if before is not None and not is_fence(before) else []) + tail
        fresh = await cores.find_one({"_id": core["_id"]}, CORE_WINDOW, session=session)
        if fresh is None:
            return "no_unit"  # the core is gone
        if (fresh.get("memory_session_id"), fresh.get("session_continues")) != (
            core.get("memory_session_id"),
            core.get("session_continues"),
        ):
            core = {**fresh, "window_size": None}
            continue  # the session moved on since: resolve against the new one
        raw_window = fresh.get("chat_messages")
        window = raw_window if isinstance(raw_window, list) else []
        if len(window) > wanted:
            wanted = len(window) + TAIL_MARGIN
            continue  # turns recorded since the count was read: read a longer tail
        taken = stored_front(fresh, unit, tail, window)
        if taken is None:
            taken = overlap(stored, window)
        until, count = start_of(fresh) + taken, message_count(unit)
        guard = {
            "_id": unit["_id"],
            "core_id": core["_id"],
            "version": as_read(unit, "version"),
            "message_count": unit["message_count"],
            "taken_until": as_read(unit, "taken_until"),
            "taken_count": as_read(unit, "taken_count"),
        }
        update = {
            "$set": {"taken_until": until, "taken_count": count},
            "$inc": {"version": 1, "size_bytes": mark_size_change(unit, until, count)},
        }
        result = await units.update_one(guard, update, session=session)
        if result.matched_count:
            return "marked"
    raise KeptChanging(f"it kept changing under concurrent writes, {ATTEMPTS} attempts in a row")


def _messages(document: Mapping[str, Any]) -> list[Any]:
    messages = document.get("conversation_messages")
    return list(messages) if isinstance(messages, list) else []


# -- Backward ------------------------------------------------------------------------------------------------


async def unmark_all(session: Any) -> dict[str, int]:
    """Backward: every mark removed (sizes exact), every reserved mark deleted; the counts it logs."""
    units = driver.document_collection(UnitCollection)
    counts = {"unmarked": 0, "reserved": 0, "left": 0}
    counts["reserved"] = (await units.delete_many(RESERVED_MARK, session=session)).deleted_count
    left: list[Any] = []
    marked = {
        "core_id": {"$exists": True},
        "$or": [{"taken_until": {"$exists": True}}, {"taken_count": {"$exists": True}}],
    }
    projection = {"version": 1, "size_bytes": 1, "taken_until": 1, "taken_count": 1}
    cursor = units.find(marked, projection, session=session).sort("_id", 1).batch_size(BATCH_SIZE)
    async for document in cursor:
        try:
            if await _unmark_one(units, document, projection, session):
                counts["unmarked"] += 1
        except (KeptChanging, WriteError) as exc:
            if _in_transaction(session):
                raise
            counts["left"] += 1
            left.append(document["_id"])
            log.warning("positions backward: unit %r left for the next run: %s", document["_id"], exc)
    log.info(
        "positions backward: marks removed from %(unmarked)d units, %(reserved)d reserved marks deleted, "
        "%(left)d units left",
        counts,
    )
    if left:
        named = ", ".join(repr(unit_id) for unit_id in left[:NAMED])
        raise UnitsLeft(f"{len(left)} unit(s) still carry a mark ({named}); run the migration backward again")
    return counts


async def _unmark_one(
    units: Any, document: Mapping[str, Any], projection: dict[str, Any], session: Any
) -> bool:
    for _ in range(ATTEMPTS):
        shrink = sum(
            field_bytes(name, document[name]) for name in ("taken_until", "taken_count") if name in document
        )
        guard = {
            "_id": document["_id"],
            "version": as_read(document, "version"),
            "taken_until": as_read(document, "taken_until"),
            "taken_count": as_read(document, "taken_count"),
        }
        increments = {"version": 1, **({"size_bytes": -shrink} if "size_bytes" in document else {})}
        update = {"$unset": {"taken_until": "", "taken_count": ""}, "$inc": increments}
        result = await units.update_one(guard, update, session=session)
        if result.matched_count:
            return True
        reread = await units.find_one({"_id": document["_id"]}, projection, session=session)
        if reread is None or not ("taken_until" in reread or "taken_count" in reread):
            return False
        document = reread
    raise KeptChanging(f"it kept changing under concurrent writes, {ATTEMPTS} attempts in a row")


class Forward:
    @free_fall_migration(document_models=[UnitCollection])
    async def give_positions(self, session: Any) -> None:
        await migrate_all(session)


class Backward:
    @free_fall_migration(document_models=[UnitCollection])
    async def remove_marks(self, session: Any) -> None:
        await unmark_all(session)

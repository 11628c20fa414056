"""MemoryCoreRepository: per agent, the current memory session and the live chat window.

(The rolling lease on the same document is :mod:`partner_repo.cores._lease`.)

Every write is a single atomic update on the core document, so several service processes can share a core.
The window only grows at the end (``record``) and only shrinks at the front (``trim_window``), so a trim
guarded by the version it read never loses a message recorded meanwhile: it retries instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from partner_repo.clock import utc_now
from partner_repo.cores._state import WindowState, count_window, is_count, repair_window, state_projection
from partner_repo.cores._trim import RollFinish, clear_front, trim_front, window_of_size
from partner_repo.cores._window import dropped_count, refuse_unrollable
from partner_repo.errors import ConflictError, InvalidInput, LeaseLost, WindowTooLarge, found
from partner_repo.models import MemoryCore, Message
from partner_repo.mongo import (
    ASCENDING,
    CORES,
    DocumentTooLarge,
    DuplicateKeyError,
    MongoDatabase,
    OperationFailure,
    ReturnDocument,
    driver,
    messages_bytes,
)
from partner_repo.validation import Turn, optional_datetime, optional_recorded_time, require_count, require_id

DEFAULT_CORE_ID = "default"

UPSERT_ATTEMPTS = 3
"""A first-time upsert racing another, plus one more for a core whose window count had to be stored first."""


def new_session_id() -> str:
    """A fresh memory session id (UUID4, as Partner uses); it becomes the id of the session's unit."""
    return str(uuid.uuid4())


@driver.timeouts_surface_as_project_errors
class MemoryCoreRepository:
    """Reads and writes memory cores on the database it is given."""

    def __init__(self, database: MongoDatabase) -> None:
        self._database = database
        self._cores = database[CORES]

    async def get(self, core_id: str = DEFAULT_CORE_ID) -> MemoryCore | None:
        document = await self._cores.find_one({"_id": require_id(core_id, "core_id")})
        return None if document is None else MemoryCore.model_validate(document)

    async def require(self, core_id: str = DEFAULT_CORE_ID) -> MemoryCore:
        """The core; :class:`NotFound` where :meth:`get` answers None."""
        return found(await self.get(core_id), f"core {core_id!r}")

    async def get_or_create(
        self, core_id: str = DEFAULT_CORE_ID, *, now: datetime | None = None
    ) -> MemoryCore:
        """The core, created with a fresh memory session when absent (an atomic upsert: callers agree)."""
        core_id = require_id(core_id, "core_id")
        stamp = optional_recorded_time(now, "now") or utc_now()
        document = await self._upsert(
            core_id,
            {"$setOnInsert": self._fresh_fields(stamp)},
        )
        core: MemoryCore = MemoryCore.model_validate(document)
        return core

    async def session_id(self, core_id: str = DEFAULT_CORE_ID) -> str:
        """The core's current memory session id (the id of the unit new memory goes to)."""
        return (await self.get_or_create(core_id)).memory_session_id

    async def refresh_session(self, core_id: str = DEFAULT_CORE_ID, *, now: datetime | None = None) -> str:
        """Start a new memory session atomically; returns the new session id."""
        core_id = require_id(core_id, "core_id")
        stamp = optional_recorded_time(now, "now") or utc_now()
        session = new_session_id()
        fresh = self._fresh_fields(stamp)
        for key in ("memory_session_id", "session_started_at", "version"):
            fresh.pop(key)
        await self._upsert(
            core_id,
            {
                "$set": _session(session, stamp),
                "$inc": {"version": 1},
                "$setOnInsert": fresh,
            },
        )
        return session

    async def switch_session(
        self, core_id: str, *, lease_owner: str, continues: str | None = None, now: datetime | None = None
    ) -> str:
        """A roller's session switch, fenced by its lease: start a new memory session only while
        ``lease_owner`` still holds the core's lease, else :class:`LeaseLost` (nothing written).

        ``continues`` names the unit the new session's unit continues (a roll opening a continuation because
        the current unit is full); None for an idle refresh (a new conversation session starts afresh).
        """
        core_id = require_id(core_id, "core_id")
        owner = require_id(lease_owner, "lease_owner")
        stamp = optional_recorded_time(now, "now") or utc_now()
        session = new_session_id()
        result = await self._cores.update_one(
            {"_id": core_id, "lease_owner": owner},
            {
                "$set": _session(
                    session, stamp, None if continues is None else require_id(continues, "continues")
                ),
                "$inc": {"version": 1},
            },
        )
        if not result.matched_count:
            raise LeaseLost(core_id, owner)
        return session

    async def set_session(
        self,
        core_id: str,
        session_id: str,
        *,
        expected: str | None = None,
        now: datetime | None = None,
    ) -> bool:
        """Point the core at memory session ``session_id`` (an import adopting Partner's current session).

        Creates the core when absent. With ``expected`` it is a compare-and-set: the session changes only
        while it is still ``expected``. True when this call changed or created the core.
        """
        core_id = require_id(core_id, "core_id")
        session_id = require_id(session_id, "session_id")
        stamp = optional_recorded_time(now, "now") or utc_now()
        current: Any = {"$ne": session_id} if expected is None else require_id(expected, "expected")
        if current == session_id:
            return False
        result = await self._cores.update_one(
            {"_id": core_id, "memory_session_id": current},
            {"$set": _session(session_id, stamp), "$inc": {"version": 1}},
        )
        if result.matched_count or expected is not None:
            return bool(result.matched_count)
        fresh = {**self._fresh_fields(stamp), "memory_session_id": session_id}
        for _ in range(2):  # a concurrent first write may create the core between our two calls
            try:
                before = await self._cores.find_one_and_update(
                    {"_id": core_id},
                    {"$setOnInsert": fresh},
                    upsert=True,
                    return_document=ReturnDocument.BEFORE,
                )
                return before is None
            except DuplicateKeyError:
                continue
        raise ConflictError(f"core {core_id!r}: concurrent creation did not settle; try again")

    # -- the chat window -------------------------------------------------------------------------------------

    async def record(
        self, core_id: str, messages: Iterable[Message | dict[str, Any]], *, at: datetime | None = None
    ) -> WindowState:
        """Append ``messages`` to the chat window and mark the interaction; Partner's ``updateChatMessages``.

        One atomic ``$push`` + ``$set`` (no read): concurrent calls never lose a message, and a roll running
        meanwhile keeps them. ``last_interaction_at`` becomes ``at`` (default: now), and so does the ``at`` of
        each message that has none (a message's own ``at`` is kept). Creates the core with a
        fresh memory session when absent. An empty list only marks the interaction. Returns the core's
        :class:`~partner_repo.cores._state.WindowState` after the write: its session, window size and lease,
        never the window itself (pass it to ``RollingService.maybe_roll(recorded=...)``, or use
        ``RollingService.record_and_roll``); read the window with :meth:`snapshot` or :meth:`get`.

        Input that could never be rolled into a unit is refused with :class:`InvalidInput` before anything is
        written: a message (or a turn) larger than :data:`~partner_repo.mongo._storage.MAX_MESSAGE_BYTES`,
        text that is not valid Unicode. A window the server cannot grow past 16 MiB raises
        :class:`WindowTooLarge` (nothing recorded: roll, then record again).
        """
        return await self._record(Turn.checked(core_id, messages, at))

    async def record_turn(self, turn: Turn) -> WindowState:
        """:meth:`record` of a turn its caller checked already (:meth:`Turn.checked`): the one write."""
        return await self._record(turn)

    async def _record(self, turn: Turn) -> WindowState:
        """The write of :meth:`record` and :meth:`record_turn` (private, so that a failure is named after the
        public method the caller called, not this one)."""
        core_id = turn.core_id
        stamp = turn.at or utc_now()
        documents = [m.model_dump() for m in turn.messages]
        for document in documents:
            document.setdefault("at", stamp)  # the message's own time, unless the caller gave one
        refuse_unrollable(documents)
        update: dict[str, Any] = {
            "$push": {"chat_messages": {"$each": documents}},
            "$set": {"last_interaction_at": stamp, "idle_rolled": False},
            "$inc": {"version": 1, "window_size": len(documents), "window_bytes": messages_bytes(documents)},
        }
        try:
            document = await self._write_window(core_id, update, stamp)
        except (OperationFailure, TypeError) as exc:  # TypeError: the in-memory backend's way of refusing
            if not await repair_window(self._cores, core_id, exc):
                raise
            document = await self._write_window(core_id, update, stamp)
        state = await self._state_of(core_id, document)
        assert state is not None  # the core was just written
        return state

    async def _write_window(self, core_id: str, update: dict[str, Any], stamp: datetime) -> dict[str, Any]:
        """``record``'s write: a plain update first, the fields of a new core sent only when there is none."""
        try:
            document = await self._cores.find_one_and_update(
                _counted(core_id), update, projection=state_projection(), return_document=ReturnDocument.AFTER
            )
            if document is None:
                fresh = self._fresh_fields(stamp)
                for key in (
                    "chat_messages",
                    "window_size",
                    "window_bytes",
                    "last_interaction_at",
                    "idle_rolled",
                    "version",
                ):
                    fresh.pop(key)
                document = await self._upsert(
                    core_id, {**update, "$setOnInsert": fresh}, counted=True, missed=True
                )
        except DocumentTooLarge:
            raise WindowTooLarge(core_id) from None
        except OperationFailure as exc:
            if exc.code in DOCUMENT_TOO_LARGE_CODES:
                raise WindowTooLarge(core_id) from None
            raise
        return dict(document)

    async def window_state(self, core_id: str = DEFAULT_CORE_ID) -> WindowState | None:
        """The core's :class:`~partner_repo.cores._state.WindowState` (None: no such core), without reading
        the window: a few hundred bytes whatever the window holds."""
        core_id = require_id(core_id, "core_id")
        document = await self._cores.find_one({"_id": core_id}, state_projection())
        return None if document is None else await self._state_of(core_id, document)

    async def snapshot(self, core_id: str = DEFAULT_CORE_ID) -> list[Message]:
        """The chat window as it is now (empty when the core does not exist)."""
        document = await self._cores.find_one({"_id": require_id(core_id, "core_id")}, {"chat_messages": 1})
        return [Message.model_validate(m) for m in (document or {}).get("chat_messages") or []]

    async def trim_window(
        self,
        core_id: str,
        snapshot_size: int,
        retain_divisor: int,
        *,
        lease_owner: str | None = None,
        window_size: int | None = None,
        release: bool = False,
        message_bytes: Sequence[int] | None = None,
        finish: RollFinish | None = None,
    ) -> int:
        """Partner's ``rollChatMessagesWithSnapshot``: drop what rolling the first ``snapshot_size`` consumed.

        The window becomes ``window[safe - retain : safe] + window[safe:]`` (see
        :func:`partner_repo.roll_chat_messages`), computed on the window as stored at the moment of the write:
        messages recorded after the snapshot are the ``window[safe:]`` part and survive. The write only drops
        messages from the front and is guarded by the version read; a concurrent ``record`` makes it re-read
        and retry. With ``lease_owner`` it is also fenced: if another roller took the lease over, nothing is
        written and :class:`LeaseLost` is raised. Returns how many messages were dropped.

        ``window_size`` is the size the caller last saw (a roller's snapshot) and ``message_bytes`` the sizes
        of its last messages (all, or those it read): the first write is then sent without a read, guarded on
        the window still holding exactly that many messages (under the caller's lease only ``record`` changes
        it, and only by adding); otherwise it reads and retries as above.
        ``release`` (with ``lease_owner``) gives the lease back in the same write. ``window_start`` moves by
        what is dropped, so every message keeps its position. ``finish``: what a roll sets in the same write
        (:class:`~partner_repo.cores._trim.RollFinish`), so no state lies between them.
        """
        core_id = require_id(core_id, "core_id")
        dropped_count(0, snapshot_size, retain_divisor)  # validates the arguments before any round trip
        owner = None if lease_owner is None else require_id(lease_owner, "lease_owner")
        if (release or finish is not None) and owner is None:
            raise InvalidInput(
                "trim_window(release=True or finish=...) needs the lease_owner holding the lease"
            )
        return await trim_front(
            self._cores,
            core_id,
            snapshot_size,
            retain_divisor,
            owner=owner,
            window_size=None if window_size is None else require_count(window_size, "window_size"),
            release=release,
            message_bytes=None
            if message_bytes is None
            else [require_count(n, "message_bytes") for n in message_bytes],
            finish=finish,
        )

    async def clear_window(self, core_id: str, *, lease_owner: str) -> int | None:
        """Empty the window (an erasure), fenced by the lease ``lease_owner`` holds; how many messages it
        held, or None when it does not hold the lease (nothing written). ``window_start`` moves past them,
        so the positions they held are never taken by other messages; the caller marks them taken on the
        session's unit first (``MemoryEraser.clear_window``), so no roller stores them.

        Guarded on the window as read: a ``record`` in between makes it read again and retry."""
        return await clear_front(
            self._cores, require_id(core_id, "core_id"), require_id(lease_owner, "lease_owner")
        )

    async def mark_idle_rolled(
        self, core_id: str, *, window_size: int, last_interaction_at: datetime | None
    ) -> bool:
        """Record that an idle roll covered the window, unless anything was recorded since.

        The window still holding ``window_size`` messages and the same ``last_interaction_at`` proves no
        ``record`` came in between (records only add at the end; trims happen under the lease). True when set.
        """
        core_id = require_id(core_id, "core_id")
        window_size = require_count(window_size, "window_size")
        guard = {
            "_id": core_id,
            **window_of_size(window_size),
            "last_interaction_at": optional_datetime(last_interaction_at, "last_interaction_at"),
        }
        result = await self._cores.update_one(guard, {"$set": {"idle_rolled": True}, "$inc": {"version": 1}})
        return bool(result.matched_count)

    async def idle_core_ids(self, idle_since: datetime) -> list[str]:
        """Cores idle since before ``idle_since`` with more than one message and no idle roll since then.

        The longest idle first; served by the ``idle_pending`` index."""
        cutoff = optional_datetime(idle_since, "idle_since")
        query = {
            "idle_rolled": {"$in": [False, None]},
            "last_interaction_at": {"$lt": cutoff},
            "chat_messages.1": {"$exists": True},
        }
        cursor = self._cores.find(query, {"_id": 1}).sort("last_interaction_at", ASCENDING)
        return [document["_id"] async for document in cursor]

    async def _upsert(
        self, core_id: str, update: dict[str, Any], *, counted: bool = False, missed: bool = False
    ) -> dict[str, Any]:
        """The write behind every call that may create the core: an update of the core, or, when there is
        none, the core inserted whole (what the update would have created); ``counted`` writes (``record``)
        update the window's count and answer without the window.

        Not a findAndModify upsert: every answer of these two commands says what happened (the updated
        document, or none matched; inserted, or the id is taken), where an upsert's answer to two processes
        creating one core at once is the server's to get right (SecantusDB answers some with no document
        after updating it, tests/emulator_gaps.py). Two first writes race on the insert; the loser sends its
        write again as an update. A counted write matches only a core whose count exists, so a core written
        before the count (or by another tool) is counted first, once, then written. ``missed``: the caller's
        own update of ``update`` (without ``$setOnInsert``) just matched nothing."""
        query = _counted(core_id) if counted else {"_id": core_id}
        projection = state_projection() if counted else None
        for attempt in range(UPSERT_ATTEMPTS):
            if not (missed and attempt == 0):
                document = await self._cores.find_one_and_update(
                    query, update, projection=projection, return_document=ReturnDocument.AFTER
                )
                if document is not None:
                    return dict(document)
            if counted and await count_window(self._cores, core_id) is not None:
                continue  # a core without its count (written before 0.4, or by another tool): counted now
            created = _inserted(core_id, update)
            try:
                await self._cores.insert_one(created)
            except DuplicateKeyError:
                continue  # another process created it first: this write updates it
            return created
        raise ConflictError(f"core {core_id!r}: concurrent creation did not settle; try again")

    async def _state_of(self, core_id: str, document: dict[str, Any]) -> WindowState | None:
        """The state of a core read without its window; a count that is missing or not a count (another
        tool's, a float say) is counted again, exactly. None: the core is gone meanwhile."""
        size = document.get("window_size")
        counted = size if is_count(size) else await count_window(self._cores, core_id)
        return None if counted is None else WindowState.from_document(document, counted)

    @staticmethod
    def _fresh_fields(stamp: datetime) -> dict[str, Any]:
        return {
            "memory_session_id": new_session_id(),
            "session_started_at": stamp,
            "chat_messages": [],
            "window_size": 0,
            "window_bytes": 0,
            "last_interaction_at": None,
            "lease_owner": None,
            "lease_beat": 0,
            "idle_rolled": False,
            "version": 0,
        }


def _session(session_id: str, stamp: datetime, continues: str | None = None) -> dict[str, Any]:
    """The fields every session change sets: a session continues a unit only when a roll says so."""
    return {"memory_session_id": session_id, "session_started_at": stamp, "session_continues": continues}


DOCUMENT_TOO_LARGE_CODES = frozenset({10334, 17419})  # BSONObjectTooLarge; "resulting document ... larger"


def _inserted(core_id: str, update: dict[str, Any]) -> dict[str, Any]:
    """The core ``update`` would create where there is none, as an upsert builds it: ``$setOnInsert`` and
    ``$set`` fields as given, an ``$inc`` field at its increment, a ``$push`` of ``$each`` as that list."""
    known = {"$setOnInsert", "$set", "$inc", "$push"}
    assert set(update) <= known, f"no insert is made for {sorted(set(update) - known)}"
    document: dict[str, Any] = {"_id": core_id}
    document.update(update.get("$setOnInsert", {}))
    document.update(update.get("$set", {}))
    document.update(update.get("$inc", {}))
    document.update({field: list(push["$each"]) for field, push in update.get("$push", {}).items()})
    return document


def _counted(core_id: str) -> dict[str, Any]:
    """A core whose window count exists: what every write that keeps the count matches. (The byte count is
    not asked for: a core written before 0.4 counts the bytes of its turns from its first 0.4 one on, and
    its next roll's trim sets the count exactly; until then only the byte trigger sees less.)"""
    return {"_id": core_id, "window_size": {"$type": "number"}}

"""SliceQueries: looking into memory without writing aggregation pipelines by hand.

Slices live inside their units, so every query is an aggregation that first selects units through an index
(a ``$match`` on ``core_id`` / ``_id`` and an ``$elemMatch`` on ``slices.created_at``), then unwinds their
slices and filters them exactly. Pages are keyset-based on (``created_at``, slice id, unit id): a walk over
every page returns each matching slice exactly once, in order, even while slices are being appended, and
costs no ``skip``; each page reads no older data than the one before (:class:`CausalReads`, below: on
secondaries of different lag a walk would otherwise skip slices). Every query carries ``maxTimeMS``; user
text is matched literally, never as a regex or an operator. ``check``/``repair`` delegate to
:class:`partner_repo.UnitChecker` (repairs go through the unit repository).

Causally consistent page walks: admin reads may be served by secondaries (``secondaryPreferred``), and two
secondaries may lag by different amounts: a page read on a member that is behind the one the previous page
came from could miss slices that were already there. Each page is read in a causally consistent session; its
cluster time (the reply's ``operationTime`` and ``$clusterTime``) goes into the page's cursor, and the next
page's session is advanced to it, so the driver sends ``readConcern: {afterClusterTime: ...}`` and whichever
member serves the next page first waits until it has caught up with that time. Backends without sessions (the
embedded in-memory one, servers too old for them) read without one; a standalone server reports no cluster
time, so its cursors carry none and the next page reads as usual.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from partner_repo.admin._check import CheckReport, RepairReport, UnitChecker
from partner_repo.admin._cores import core_page, unit_counts
from partner_repo.admin._cursor import CursorCodec, ReadTime, SliceKey, resumable_end, slice_key
from partner_repo.admin._filters import Order, SliceFilter
from partner_repo.admin._recent import newest_documents
from partner_repo.admin._views import (
    CorePage,
    DayCount,
    MemoryStats,
    SliceDetail,
    SlicePage,
    SliceView,
    UnitCounts,
    UnitSize,
    UnitView,
)
from partner_repo.admin._windows import Anchors, Window, WindowWalk
from partner_repo.clock import to_utc_ms, utc_now
from partner_repo.errors import InvalidInput, NotFound, found
from partner_repo.models import Message
from partner_repo.mongo import (
    ASCENDING,
    DESCENDING,
    MAX_DOCUMENT_BYTES,
    NOT_ERASED,
    UNITS,
    ConfigurationError,
    InvalidOperation,
    MongoDatabase,
    driver,
    is_tombstone,
    live,
    marked,
)
from partner_repo.validation import optional_datetime, require_id


class CausalReads:
    """Opens the causally consistent session each page is read in, where the database supports sessions."""

    def __init__(self, database: MongoDatabase) -> None:
        self._client = driver.client_of(database)
        self._supported = self._client is not None and callable(
            getattr(type(self._client), "start_session", None)
        )

    @asynccontextmanager
    async def session(self, after: ReadTime | None) -> AsyncIterator[Any | None]:
        """A session whose reads come after ``after`` (None: no session on this backend). Ended on exit."""
        session = await self._start()
        if session is None:
            yield None
            return
        try:
            if after is not None:
                if after.cluster_time is not None:
                    session.advance_cluster_time(after.cluster_time)
                session.advance_operation_time(after.operation_time)
            yield session
        finally:
            await driver.end_session(session)

    def unsupported(self) -> None:
        """The deployment refused a session (sessions unsupported): read without one from now on."""
        self._supported = False

    @staticmethod
    def read_time(session: Any | None) -> ReadTime | None:
        """When the session's reads happened, as the server reported it (None on a standalone server)."""
        if session is None or session.operation_time is None:
            return None
        moment, cluster = session.operation_time, session.cluster_time
        return ReadTime(moment, dict(cluster) if cluster is not None else None)

    async def _start(self) -> Any | None:
        if not self._supported:
            return None
        try:
            return await driver.start_session(self._client, causal_consistency=True)
        except (NotImplementedError, ConfigurationError, InvalidOperation):
            self._supported = False  # mongomock-motor: "does not support sessions"
            return None


SESSIONS_UNSUPPORTED = ConfigurationError
"""What the driver raises when a command is sent in a session on a deployment without sessions."""


DEFAULT_LIMIT = 50
MAX_LIMIT = 500
"""``limit`` above this is capped: a page is one bounded aggregation, not an export."""
DEFAULT_MAX_TIME_MS = 30_000
STATS_DAYS = 30
LARGEST_UNITS = 5

_DATE = "date"


@driver.timeouts_surface_as_project_errors
class SliceQueries:
    """Admin queries over slices and units (find, count, get, messages, unit, stats), and check/repair.

    ``cursor_secret`` signs page cursors (the library's default key is used when omitted: it detects edited
    and foreign cursors; a secret of your own also stops forged ones). ``max_time_ms`` bounds each query.
    """

    def __init__(
        self,
        database: MongoDatabase,
        *,
        cursor_secret: bytes | str | None = None,
        max_time_ms: int = DEFAULT_MAX_TIME_MS,
    ) -> None:
        if isinstance(max_time_ms, bool) or not isinstance(max_time_ms, int) or max_time_ms <= 0:
            raise InvalidInput(f"max_time_ms must be a positive integer, got {max_time_ms!r}")
        self._database = database
        self._units = database[UNITS]
        self._cursors = CursorCodec(str(getattr(database, "name", "")), cursor_secret)
        self._max_time_ms = max_time_ms
        self._anchors = Anchors()
        self._causal = CausalReads(database)

    async def find(
        self,
        *,
        core_id: str | None = None,
        unit_id: str | None = None,
        created_from: datetime | None = None,
        created_to: datetime | None = None,
        text: str | None = None,
        order: Order = "desc",
        limit: int = DEFAULT_LIMIT,
        after: str | None = None,
    ) -> SlicePage:
        """One page of slices matching every given filter, newest first unless ``order="asc"``.

        ``created_from`` is inclusive and ``created_to`` exclusive; ``text`` is a case-insensitive substring
        of the summary; ``limit`` is capped at :data:`MAX_LIMIT`; ``after`` is a previous page's
        ``next_cursor`` for the same filters and order (anything else raises :class:`InvalidCursor`). The
        page is read after the cluster time its cursor carries (``afterClusterTime``), where there is one.
        """
        query = SliceFilter.of(core_id, unit_id, created_from, created_to, text, order)
        size = _page_size(limit)
        position = None if after is None else self._cursors.decode(after, query.fingerprint)
        documents, read_at = await self._read_page(query, position, size + 1)
        if len(documents) <= size:
            return SlicePage(items=SliceView.from_unwound(documents), next_cursor=None)
        end = resumable_end(documents[:size])
        key = slice_key(documents[end - 1], read_at)
        items = SliceView.from_unwound(documents[:end])
        return SlicePage(items=items, next_cursor=self._cursors.encode(key, query.fingerprint))

    async def _read_page(
        self, query: SliceFilter, position: SliceKey | None, wanted: int
    ) -> tuple[list[dict[str, Any]], ReadTime | None]:
        """The page's documents, read in one causally consistent session after ``position``'s read time,
        and the cluster time they were read at (None without sessions or on a standalone server)."""
        try:
            async with self._causal.session(None if position is None else position.read_at) as session:
                documents = await self._page_documents(query, position, wanted, session)
                return documents, CausalReads.read_time(session)
        except SESSIONS_UNSUPPORTED:  # refused before anything was sent: read this page and the next plainly
            self._causal.unsupported()
            return await self._page_documents(query, position, wanted, None), None

    async def _page_documents(
        self, query: SliceFilter, position: SliceKey | None, wanted: int, session: Any | None
    ) -> list[dict[str, Any]]:
        """The first ``wanted`` unwound slices after ``position``, window by window (:mod:`.windows`), so a
        page reads the units near where it starts rather than every unit holding a matching slice."""
        descending = query.order == "desc"
        start_edge = query.created_to if descending else query.created_from
        anchor = position.created_at if position is not None else start_edge
        if query.unit_id is not None:
            anchor = None  # one unit is one document whatever the window: a single query over all time
        elif anchor is None:
            key = (query.core_id, query.unit_id, query.order)
            known, anchor = self._anchors.get(key)
            if not known:
                anchor = await self._edge_time(query, session)
                self._anchors.remember(key, anchor)
        walk = WindowWalk(query.order, anchor, query.created_from if descending else query.created_to)
        documents: list[dict[str, Any]] = []
        window: Window | None = walk.current
        while window is not None:
            needed = wanted - len(documents)
            pipeline = [*query.pipeline(position, window), query.sort(), {"$limit": needed}]
            found = await self._aggregate(pipeline, needed, session)
            documents += found
            if len(documents) >= wanted:
                break
            window = walk.advance(len(found), wanted - len(documents))
        return documents

    async def newest(
        self, core_id: str, *, since_unit: str | None = None, limit: int = DEFAULT_LIMIT
    ) -> SlicePage:
        """The core's newest page of slices, as :meth:`find` with ``core_id`` answers it (the same slices, in
        the same order, and a ``next_cursor`` that :meth:`find` continues), read so that its cost does not
        grow with the core's history on any server: where the newest slices are comes from one unit read by
        ``_id`` (``since_unit``, the unit the core's last roll wrote to; without it, :meth:`find`), and each
        read is a range on ``slices.created_at`` open towards the newest slice, as wide as a few hours of the
        core's rolls (``_recent.py``)."""
        query = SliceFilter.of(core_id, None, None, None, None, "desc")
        size = _page_size(limit)
        documents = None
        if since_unit is not None:
            documents = await newest_documents(
                self._units, query, require_id(since_unit, "since_unit"), size + 1, self._max_time_ms
            )
        if documents is None:
            return await self.find(core_id=core_id, limit=size)
        if len(documents) <= size:
            return SlicePage(items=SliceView.from_unwound(documents), next_cursor=None)
        end = resumable_end(documents[:size])
        key = slice_key(documents[end - 1], None)
        items = SliceView.from_unwound(documents[:end])
        return SlicePage(items=items, next_cursor=self._cursors.encode(key, query.fingerprint))

    async def _edge_time(self, query: SliceFilter, session: Any | None) -> datetime | None:
        """Where a page without a start bound begins: the newest (``desc``) or oldest slice time of the first
        unit in scope in slice-time order. Only the windows depend on it, never which slices a page returns.

        The query has no condition on the slices, so the index range on ``slices.created_at`` is complete and
        the index itself yields that order (a condition there would make the server sort every unit). None
        (one window: all time) when no unit is in scope or the first holds no dated slice (an erased unit's
        tombstone, which has no slices, comes first in ascending order while it lasts).
        """
        descending = query.order == "desc"
        document = await self._units.find_one(
            query.scope(),
            {"slices.created_at": 1},
            sort=[("slices.created_at", DESCENDING if descending else ASCENDING)],
            max_time_ms=self._max_time_ms,
            **_in(session),
        )
        times = [s.get("created_at") for s in (document or {}).get("slices") or [] if isinstance(s, dict)]
        stamps = [to_utc_ms(t) for t in times if isinstance(t, datetime)]
        if not stamps:
            return None
        return max(stamps) if descending else min(stamps)

    async def count(
        self,
        *,
        core_id: str | None = None,
        unit_id: str | None = None,
        created_from: datetime | None = None,
        created_to: datetime | None = None,
        text: str | None = None,
    ) -> int:
        """How many slices :meth:`find` would walk through with the same filters."""
        query = SliceFilter.of(core_id, unit_id, created_from, created_to, text)
        documents = await self._aggregate([*query.pipeline(), {"$count": "slices"}], 1)
        return int(documents[0]["slices"]) if documents else 0

    async def require(self, slice_id: str) -> SliceDetail:
        """The slice :meth:`get` answers; :class:`NotFound` where it answers None."""
        return found(await self.get(slice_id), f"slice {slice_id!r}")

    async def get(self, slice_id: str) -> SliceDetail | None:
        """A slice, its unit and core ids, and the messages of its interval; None if absent."""
        slice_id = require_id(slice_id, "slice_id")
        document = await self._units.find_one(
            {"slice_ids": slice_id},
            {"core_id": 1, "slices": {"$elemMatch": {"id": slice_id}}},
            max_time_ms=self._max_time_ms,
        )
        pieces = (document or {}).get("slices") or []
        if not pieces:
            return None
        view = SliceView.from_document(document["_id"], document.get("core_id"), pieces[0])
        messages = await self.messages(view.unit_id, view.start_index or 0, view.end_index or 0)
        return SliceDetail(**view.model_dump(), messages=messages)

    async def messages(self, unit_id: str, start: int, end: int) -> list[Message]:
        """Messages ``[start, end)`` of a unit through a ``$slice`` projection: only those cross the wire.

        Empty for an empty range; :class:`NotFound` when the unit does not exist.
        """
        unit_id = require_id(unit_id, "unit_id")
        first = max(require_int(start, "start"), 0)
        stop = max(require_int(end, "end"), 0)
        if stop <= first:
            return []
        document = await self._units.find_one(
            {"_id": unit_id},
            marked({"_id": 1, "conversation_messages": {"$slice": [first, stop - first]}}),
            max_time_ms=self._max_time_ms,
        )
        if document is None or is_tombstone(document):
            raise NotFound(f"no unit {unit_id!r}")
        return [Message.model_validate(m) for m in document.get("conversation_messages") or []]

    async def unit(self, unit_id: str) -> UnitView:
        """A unit's counts, size and slices without its messages; :class:`NotFound` if absent."""
        unit_id = require_id(unit_id, "unit_id")
        pipeline: list[dict[str, Any]] = [
            {"$match": live({"_id": unit_id})},
            {
                "$project": {
                    "core_id": 1,
                    "slices": 1,
                    "size_bytes": 1,
                    "updated_at": 1,
                    "previous_unit_id": 1,
                    "version": 1,
                    "message_count": _message_count(),
                }
            },
        ]
        documents = await self._aggregate(pipeline, 1)
        if not documents:
            raise NotFound(f"no unit {unit_id!r}")
        document = documents[0]
        size = document.get("size_bytes")
        raw_slices = document.get("slices")
        slices = raw_slices if isinstance(raw_slices, list) else []
        return UnitView(
            id=str(document["_id"]),
            core_id=str(document.get("core_id")),
            message_count=int(document.get("message_count") or 0),
            size_bytes=size if isinstance(size, int) else None,
            share_of_limit=size / MAX_DOCUMENT_BYTES if isinstance(size, int) else None,
            updated_at=document.get("updated_at"),
            previous_unit_id=document.get("previous_unit_id"),
            version=document.get("version"),
            slices=[
                SliceView.from_document(document["_id"], document.get("core_id"), piece)
                for piece in slices
                if isinstance(piece, dict)
            ],
        )

    async def stats(
        self,
        core_id: str | None = None,
        *,
        now: datetime | None = None,
        days: int = STATS_DAYS,
        largest: int = LARGEST_UNITS,
    ) -> MemoryStats:
        """Units, slices and messages; slices per UTC day for the last ``days`` days (today included, zero
        days listed); the ``largest`` units by stored BSON size with their share of the 16 MiB limit.

        Sizes come from the ``size_bytes`` field the repository keeps exact on every write (it works on
        every backend; ``$bsonSize`` does not run on the embedded one). Units written by other tools without
        it rank last until ``repair`` fills it in.
        """
        # every unit has a core id; a query without one would also count erased units' tombstones
        units: dict[str, Any] = (
            dict(NOT_ERASED) if core_id is None else {"core_id": require_id(core_id, "core_id")}
        )
        stamp = to_utc_ms(optional_datetime(now, "now") or utc_now())
        days = _positive(days, "days", 366)
        largest = _positive(largest, "largest", MAX_LIMIT)
        totals = await self._aggregate(
            [
                {"$match": units},
                {
                    "$group": {
                        "_id": None,
                        "units": {"$sum": 1},
                        "slices": {"$sum": {"$size": {"$ifNull": ["$slices", []]}}},
                        "messages": {"$sum": _message_count()},
                    }
                },
            ],
            1,
        )
        total = totals[0] if totals else {}
        return MemoryStats(
            core_id=units.get("core_id"),
            units=int(total.get("units", 0)),
            slices=int(total.get("slices", 0)),
            messages=int(total.get("messages", 0)),
            slices_per_day=await self._slices_per_day(units, stamp, days),
            largest_units=await self._largest(units, largest),
            generated_at=stamp,
        )

    async def cores(
        self, *, prefix: str | None = None, after: str | None = None, limit: int = DEFAULT_LIMIT
    ) -> CorePage:
        """One page of cores in id order (those whose id starts with ``prefix``, taken literally), each with
        its window's size, current unit, last roll and lease, never its messages; ``after`` is a previous
        page's ``next_cursor``. Two index-backed queries a page (``admin/_cores.py``)."""
        return await core_page(
            self._database, prefix=prefix, after=after, limit=_page_size(limit), max_time_ms=self._max_time_ms
        )

    async def unit_counts(self, unit_ids: list[str]) -> dict[str, UnitCounts]:
        """The message and slice counts of these units by id (from an index alone; absent units left out)."""
        ids = [require_id(unit_id, "unit_id") for unit_id in unit_ids]
        return await unit_counts(self._database, ids[:MAX_LIMIT], self._max_time_ms)

    async def check(self, core_id: str | None = None) -> CheckReport:
        """Every unit breaking the invariants; see :meth:`partner_repo.UnitChecker.check`."""
        return await UnitChecker(self._database, max_time_ms=self._max_time_ms).check(core_id)

    async def repair(self, core_id: str | None = None) -> RepairReport:
        """Normalize the broken units in place; see :meth:`partner_repo.UnitChecker.repair`."""
        return await UnitChecker(self._database, max_time_ms=self._max_time_ms).repair(core_id)

    async def _slices_per_day(self, units: dict[str, Any], now: datetime, days: int) -> list[DayCount]:
        first = datetime(now.year, now.month, now.day, tzinfo=UTC) - timedelta(days=days - 1)
        until = first + timedelta(days=days)
        window = {"$type": _DATE, "$gte": first, "$lt": until}
        counts = await self._aggregate(
            [
                {"$match": {**units, "slices": {"$elemMatch": {"created_at": window}}}},
                {"$project": {"slices.created_at": 1}},
                {"$unwind": "$slices"},
                {"$match": {"slices.created_at": window}},
                {
                    "$group": {
                        "_id": {"$dateToString": {"format": "%Y-%m-%d", "date": "$slices.created_at"}},
                        "slices": {"$sum": 1},
                    }
                },
            ],
            days,
        )
        by_day = {str(c["_id"]): int(c["slices"]) for c in counts}
        result = []
        for offset in range(days):
            day = (first + timedelta(days=offset)).date()
            result.append(DayCount(day=day, slices=by_day.get(day.isoformat(), 0)))
        return result

    async def _largest(self, units: dict[str, Any], largest: int) -> list[UnitSize]:
        documents = await self._aggregate(
            [
                {"$match": units},
                {"$sort": {"size_bytes": -1, "_id": 1}},
                {"$limit": largest},
                {"$project": {"core_id": 1, "size_bytes": 1, "message_count": _message_count()}},
            ],
            largest,
        )
        return [
            UnitSize.of(
                d["_id"], d.get("core_id"), int(d.get("size_bytes") or 0), int(d.get("message_count") or 0)
            )
            for d in documents
        ]

    async def _aggregate(
        self, pipeline: list[dict[str, Any]], length: int, session: Any | None = None
    ) -> list[dict[str, Any]]:
        return await driver.aggregate_list(
            self._units, pipeline, length, maxTimeMS=self._max_time_ms, **_in(session)
        )


def _in(session: Any | None) -> dict[str, Any]:
    """``session=`` for a read, only when there is one (test doubles and the embedded backend take none)."""
    return {} if session is None else {"session": session}


def _message_count() -> dict[str, Any]:
    """The stored count, or (for units written by other tools) the length of the messages array."""
    return {"$ifNull": ["$message_count", {"$size": {"$ifNull": ["$conversation_messages", []]}}]}


def require_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{what} must be an integer, got {type(value).__name__}")
    return value


def _page_size(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidInput(f"limit must be an integer, got {type(limit).__name__}")
    if limit < 1:
        raise InvalidInput(f"limit must be at least 1, got {limit}")
    return min(limit, MAX_LIMIT)


def _positive(value: object, what: str, cap: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"{what} must be a positive integer, got {value!r}")
    return min(value, cap)


__all__ = [
    "CausalReads",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "SESSIONS_UNSUPPORTED",
    "SliceQueries",
]

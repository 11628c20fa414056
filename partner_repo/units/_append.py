"""The append machinery of :class:`partner_repo.MemoryUnitRepository`: optimistic, fair, O(increment).

An append reads the unit's small head (message count, version, last slice), then sends one ``$push`` of only
the new messages and slice, guarded by the version it read. A writer that lost the race re-reads and tries
again, so intervals stay disjoint and contiguous without a lock or a transaction, and an uncontended append
costs two round trips whatever the unit's size.

A repository also remembers the heads it last saw (:class:`~partner_repo.units._heads.HeadCache`): a unit it
appended to before gets the guarded ``$push`` straight away, one round trip. The guard (version and counts)
makes a stale entry harmless: the push matches nothing, the entry is dropped and the append takes the usual
path. Two rules keep contention fair: appends to one unit through one repository take turns (tasks of one
process never race each other: :class:`UnitQueue`), and a repository that lost a race on a unit reads before
each push there for a while (a remembered head would otherwise let the last winner win every round and
starve writers in other processes).
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from partner_repo.clock import utc_now
from partner_repo.errors import ConflictError, InvalidInput, StaleIncrement, UnitTooLarge
from partner_repo.models import MemorySlice, MemoryUnit
from partner_repo.mongo import (
    DuplicateKeyError,
    append_size,
    field_size_change,
    is_tombstone,
    mark_size_change,
    slice_document,
    stored_datetime,
    unit_document,
    with_mark,
)
from partner_repo.units._claims import SliceIdClaims
from partner_repo.units._heads import HeadCache, UnitHead, head_from
from partner_repo.units._increment import AppendRequest
from partner_repo.units._marks import FENCE_PROJECTION
from partner_repo.units._rules import duplicate_error, is_slice_id_collision, refuse_too_large


class UnitQueue:
    """Appends to one unit through one repository go one at a time; other units are not held up.

    Tasks of one process sharing a repository would otherwise race each other over the network: all but one
    push lose and go again, and under sustained contention one unlucky task can lose every time. Queued, each
    append finds the head the previous one left (one round trip) and only other processes can make it retry.
    An entry lives only while some append to its unit is running or waiting.
    """

    def __init__(self) -> None:
        self._turns: dict[str, _Turn] = {}

    def hold(self, unit_id: str) -> _Turn:
        """``async with queue.hold(unit_id):`` waits for the unit's earlier appends, then holds it."""
        turn = self._turns.get(unit_id)
        if turn is None:
            turn = self._turns[unit_id] = _Turn(self._turns, unit_id)
        return turn


class _Turn:
    """One unit's queue: a lock, and how many appends hold or wait for it (the entry goes with the last)."""

    __slots__ = ("_lock", "_turns", "_unit_id", "_users")

    def __init__(self, turns: dict[str, _Turn], unit_id: str) -> None:
        self._turns = turns
        self._unit_id = unit_id
        self._lock = asyncio.Lock()
        self._users = 0

    async def __aenter__(self) -> None:
        self._users += 1
        try:
            await self._lock.acquire()
        except BaseException:  # cancelled while waiting: never held
            self._leave()
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        self._lock.release()
        self._leave()

    def _leave(self) -> None:
        self._users -= 1
        if not self._users:
            del self._turns[self._unit_id]


APPEND_PATIENCE_S = 10.0
"""How long a contended append keeps re-reading and retrying before giving up with :class:`ConflictError`.

A time, not a count: the same count of attempts is milliseconds on a fast backend and seconds on a slow
network."""


ReadHead = Callable[[str], Awaitable[UnitHead | None]]
GetSlice = Callable[[str, str], Awaitable[MemorySlice | None]]


class UnitAppender:
    """Runs appends on one collection, sharing the repository's head cache."""

    def __init__(
        self,
        units: Any,
        heads: HeadCache,
        *,
        max_bytes: int,
        read_head: ReadHead,
        get_slice: GetSlice,
        claims: SliceIdClaims,
    ) -> None:
        self._units = units
        self._claims = claims
        self._heads = heads
        self._max_bytes = max_bytes
        self._read_head = read_head
        self._get_slice = get_slice
        self._queue = UnitQueue()

    async def append(self, request: AppendRequest) -> MemorySlice:
        """Append ``request`` once, whatever the contention; see the module docstring."""
        async with self._queue.hold(request.unit_id):
            try:
                return await self._append_increment(request)
            except _Landed as landed:
                return landed.piece

    async def _append_increment(self, request: AppendRequest) -> MemorySlice:
        """The optimistic loop: push (straight away to a remembered head), and on a lost race try again."""
        message_documents = [m.model_dump() for m in request.increment]
        given_id = request.given_id
        cacheable = (given_id is None or request.fresh_slice_id) and not self._heads.contended(
            request.unit_id
        )
        known = self._heads.get(request.unit_id) if cacheable else None
        if known is not None and known.core_id == request.core_id and request.admits(known):
            stored = await self._push_to_known_head(
                known, message_documents, request.piece, request, minted=given_id is None
            )
            if stored is not None:
                return stored
        return await self._retrying(request, message_documents)

    async def _retrying(self, request: AppendRequest, message_documents: list[dict[str, Any]]) -> MemorySlice:
        """Read the head, check the fences, push; again after a lost race, for :data:`APPEND_PATIENCE_S`."""
        unit_id, given_id, piece = request.unit_id, request.given_id, request.piece
        deadline = time.monotonic() + APPEND_PATIENCE_S
        to_claim = None if request.fresh_slice_id else given_id  # a caller's own id: claimed once, below
        for attempt in itertools.count():
            if attempt and request.created_at is None:
                # A slice without a caller-given time is created when it is stored. Re-stamping a retry also
                # keeps the loser of a race on the short path: with its first, now stale, stamp it would have
                # to be inserted before the winners' slices (one more read) and would keep losing to writers
                # with fresh stamps under sustained contention.
                piece = piece.model_copy(update={"created_at": max(request.stamp, utc_now())})
            head = await self._checked_head(request)
            if to_claim is not None:  # once the append is known to be valid
                await self._claims.claim(unit_id, [to_claim])
                to_claim = None
            if head is None:
                stored = await self._create_with(request, piece)
            else:
                stored = await self._push(head, message_documents, piece, request)
            if stored is not None:
                return stored
            self._heads.lost(unit_id)
            if given_id is not None and (existing := await self._get_slice(unit_id, given_id)) is not None:
                return existing
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(random.uniform(0, 0.0005 * min(attempt, 20)))
        raise ConflictError(
            f"append to unit {unit_id!r} lost the race for {APPEND_PATIENCE_S:g} s ({attempt + 1} attempts); "
            "try again"
        )

    async def _checked_head(self, request: AppendRequest) -> UnitHead | None:
        """The unit's head, read, once the fences admit the append (else :class:`StaleIncrement`, or the
        stored slice when this very append landed before: a retry after a lost reply)."""
        unit_id, given_id = request.unit_id, request.given_id
        head = await self._read_head(unit_id)
        if head is not None:
            self._heads.learn(head)
        fenced = request.expected_start is not None or request.first_position is not None
        moved_on = (
            not request.admits(head)
            if head is not None
            else request.expected_start not in (None, 0)  # resolved against a unit that is gone
        )
        if fenced and moved_on:
            existing = None if given_id is None else await self._get_slice(unit_id, given_id)
            if existing is not None:
                raise _Landed(existing)
            raise request.stale(head)
        if head is not None and head.core_id != request.core_id:
            raise InvalidInput(f"unit {unit_id!r} belongs to core {head.core_id!r}, not {request.core_id!r}")
        return head

    async def _push_to_known_head(
        self,
        known: UnitHead,
        message_documents: list[dict[str, Any]],
        piece: MemorySlice,
        request: AppendRequest,
        *,
        minted: bool,
    ) -> MemorySlice | None:
        """The one-round-trip append: push guarded by a remembered head; None (entry dropped) when stale.

        The guard also holds the counts and size, not only the version, so a unit deleted and re-created by
        someone else up to the same version is not pushed to at a wrong position. A remembered size that
        refuses the push is not trusted either: the usual path re-reads it and decides. A slice id minted by
        this very call cannot be in the unit, so its absence is checked only for an id the caller passed (a
        retried roll reuses its id).
        """
        try:
            stored = await self._push(
                known, message_documents, piece, request, exact=True, check_slice_id=not minted
            )
        except UnitTooLarge:
            stored = None
        if stored is None:
            self._heads.forget(known.id, up_to=known.version)
            self._heads.lost(known.id)
        return stored

    async def _create_with(self, request: AppendRequest, piece: MemorySlice) -> MemorySlice | None:
        """Insert a new unit holding the increment; None when another writer created it first.

        The id may hold a tombstone instead (:func:`partner_repo.mongo._storage.is_tombstone`): an erased
        unit's refuses the append for good; the one a window clear left with its mark becomes the unit, only
        while the mark admits the increment."""
        increment = request.increment
        placed = piece.model_copy(update={"start_index": 0, "end_index": len(increment)})
        unit = MemoryUnit(
            id=request.unit_id,
            core_id=request.core_id,
            conversation_messages=increment,
            slices=[placed],
            updated_at=placed.created_at,
            previous_unit_id=request.previous_unit_id,
            version=1,
        )
        document = unit_document(unit)
        if request.first_position is not None:
            if request.trimmed_to is not None:
                document["trimmed_to"] = request.trimmed_to
            with_mark(document, request.first_position + len(increment), len(increment))
        refuse_too_large(request.unit_id, document["size_bytes"], self._max_bytes)
        try:
            await self._units.insert_one(document)
        except DuplicateKeyError as exc:
            if is_slice_id_collision(exc):
                raise duplicate_error(exc, request.unit_id, "") from None
            return await self._create_over_fence(request, document, placed)
        self._heads.learn(head_from(document))
        return placed

    async def _create_over_fence(
        self, request: AppendRequest, document: dict[str, Any], placed: MemorySlice
    ) -> MemorySlice | None:
        """The insert found the id taken: by a unit (None: read it and push), by an erased unit's tombstone
        (refused), or by a clear's tombstone, which becomes the unit while its mark admits the increment."""
        fence = await self._units.find_one({"_id": request.unit_id}, FENCE_PROJECTION)
        if fence is None or not is_tombstone(fence):
            return None
        reserved, first = fence.get("taken_until"), request.first_position
        if not isinstance(reserved, int):
            raise erased_error(request)
        if first is not None and reserved > first:
            raise StaleIncrement(request.unit_id, 0, None, position=first, taken_until=reserved)
        if first is None:
            with_mark(document, reserved, len(request.increment))
        guard = {"_id": request.unit_id, "core_id": {"$exists": False}, "taken_until": reserved}
        result = await self._units.replace_one(guard, document)
        if not result.matched_count:
            return None
        self._heads.learn(head_from(document))
        return placed

    async def _push(
        self,
        head: UnitHead,
        message_documents: list[dict[str, Any]],
        piece: MemorySlice,
        request: AppendRequest,
        *,
        exact: bool = False,
        check_slice_id: bool = True,
    ) -> MemorySlice | None:
        """Round trip 2: push only the increment, guarded by the version read; None when it lost the race.

        ``exact`` also guards the counts and size (for a remembered head rather than one just read). The
        version guard is also the position fence: every change of the unit's mark bumps the version. A
        positioned increment moves the mark to its end; any other counts itself in, so the mark stays
        trusted (its messages take no positions).
        """
        start = head.message_count
        placed = piece.model_copy(update={"start_index": start, "end_index": start + len(message_documents)})
        if request.first_position is None:
            position = await self._slice_position(head, placed)
        else:  # a roll's increment: its positions come after every slice's
            placed, position = after_the_last(head, placed), None
        assert placed.id is not None
        pushed = _Push.of(head, message_documents, placed, request)
        refuse_too_large(head.id, head.size_bytes + pushed.added, self._max_bytes)
        guard: dict[str, Any] = {"_id": head.id, "version": head.version}
        if exact:
            guard.update(
                message_count=head.message_count, slice_count=head.slice_count, size_bytes=head.size_bytes
            )
        if check_slice_id:
            guard["slice_ids"] = {"$ne": placed.id}
        try:
            result = await self._units.update_one(guard, pushed.update(message_documents, placed, position))
        except DuplicateKeyError as exc:
            raise duplicate_error(exc, head.id, "") from None
        if not result.matched_count:
            return None
        self._heads.learn(pushed.head_after(head, placed, position))
        return placed

    async def _slice_position(self, head: UnitHead, piece: MemorySlice) -> int | None:
        """Where the new slice goes to keep slices sorted by creation time.

        None (the end) in the usual case; an explicit position only when its time is older than the last
        slice's (a writer whose clock is behind).
        """
        last = head.last_slice
        assert piece.created_at is not None
        if last is None or last.created_at is None or last.created_at <= piece.created_at:
            return None
        document = await self._units.find_one({"_id": head.id}, {"slices.created_at": 1})
        times = [stored_datetime(s.get("created_at")) for s in (document or {}).get("slices", [])]
        return bisect.bisect_right(times, piece.created_at)


def after_the_last(head: UnitHead, placed: MemorySlice) -> MemorySlice:
    """``placed`` (a positioned increment's slice) stamped no earlier than the unit's last slice.

    A roll's slice carries its turn's time. A writer descheduled between recording its turn and rolling
    stamps its slice earlier than a roll that stored meanwhile, though its positions come after that roll's:
    placed by its time it would go before it, and the slices would no longer be in position order (nor tile
    the unit in array order), depending on how the writers were scheduled. It goes at the end, taking the
    last slice's time when its own is earlier: sorted by creation time and by position alike.
    """
    last = head.last_slice
    if last is None or last.created_at is None or placed.created_at is None:
        return placed
    if placed.created_at >= last.created_at:
        return placed
    return placed.model_copy(update={"created_at": last.created_at})


class _Landed(Exception):
    """This very append landed before (a repeat after a lost reply): its stored slice."""

    def __init__(self, piece: MemorySlice) -> None:
        super().__init__(piece.id)
        self.piece = piece


@dataclass(frozen=True)
class _Push:
    """What one push does to a unit besides its messages and slice: the mark it leaves (moved to a
    positioned increment's end, or counting an unpositioned one in) and the bytes it adds, exactly."""

    added: int
    count: int
    taken_until: int | None
    taken_count: int | None
    trimmed_to: int | None
    mark: dict[str, dict[str, Any]]

    @classmethod
    def of(
        cls, head: UnitHead, documents: list[dict[str, Any]], placed: MemorySlice, request: AppendRequest
    ) -> _Push:
        added = append_size(documents, head.message_count, slice_document(placed), head.slice_count)
        count = head.message_count + len(documents)
        mark: dict[str, dict[str, Any]] = {}
        taken_until, taken_count, trimmed_to = head.taken_until, head.taken_count, head.trimmed_to
        if request.first_position is not None:  # the increment takes its positions: the mark moves to its end
            taken_until, taken_count = request.first_position + len(documents), count
            mark["$set"] = {"taken_until": taken_until, "taken_count": taken_count}
            if request.trimmed_to is not None:
                trimmed_to = mark["$set"]["trimmed_to"] = request.trimmed_to
                added += field_size_change("trimmed_to", head.trimmed_to, trimmed_to)
        elif taken_count is not None:  # counted in, so the mark stays trusted
            taken_count += len(documents)
            mark["$inc"] = {"taken_count": len(documents)}
        if taken_until is not None and taken_count is not None:
            added += mark_size_change((head.taken_until, head.taken_count), (taken_until, taken_count))
        return cls(added, count, taken_until, taken_count, trimmed_to, mark)

    def update(
        self, documents: list[dict[str, Any]], placed: MemorySlice, position: int | None
    ) -> dict[str, Any]:
        push_slice: dict[str, Any] = {"$each": [slice_document(placed)]}
        if position is not None:
            push_slice["$position"] = position
        return {
            "$push": {
                "conversation_messages": {"$each": documents},
                "slices": push_slice,
                "slice_ids": placed.id,
            },
            "$inc": {
                "message_count": len(documents),
                "slice_count": 1,
                "size_bytes": self.added,
                "version": 1,
                **self.mark.get("$inc", {}),
            },
            "$max": {"updated_at": placed.created_at},  # a writer whose clock is behind: kept
            **({"$set": self.mark["$set"]} if "$set" in self.mark else {}),
        }

    def head_after(self, head: UnitHead, placed: MemorySlice, position: int | None) -> UnitHead:
        """The unit's head once the push landed (the repository remembers it)."""
        assert placed.created_at is not None
        updated_at = placed.created_at
        if head.updated_at is not None and head.updated_at > updated_at:
            updated_at = head.updated_at
        return UnitHead(
            id=head.id,
            core_id=head.core_id,
            message_count=self.count,
            size_bytes=head.size_bytes + self.added,
            version=head.version + 1,
            updated_at=updated_at,
            previous_unit_id=head.previous_unit_id,
            last_slice=placed if position is None else head.last_slice,
            slice_count=head.slice_count + 1,
            taken_until=self.taken_until,
            taken_count=self.taken_count,
            trimmed_to=self.trimmed_to,
            sealed=head.sealed,
        )


def erased_error(request: AppendRequest) -> ConflictError:
    """The unit was erased (a tombstone holds its id, see :mod:`partner_repo.erasure._eraser`): a fenced
    append's unit moved on (:class:`StaleIncrement`, its roller re-checks its lease); any other append is
    refused, as the id cannot hold a unit again until the tombstone expires."""
    if request.expected_start is not None or request.first_position is not None:
        return StaleIncrement(request.unit_id, request.expected_start or 0, None)
    return ConflictError(f"unit {request.unit_id!r} was erased; its id cannot be used for a new unit yet")


__all__ = [
    "APPEND_PATIENCE_S",
    "UnitAppender",
    "UnitQueue",
    "erased_error",
]

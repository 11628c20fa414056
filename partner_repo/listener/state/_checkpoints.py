"""ListenerCheckpoints: the only code that reads or writes ``listener_checkpoints``.

Per listener group it keeps two kinds of documents:

- one *group* document: how the group started (``start_from``, whether the ``"now"`` baseline is complete),
  the change stream's resume token (and whether it must be used as ``startAfter``, after an invalidate),
  the time of the last delivered slice, the group lease (its owner and heartbeat counter) and what the
  holder reports with each heartbeat for ``partner-repo listener status`` (its source, consumers, clock);
- one *unit* document per memory unit the group has seen: the ids of the unit's slices every consumer has
  finished (``delivered``), the slices only some consumers have finished (``partial``: consumer, slice, and
  the revision when above 0), the revisions of replaced summaries every consumer has finished (``revised``:
  slice, revision), the unit's core, and the unit fingerprint at which every slice was delivered.

A delivery is a slice at a revision (:data:`DeliveryKey`): a slice whose summary ``resummarize`` replaced is
delivered again at its new revision, once, whatever was delivered of it before.

The group document also holds the group's erasure cursor (``erasure_seq``: every part of the erasure log up
to it is delivered; ``erasure_partial``: consumer and position of parts only some consumers finished). An
erasure replaces the unit documents of the units it erased, in every group, with tombstones
(:func:`remove_unit_progress`): ``{_id, kind: "erased-unit", group, unit_id, erased_at}``, removed by a TTL
index after :data:`~partner_repo.mongo._indexes.TOMBSTONE_RETENTION`. A unit document is never written over a
tombstone, so a commit the pipeline held back behind a slow slice of another unit, saved after the erasure,
records nothing for the erased unit instead of bringing its progress back.

Per-unit sets of slice ids, not a time or an array index, say what was delivered: a slice with an older
``created_at`` (a writer whose clock is behind) is inserted in the middle of its unit's array, so neither a
time high-water mark nor a position would see it. A unit document is bounded by its unit (a slice id per
slice), and every update is a single atomic ``$addToSet``/``$pull``/``$set``, so it is safe to repeat.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from partner_repo.clock import utc_now
from partner_repo.mongo import (
    CHECKPOINTS,
    ERASED_AT,
    DuplicateKeyError,
    MongoDatabase,
    driver,
    insert_new,
    stored_datetime,
)
from partner_repo.units import UnitFingerprint
from partner_repo.validation import require_id


async def remove_unit_progress(
    database: MongoDatabase, unit_ids: Collection[Any], *, group: str | None = None
) -> int:
    """Remove what listener groups (every group, or one, when given) recorded of these units (delivered
    slice ids, partial deliveries, fingerprints), leaving a tombstone per group and unit in its place, so
    that no commit saved later brings it back. Returns how many progress documents went.

    Two idempotent commands: a tombstone is inserted for every group and unit that has no document (one
    unordered ``insert``; a key already taken is left as it is), then every progress document left becomes
    a tombstone (one ``update``). A commit racing them either lands on progress the second turns into a
    tombstone, or finds the key a tombstone's, and records nothing."""
    if not unit_ids:
        return 0
    collection = database[CHECKPOINTS]
    ids, at = list(unit_ids), utc_now()
    if group is None:
        groups = [d["group"] async for d in collection.find({"kind": "group"}, {"group": 1})]
    else:
        groups = [group]
    await insert_new(
        collection,
        [
            {"_id": {"group": g, "unit_id": u}, "kind": ERASED_UNIT, "group": g, "unit_id": u, ERASED_AT: at}
            for g in groups
            for u in ids
        ],
    )
    query: dict[str, Any] = {"kind": "unit", "unit_id": {"$in": ids}}
    if group is not None:
        query["group"] = group
    erased = {"$set": {"kind": ERASED_UNIT, ERASED_AT: at}, "$unset": dict.fromkeys(_PROGRESS_FIELDS, "")}
    result = await collection.update_many(query, erased)
    return int(result.matched_count)


_PROGRESS_FIELDS = ("core_id", "delivered", "partial", "fingerprint")
"""What a unit document holds besides its key: what a tombstone drops."""


StartFrom = Literal["beginning", "now"]
TokenKind = Literal["resume_after", "start_after"]
DeliveryKey = tuple[str, int]
"""What is delivered: a slice id and the revision of its summary (0: as its roll stored it)."""

ERASED_UNIT = "erased-unit"
"""The ``kind`` of a group's tombstone for an erased unit (what replaces its ``"unit"`` document)."""


@dataclass(frozen=True)
class GroupCheckpoint:
    """Where a listener group stands."""

    group: str
    start_from: StartFrom
    baseline_pending: bool
    resume_token: Mapping[str, Any] | None
    token_kind: TokenKind | None
    created_at: datetime | None
    last_delivered_slice_at: datetime | None


@dataclass
class UnitProgress:
    """What a group has delivered of one unit (mutable: the listener keeps it current in memory)."""

    unit_id: str
    core_id: str | None = None
    delivered: set[str] = field(default_factory=set)
    partial: dict[DeliveryKey, set[str]] = field(default_factory=dict)
    fingerprint: UnitFingerprint | None = None
    revised: dict[str, int] = field(default_factory=dict)
    """Slice id -> the highest revision every consumer finished (slices delivered only as rolled: absent)."""

    def done_by(self, key: DeliveryKey) -> set[str]:
        """The consumers that finished the delivery ``key`` although not every consumer has."""
        return self.partial.get(key, set())

    def has_delivered(self, key: DeliveryKey) -> bool:
        """Whether every consumer finished this slice at this revision (or a later one)."""
        slice_id, revision = key
        return slice_id in self.delivered and (revision <= 0 or self.revised.get(slice_id, 0) >= revision)

    def record_delivered(self, key: DeliveryKey) -> None:
        slice_id, revision = key
        self.delivered.add(slice_id)
        if revision > 0:
            self.revised[slice_id] = max(self.revised.get(slice_id, 0), revision)


class ListenerCheckpoints:
    """Checkpoints of one listener group on the database it is given."""

    def __init__(self, database: MongoDatabase, group: str) -> None:
        self._collection = database[CHECKPOINTS]
        self._group = require_id(group, "group")

    @property
    def group_name(self) -> str:
        return self._group

    # -- the group document ------------------------------------------------------------------------------

    async def group(self) -> GroupCheckpoint | None:
        """The group's checkpoint, or None for a group never started."""
        document = await self._collection.find_one({"_id": self._group_key()})
        return None if document is None else _group_from(document)

    async def open_group(self, start_from: StartFrom, *, erasure_seq: int = 0) -> GroupCheckpoint:
        """The group's checkpoint, created on first use (atomically: concurrent first starts agree).

        A group created with ``start_from="now"`` is ``baseline_pending`` until :meth:`finish_baseline`. A new
        group's erasure cursor starts at ``erasure_seq`` (the log's end: what was erased before it existed
        was gone before it could deliver any of it); a group from before erasures has none and starts at 0.
        """
        document = await driver.upserted(
            self._collection,
            self._group_key(),
            {
                "$setOnInsert": {
                    "kind": "group",
                    "group": self._group,
                    "start_from": start_from,
                    "baseline_pending": start_from == "now",
                    "resume_token": None,
                    "token_kind": None,
                    "created_at": utc_now(),
                    "last_delivered_slice_at": None,
                    "owner": None,
                    "beat": 0,
                    "erasure_seq": erasure_seq,
                }
            },
        )
        return _group_from(document)

    async def finish_baseline(self) -> None:
        await self._collection.update_one({"_id": self._group_key()}, {"$set": {"baseline_pending": False}})

    async def save_token(
        self, token: Mapping[str, Any] | None, kind: TokenKind | None = "resume_after"
    ) -> None:
        """Persist the change stream position (None forgets it: the next start catches up by scan)."""
        await self._collection.update_one(
            {"_id": self._group_key()},
            {
                "$set": {
                    "resume_token": None if token is None else dict(token),
                    "token_kind": None if token is None else kind,
                    "token_saved_at": utc_now(),
                }
            },
        )

    async def save_last_delivered(self, slice_created_at: datetime) -> None:
        """Record the creation time of the newest slice delivered so far (for lag reporting)."""
        await self._collection.update_one(
            {
                "_id": self._group_key(),
                "$or": [
                    {"last_delivered_slice_at": None},
                    {"last_delivered_slice_at": {"$lt": slice_created_at}},
                ],
            },
            {"$set": {"last_delivered_slice_at": slice_created_at}},
        )

    # -- the group lease (see partner_repo.listener.state._lease) ------------------------------------

    async def claim(self, owner: str) -> bool:
        """Take the group's lease if it is free (or already ours), beating once; True when we hold it."""
        document = await self._collection.find_one_and_update(
            {"_id": self._group_key(), "$or": [{"owner": None}, {"owner": owner}]},
            {"$set": {"owner": owner, "beat_at": utc_now()}, "$inc": {"beat": 1}},
        )
        return document is not None

    async def beat(self, owner: str, vitals: Mapping[str, Any] | None = None) -> bool:
        """Prove we are alive; False when the lease is no longer ours (another listener took it over).

        ``vitals`` are fields the holder reports for monitoring (stored as given, with ``beat_at``, the
        holder's clock); a ``last_delivered_slice_at`` among them only ever moves the stored one forward.
        """
        fields = dict(vitals or {})
        newest = fields.pop("last_delivered_slice_at", None)
        if newest is not None:
            # Written first, so a status read that sees this beat's ``last_delivered_at`` also sees the slice
            # it stands for. Harmless if the lease is gone: the slice was delivered, and the value only grows.
            await self.save_last_delivered(newest)
        result = await self._collection.update_one(
            {"_id": self._group_key(), "owner": owner},
            {"$inc": {"beat": 1}, "$set": {**fields, "beat_at": utc_now()}},
        )
        return bool(result.matched_count)

    async def lease_state(self) -> tuple[str | None, int]:
        """The lease's holder (None when free) and its heartbeat counter."""
        document = await self._collection.find_one({"_id": self._group_key()}, {"owner": 1, "beat": 1})
        document = document or {}
        return document.get("owner"), int(document.get("beat") or 0)

    async def take_over(self, owner: str, silent_owner: str | None, silent_beat: int) -> bool:
        """Take the lease from a holder whose heartbeat stopped at ``silent_beat`` (only if it still has)."""
        result = await self._collection.update_one(
            {"_id": self._group_key(), "owner": silent_owner, "beat": silent_beat},
            {"$set": {"owner": owner, "beat_at": utc_now()}, "$inc": {"beat": 1}},
        )
        return bool(result.matched_count)

    async def release(self, owner: str) -> None:
        await self._collection.update_one(
            {"_id": self._group_key(), "owner": owner}, {"$set": {"owner": None}}
        )

    async def delete(self) -> int:
        """Forget the group entirely (its next start is a first start); returns the documents removed."""
        result = await self._collection.delete_many({"group": self._group})
        return int(result.deleted_count)

    # -- the erasure cursor (see partner_repo.listener.delivery._erasures) ---------------------------

    async def erasure_progress(self) -> tuple[int, dict[int, set[str]]]:
        """The position up to which every erasure is delivered, and the consumers that finished later ones."""
        document = await self._collection.find_one(
            {"_id": self._group_key()}, {"erasure_seq": 1, "erasure_partial": 1}
        )
        document = document or {}
        partial: dict[int, set[str]] = {}
        for entry in document.get("erasure_partial") or []:
            partial.setdefault(entry["seq"], set()).add(entry["consumer"])
        return int(document.get("erasure_seq") or 0), partial

    async def mark_erasure_done_by(self, seq: int, consumer: str) -> None:
        """One consumer finished the erasure at ``seq`` that others have not finished yet."""
        await self._collection.update_one(
            {"_id": self._group_key()}, {"$addToSet": {"erasure_partial": {"seq": seq, "consumer": consumer}}}
        )

    async def advance_erasures(self, seq: int) -> None:
        """Every consumer finished the erasure at ``seq`` (delivered or dead-lettered): the cursor moves."""
        await self._collection.update_one(
            {"_id": self._group_key(), "$or": [{"erasure_seq": None}, {"erasure_seq": {"$lt": seq}}]},
            {"$set": {"erasure_seq": seq}, "$pull": {"erasure_partial": {"seq": {"$lte": seq}}}},
        )

    # -- unit documents ----------------------------------------------------------------------------------

    async def unit(self, unit_id: str) -> UnitProgress:
        """The group's progress on a unit (empty when the group has delivered nothing of it)."""
        document = await self._collection.find_one({"_id": self._unit_key(unit_id)})
        if document is None or document.get("kind") == ERASED_UNIT:
            return UnitProgress(unit_id=unit_id)
        partial: dict[DeliveryKey, set[str]] = {}
        for entry in document.get("partial") or []:
            key = (entry["slice_id"], int(entry.get("revision") or 0))
            partial.setdefault(key, set()).add(entry["consumer"])
        revised: dict[str, int] = {}
        for entry in document.get("revised") or []:
            revised[entry["slice_id"]] = max(revised.get(entry["slice_id"], 0), int(entry["revision"]))
        stored = document.get("fingerprint")
        return UnitProgress(
            unit_id=unit_id,
            core_id=document.get("core_id"),
            delivered=set(document.get("delivered") or []),
            partial=partial,
            fingerprint=None if stored is None else tuple(stored),
            revised=revised,
        )

    async def fingerprints(self) -> dict[str, UnitFingerprint]:
        """Unit id -> the fingerprint at which the group had delivered every slice of the unit."""
        cursor = self._collection.find(
            {"group": self._group, "kind": "unit", "fingerprint": {"$ne": None}},
            {"unit_id": 1, "fingerprint": 1},
        )
        return {document["unit_id"]: tuple(document["fingerprint"]) async for document in cursor}

    async def mark_consumer_done(
        self, unit_id: str, core_id: str, slice_id: str, consumer: str, revision: int = 0
    ) -> None:
        """One consumer finished a slice (at ``revision``) that others have not finished yet."""
        entry = {"consumer": consumer, "slice_id": slice_id, **_revision(revision)}
        await self._upsert_unit(unit_id, core_id, {"$addToSet": {"partial": entry}})

    async def mark_delivered(self, unit_id: str, core_id: str, slice_id: str, revision: int = 0) -> None:
        """Every consumer finished the slice at ``revision`` (delivered or dead-lettered): that revision is
        never offered again."""
        added: dict[str, Any] = {"delivered": slice_id}
        if revision > 0:
            added["revised"] = {"slice_id": slice_id, "revision": revision}
        finished: dict[str, Any] = {"slice_id": slice_id, "revision": {"$exists": False}}
        if revision > 0:
            finished["revision"] = revision
        await self._upsert_unit(unit_id, core_id, {"$addToSet": added, "$pull": {"partial": finished}})

    async def mark_baseline(
        self,
        unit_id: str,
        core_id: str,
        slice_ids: Iterable[str],
        fingerprint: UnitFingerprint,
        revisions: Mapping[str, int] | None = None,
    ) -> None:
        """Take slices as delivered without delivering them (a ``start_from="now"`` group's history), at the
        ``revisions`` they have (slice id -> revision, for those above 0)."""
        added: dict[str, Any] = {"delivered": {"$each": list(slice_ids)}}
        if revisions:
            added["revised"] = {"$each": [{"slice_id": s, "revision": r} for s, r in revisions.items()]}
        await self._upsert_unit(
            unit_id, core_id, {"$addToSet": added, "$set": {"fingerprint": list(fingerprint)}}
        )

    async def save_fingerprint(self, unit_id: str, core_id: str, fingerprint: UnitFingerprint) -> None:
        """Every slice the unit held at ``fingerprint`` is delivered: polling need not read it again."""
        await self._upsert_unit(unit_id, core_id, {"$set": {"fingerprint": list(fingerprint)}})

    async def _upsert_unit(self, unit_id: str, core_id: str, update: dict[str, Any]) -> None:
        update = {**update}
        update["$setOnInsert"] = {"kind": "unit", "group": self._group, "unit_id": unit_id}
        if core_id:
            update["$set"] = {**update.get("$set", {}), "core_id": core_id}
        live = {"_id": self._unit_key(unit_id), "kind": {"$ne": ERASED_UNIT}}
        for attempt in range(2):
            # A duplicate key: a concurrent first write inserted the document (with the filter not an equality
            # on _id alone, the server does not retry the upsert itself: the second attempt updates it), or a
            # tombstone holds the key (the unit was erased: there is nothing of it to record).
            try:
                await self._collection.update_one(live, update, upsert=True)
                return
            except DuplicateKeyError:
                if attempt:
                    return

    # -- keys --------------------------------------------------------------------------------------------

    def _group_key(self) -> dict[str, str]:
        return {"group": self._group}

    def _unit_key(self, unit_id: str) -> dict[str, str]:
        return {"group": self._group, "unit_id": unit_id}


def _revision(revision: int) -> dict[str, int]:
    """A partial entry's revision field: stored only above 0, so entries written before 0.4 still match."""
    return {"revision": revision} if revision > 0 else {}


def _group_from(document: Mapping[str, Any]) -> GroupCheckpoint:
    token = document.get("resume_token")
    return GroupCheckpoint(
        group=document["group"],
        start_from=document.get("start_from", "beginning"),
        baseline_pending=bool(document.get("baseline_pending", False)),
        resume_token=None if token is None else dict(token),
        token_kind=document.get("token_kind") if token is not None else None,
        created_at=stored_datetime(document.get("created_at")),
        last_delivered_slice_at=stored_datetime(document.get("last_delivered_slice_at")),
    )


__all__ = [
    "DeliveryKey",
    "ERASED_UNIT",
    "GroupCheckpoint",
    "ListenerCheckpoints",
    "UnitProgress",
    "remove_unit_progress",
]

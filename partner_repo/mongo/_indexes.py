"""Every index the library relies on, in one place, and the shard key each collection may be sharded on.

``init_repository`` and the index migrations create exactly these (:mod:`partner_repo.mongo._topology` leaves
out what a sharded collection cannot have). Slice ids are unique across units without a unique index (which a
collection sharded by ``_id`` cannot have, see ``docs/sharding.md``): an id the library mints is a UUID4,
unique by construction, and an id a caller chooses is claimed first in ``slice_id_claims``, keyed by the
slice id (:mod:`partner_repo.units._claims`). The index on ``slice_ids`` (the derived array of a unit's slice
ids, see :mod:`partner_repo.mongo._storage`) only finds the unit of a slice id.

Erasure tombstones (an erased unit's id in ``memory_units``, a group's erased progress in
``listener_checkpoints``) carry ``erased_at``; a TTL index on it in each collection removes them once
:data:`TOMBSTONE_RETENTION` has passed. It is partial (``erased_at`` exists), so it holds the tombstones
only, never a key for each unit or checkpoint.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pymongo import ASCENDING, DESCENDING, IndexModel

from partner_repo.models import CORES as CORES
from partner_repo.models import UNITS as UNITS

CHECKPOINTS = "listener_checkpoints"
DEAD_LETTERS = "rolling_dead_letters"
ERASURES = "erasures"
"""The append-only log of finished erasures (ids only) listeners follow:
``partner_repo.listener.state._erasure_log``."""
ERASURE_REQUESTS = "erasure_requests"
"""Erasures in progress and done, and the ids each will erase: ``partner_repo.erasure._requests``."""
SLICE_ID_CLAIMS = "slice_id_claims"
"""The unit each caller-chosen slice id belongs to, by slice id: :mod:`partner_repo.units._claims`."""

SHARD_KEYS: dict[str, dict[str, Any]] = {
    UNITS: {"_id": "hashed"},
    SLICE_ID_CLAIMS: {"_id": "hashed"},
    "recall_index": {"core_id": 1, "_id": 1},
}
"""The documented shard key of each collection that may be sharded (``docs/sharding.md``); every other
collection stays unsharded (the erasure log's positions are ordered on one oplog only)."""

TOMBSTONE_RETENTION = timedelta(days=7)
"""How long an erasure tombstone stays before its TTL index removes it: far longer than any lease, any hold
of an erasure cut short (24 h) and any commit a listener holds back; ``docs/erasure.md`` says what remains."""

TOMBSTONE_TTL_INDEX = "erased_ttl"


def tombstone_ttl_index() -> IndexModel:
    """The TTL index that removes the erasure tombstones of a collection after :data:`TOMBSTONE_RETENTION`."""
    return IndexModel(
        [("erased_at", ASCENDING)],
        name=TOMBSTONE_TTL_INDEX,
        expireAfterSeconds=int(TOMBSTONE_RETENTION.total_seconds()),
        partialFilterExpression={"erased_at": {"$exists": True}},
    )


UNIT_INDEXES: list[IndexModel] = [
    IndexModel([("core_id", ASCENDING), ("updated_at", DESCENDING)], name="core_updated"),
    IndexModel([("slice_ids", ASCENDING)], name="slice_ids"),
    IndexModel([("slices.created_at", ASCENDING), ("slices.id", ASCENDING)], name="slice_created"),
    IndexModel(
        [("core_id", ASCENDING), ("slices.created_at", ASCENDING), ("slices.id", ASCENDING)],
        name="core_slice_created",
    ),
    IndexModel(
        [
            ("_id", ASCENDING),
            ("version", ASCENDING),
            ("message_count", ASCENDING),
            ("slice_count", ASCENDING),
            ("size_bytes", ASCENDING),
        ],
        name="unit_fingerprint",
    ),
    tombstone_ttl_index(),
    IndexModel(
        [("slices.unsummarized", ASCENDING), ("core_id", ASCENDING)],
        name="unsummarized",
        partialFilterExpression={"slices.unsummarized": True},
    ),
]
UNIT_FINGERPRINT_INDEX = "unit_fingerprint"
"""Lets the rolling listener's polling read every unit's fingerprint from the index alone (a covered scan)."""
UNSUMMARIZED_INDEX = "unsummarized"
"""Finds the slices whose summary is a placeholder (``resummarize``), of every core or one: partial, so only
the units holding such a slice are in it."""

CORE_INDEXES: list[IndexModel] = [
    IndexModel([("last_interaction_at", ASCENDING)], name="last_interaction"),
    IndexModel([("idle_rolled", ASCENDING), ("last_interaction_at", ASCENDING)], name="idle_pending"),
]

CHECKPOINT_INDEXES: list[IndexModel] = [
    IndexModel([("group", ASCENDING), ("kind", ASCENDING)], name="group_kind"),
    IndexModel([("unit_id", ASCENDING)], name="unit"),  # an erasure removes every group's progress on a unit
    tombstone_ttl_index(),
]

DEAD_LETTER_INDEXES: list[IndexModel] = [
    IndexModel(
        [("group", ASCENDING), ("consumer", ASCENDING), ("failed_at", ASCENDING)], name="group_consumer"
    ),
    IndexModel([("unit_id", ASCENDING)], name="unit"),  # an erasure removes the letters of its units
]

ERASURE_INDEXES: list[IndexModel] = [
    IndexModel([("erasure_id", ASCENDING), ("part", ASCENDING)], name="erasure_part", unique=True),
]
"""``_id`` is the position in the log; a part is logged once however often a finishing erasure is rerun."""

ERASURE_REQUEST_INDEXES: list[IndexModel] = [
    IndexModel([("state", ASCENDING), ("core_id", ASCENDING)], name="state_core"),
    IndexModel([("erasure_id", ASCENDING), ("unit_id", ASCENDING)], name="erasure_unit"),
]

RECALL_INDEX = "recall_index"
"""The recall index (``partner_repo.recall``): one document per indexed slice, per topic node and per core,
derived from the units and rebuildable (``partner_repo.recall._keys``)."""


def _newest(field: str, name: str) -> IndexModel:
    """A recall channel's index: the core, one field, then the newest first (the channel's order)."""
    keys = [("core_id", ASCENDING), (field, ASCENDING), ("ended_at", DESCENDING), ("_id", ASCENDING)]
    return IndexModel(keys, name=name)


RECALL_INDEXES: list[IndexModel] = [
    IndexModel([("core_id", ASCENDING), ("_id", ASCENDING)], name="core_id_1__id_1"),  # the shard key's
    IndexModel([("core_id", ASCENDING), ("terms", ASCENDING)], name="core_terms"),  # multikey
    IndexModel([("core_id", ASCENDING), ("seq", ASCENDING)], name="core_seq"),
    _newest("path", "core_path"),
    _newest("ancestors", "core_ancestors"),  # multikey
    _newest("related", "core_related"),  # multikey
    _newest("days", "core_days"),  # multikey
    IndexModel([("core_id", ASCENDING), ("unit_id", ASCENDING)], name="core_unit"),
    IndexModel([("core_id", ASCENDING), ("names", ASCENDING)], name="core_names"),  # multikey
    IndexModel([("core_id", ASCENDING), ("depth", ASCENDING)], name="core_depth"),
    # the exact vector search reads every code of a core from this index alone (a covered read: no slice
    # document is fetched); a slice without vectors is indexed under a null tag and never read by it
    IndexModel([("core_id", ASCENDING), ("vtag", ASCENDING), ("vcode", ASCENDING)], name="core_vectors"),
]
"""Every read and write of recall selects one core first, through one of these (see
``partner_repo.recall._queries`` and ``partner_repo.recall._channels`` for which serves what). The first is
the index of the documented shard key, ``{core_id: 1, _id: 1}``, under MongoDB's default name (sharding the
collection creates it under that name)."""

SLICE_ID_CLAIM_INDEXES: list[IndexModel] = [
    IndexModel([("unit_id", ASCENDING)], name="unit"),  # an erasure releases the claims of its units
]

ALL_INDEXES: dict[str, list[IndexModel]] = {
    UNITS: UNIT_INDEXES,
    CORES: CORE_INDEXES,
    CHECKPOINTS: CHECKPOINT_INDEXES,
    DEAD_LETTERS: DEAD_LETTER_INDEXES,
    ERASURES: ERASURE_INDEXES,
    ERASURE_REQUESTS: ERASURE_REQUEST_INDEXES,
    RECALL_INDEX: RECALL_INDEXES,
    SLICE_ID_CLAIMS: SLICE_ID_CLAIM_INDEXES,
}

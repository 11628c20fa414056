"""Every index the library relies on, in one place.

``init_repository`` and the index migrations create exactly these. Slice ids are unique across units through
the index on ``slice_ids`` (the derived array of a unit's slice ids, see :mod:`partner_repo.storage`), not
on ``slices.id``: a partial filter selects documents, not array elements, so an index on ``slices.id`` gives
every slice without an id a null key and two such units collide. ``slice_ids`` holds strings only; the filter
(``$type: "string"``: at least one id) leaves out units without slices, whose empty array would otherwise
index one shared key. mongomock ignores uniqueness on multikey indexes, so the repositories check slice ids
in code too.

Erasure tombstones (an erased unit's id in ``memory_units``, a group's erased progress in
``listener_checkpoints``) carry ``erased_at``; a TTL index on it in each collection removes them once
:data:`TOMBSTONE_RETENTION` has passed. It is partial (``erased_at`` exists), so it holds the tombstones
only, never a key for each unit or checkpoint.
"""

from __future__ import annotations

from datetime import timedelta

from pymongo import ASCENDING, DESCENDING, IndexModel

UNITS = "memory_units"
CORES = "memory_cores"
CHECKPOINTS = "listener_checkpoints"
DEAD_LETTERS = "rolling_dead_letters"
ERASURES = "erasures"
"""The append-only log of finished erasures (ids only) listeners follow:
``partner_repo.listener.erasure_log``."""
ERASURE_REQUESTS = "erasure_requests"
"""Erasures in progress and done, and the ids each will erase: ``partner_repo.erasure.requests``."""

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
    IndexModel(
        [("slice_ids", ASCENDING)],
        name="slice_ids_unique",
        unique=True,
        partialFilterExpression={"slice_ids": {"$type": "string"}},
    ),
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

RECALL_SLICES = "recall_slices"
"""The recall index's slices (``partner_repo.recall.store``): derived from the units, rebuildable."""
RECALL_VOCABULARY = "recall_vocabulary"
"""The recall index's terms and topic nodes, each with the slices that hold it."""

RECALL_SLICE_INDEXES: list[IndexModel] = [
    IndexModel([("core_id", ASCENDING), ("terms", ASCENDING)], name="core_terms"),  # multikey
    IndexModel([("core_id", ASCENDING), ("ended_at", DESCENDING)], name="core_ended"),
    IndexModel([("core_id", ASCENDING), ("ancestors", ASCENDING)], name="core_ancestors"),  # multikey
    IndexModel([("core_id", ASCENDING), ("related", ASCENDING)], name="core_related"),  # multikey
    IndexModel([("unit_id", ASCENDING)], name="unit"),  # an erasure removes a unit's slices
]
"""Each recall channel finds its candidates through one of these, always under the core."""

RECALL_VOCABULARY_INDEXES: list[IndexModel] = [
    IndexModel([("core_id", ASCENDING), ("kind", ASCENDING), ("words", ASCENDING)], name="core_kind_words"),
    IndexModel([("core_id", ASCENDING), ("kind", ASCENDING), ("depth", ASCENDING)], name="core_kind_depth"),
]

ALL_INDEXES: dict[str, list[IndexModel]] = {
    UNITS: UNIT_INDEXES,
    CORES: CORE_INDEXES,
    CHECKPOINTS: CHECKPOINT_INDEXES,
    DEAD_LETTERS: DEAD_LETTER_INDEXES,
    ERASURES: ERASURE_INDEXES,
    ERASURE_REQUESTS: ERASURE_REQUEST_INDEXES,
    RECALL_SLICES: RECALL_SLICE_INDEXES,
    RECALL_VOCABULARY: RECALL_VOCABULARY_INDEXES,
}

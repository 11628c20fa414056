"""What the listener keeps in MongoDB, so that any process can take a group over where another stopped.

- ``_checkpoints``: a group's checkpoint (``listener_checkpoints``): its resume token, each unit's delivered
  slices and fingerprint, the consumers done with a slice, the erasure cursor, and the group's lease fields;
  an erased unit's progress becomes a tombstone, so no later commit brings it back;
- ``_lease``: :class:`GroupLease`, one active listener per group (the others stand by);
- ``_dead_letters``: what a consumer failed every attempt at (``rolling_dead_letters``);
- ``_erasure_log``: the append-only log of finished erasures that every group follows (``erasures``);
- ``_progress``: a group's lag, a unit's fingerprint commit, and the one order a unit's slices go in;
- ``_status``: what ``partner-repo listener-status`` reads of all of it.

Nothing here delivers: the state is written by delivery (and read by the stream), never the other way.
"""

from partner_repo.listener.state._checkpoints import (
    DeliveryKey,
    GroupCheckpoint,
    ListenerCheckpoints,
    StartFrom,
    TokenKind,
    UnitProgress,
    remove_unit_progress,
)
from partner_repo.listener.state._dead_letters import DeadLetter, DeadLetterRepository, describe
from partner_repo.listener.state._erasure_log import ErasureLog
from partner_repo.listener.state._lease import DEFAULT_LEASE_TTL, GroupLease, new_owner_id
from partner_repo.listener.state._progress import (
    CommitAction,
    ListenerLag,
    fingerprint_commit,
    in_slice_order,
)
from partner_repo.listener.state._status import ConsumerStatus, GroupStatus, listener_status

__all__ = [
    "CommitAction",
    "ConsumerStatus",
    "DEFAULT_LEASE_TTL",
    "DeadLetter",
    "DeadLetterRepository",
    "DeliveryKey",
    "ErasureLog",
    "GroupCheckpoint",
    "GroupLease",
    "GroupStatus",
    "ListenerCheckpoints",
    "ListenerLag",
    "StartFrom",
    "TokenKind",
    "UnitProgress",
    "describe",
    "fingerprint_commit",
    "in_slice_order",
    "listener_status",
    "new_owner_id",
    "remove_unit_progress",
]

"""Reading: where a group's slices come from while it holds the lease.

- ``_sources``: :class:`GroupSources` chooses a change stream, else polling, and restarts a broken source;
- ``_change_stream``: the change stream on ``memory_units`` (resumed by token, caught up by a scan), and what
  a stream error says about the resume token;
- ``_polling``: passes over the units' fingerprints against the group's checkpoint, where streams are
  unavailable;
- ``_unreadable``: units a walk skips because they cannot be read, each logged once per state.

A source only reads and offers to delivery (:class:`~partner_repo.listener.delivery.DeliveryPipeline`).
"""

from partner_repo.listener.stream._polling import SourceStopped, take_history_as_delivered
from partner_repo.listener.stream._sources import GroupSources
from partner_repo.listener.stream._unreadable import UnreadableUnits

__all__ = ["GroupSources", "SourceStopped", "UnreadableUnits", "take_history_as_delivered"]

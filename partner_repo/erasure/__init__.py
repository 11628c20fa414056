"""Erasure: forgetting a core's memory, resumably, fenced against racing rolls.

The front door is :class:`MemoryEraser` (``_eraser``, with the tombstones an erasure leaves); what an erasure
would remove is counted by ``_preview``, and the pending requests and the ids each will erase are kept by
``_requests``. Finished erasures are appended to the listener's erasure log, so every consumer group hears of
them.
"""

from partner_repo.erasure._eraser import LEASE_WAIT, ErasureReport, MemoryEraser
from partner_repo.erasure._preview import ErasurePreview
from partner_repo.erasure._requests import ErasureRequest

__all__ = ["ErasurePreview", "ErasureReport", "ErasureRequest", "LEASE_WAIT", "MemoryEraser"]

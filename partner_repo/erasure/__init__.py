"""Erasure: forgetting a core's memory, resumably, fenced against racing rolls.

The front door is :class:`MemoryEraser` (``eraser``); the pending requests and the ids each will erase are
kept by ``requests``. Finished erasures are appended to the listener's erasure log, so every consumer group
hears of them.
"""

from partner_repo.erasure.eraser import ErasureReport, MemoryEraser
from partner_repo.erasure.requests import ErasureRequest

__all__ = ["ErasureReport", "ErasureRequest", "MemoryEraser"]

"""Leases that never compare two processes' clocks: a holder proves it is alive by beating, a taker waits.

A lease is a field pair on a shared document: the holder's id and a heartbeat counter the holder increments
while it works. A process that finds the lease held watches that pair on its *own* monotonic clock and may
take the lease over (a compare-and-set on exactly that holder and beat) only once the pair has not changed for
the holder's time to live. No wall clock is written by one process and read by another, so clock skew of any
size cannot let two holders in (the rolling lease and the listener's group lease both work this way).

A lease is an optimisation, never the guarantee: the writes it protects are fenced on their own (the rolling
append only lands where its increment was resolved; the trim only while its owner holds the lease).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace

WATCHED = 4096
"""Lease states one watcher remembers (least recently seen forgotten first)."""


@dataclass(frozen=True)
class LeaseState:
    """Who holds a lease (None: free), how often it has beaten, and how long it may stay silent."""

    holder: str | None
    beat: int
    ttl_s: float

    def or_ttl(self, ttl_s: float) -> LeaseState:
        """This state, counted with ``ttl_s`` when it was written without a ttl (0.1.0's leases)."""
        return self if self.ttl_s > 0 else replace(self, ttl_s=ttl_s)


class SilenceWatch:
    """Remembers since when each lease has shown the same holder and beat, on this process's clock."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, size: int = WATCHED) -> None:
        self._clock = clock
        self._size = size
        self._seen: OrderedDict[Hashable, tuple[str | None, int, float]] = OrderedDict()

    def silent(self, key: Hashable, state: LeaseState) -> bool:
        """Record ``state`` for ``key``; True when its holder has not beaten for its whole ``ttl_s``.

        The first sighting of a holder and beat starts the count, so a lease is never taken over on one look.
        """
        now = self._clock()
        known = self._seen.get(key)
        if known is None or known[:2] != (state.holder, state.beat):
            self._seen[key] = (state.holder, state.beat, now)
            since = now
        else:
            since = known[2]
        self._seen.move_to_end(key)
        while len(self._seen) > self._size:
            self._seen.popitem(last=False)
        return state.holder is not None and now - since >= state.ttl_s

    def forget(self, key: Hashable) -> None:
        self._seen.pop(key, None)


__all__ = ["LeaseState", "SilenceWatch"]

"""Time windows that let a page of slices read only the units near where the page starts.

Slices live inside their units, so a page that unwound every matching slice would cost as much as the whole
history. A page instead asks for the slices created in a window of time next to where it starts (an index
range on ``slices.created_at``: only units with a slice in the window are read), then in the next window
further on, until it is full. Windows are disjoint and follow the walk order, so their results in sequence are
the page, exactly. The first window is open towards the page's start (newer slices for a newest-first page,
including any stamped in the future, are never skipped); each next width is guessed from how many slices the
previous window held; after a few windows the rest of the range is asked for at once.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

INITIAL_WIDTH = timedelta(hours=1)
MAX_GROWTH = 64
"""A window is at most this many times wider than the one before (and at least twice as wide)."""
MAX_WINDOWS = 6
"""The last window takes the rest of the range: a page costs at most this many queries (plus the anchor)."""
ANCHOR_TTL_S = 60.0
"""How long a first page's anchor (where a scope's slices start) is reused by later first pages."""
ANCHORS_KEPT = 1024


@dataclass(frozen=True)
class Window:
    """Slices created in ``[start, end)``; ``None`` leaves that side unbounded."""

    start: datetime | None
    end: datetime | None


ALL_TIME = Window(None, None)


class WindowWalk:
    """The windows of one page, from ``anchor`` (where the page starts) towards ``far`` (the far edge).

    ``order="desc"`` walks back in time: the first window is ``[anchor - width, +inf)``, the next ones end
    where the previous one started. ``"asc"`` mirrors it. Without an anchor the only window is all time.
    """

    def __init__(
        self,
        order: Literal["asc", "desc"],
        anchor: datetime | None,
        far: datetime | None,
        *,
        width: timedelta = INITIAL_WIDTH,
        max_windows: int = MAX_WINDOWS,
    ) -> None:
        self._backwards = order == "desc"
        self._far = far
        self._width = width
        self._left = max_windows
        self._current = ALL_TIME if anchor is None else self._window(None, anchor)

    @property
    def current(self) -> Window:
        return self._current

    def advance(self, found: int, wanted: int) -> Window | None:
        """The next window, given that the current one held ``found`` slices and ``wanted`` more are needed;
        None when the current window already reached the end of the range."""
        edge = self._current.start if self._backwards else self._current.end
        if edge is None:
            return None
        growth = MAX_GROWTH if found == 0 else min(max(2 * wanted / found, 2), MAX_GROWTH)
        self._width = self._width * growth
        self._current = self._window(edge, edge)
        return self._current

    def _window(self, near: datetime | None, anchor: datetime) -> Window:
        """The window from ``near`` (None: open) reaching one width past ``anchor`` towards the far edge."""
        self._left -= 1
        reach = (
            None if self._left <= 0 else _shifted(anchor, -self._width if self._backwards else self._width)
        )
        if reach is not None and self._far is not None:
            past_far = reach <= self._far if self._backwards else reach >= self._far
            reach = None if past_far else reach
        return Window(start=reach, end=near) if self._backwards else Window(start=near, end=reach)


class Anchors:
    """Where each scope's slices start, remembered for :data:`ANCHOR_TTL_S` so a repeated first page costs
    one query, not two.

    An anchor only places the first window, which is open towards the page's start: a stale one (slices
    appended or imported since) changes how much the first window reads, never which slices a page returns.
    """

    def __init__(self, ttl_s: float = ANCHOR_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl_s = ttl_s
        self._clock = clock
        self._known: OrderedDict[Hashable, tuple[float, datetime | None]] = OrderedDict()

    def get(self, key: Hashable) -> tuple[bool, datetime | None]:
        """``(True, anchor)`` when a fresh one is remembered (the anchor may be None: no dated slice)."""
        entry = self._known.get(key)
        if entry is None or self._clock() - entry[0] >= self._ttl_s:
            return False, None
        return True, entry[1]

    def remember(self, key: Hashable, anchor: datetime | None) -> None:
        self._known[key] = (self._clock(), anchor)
        self._known.move_to_end(key)
        while len(self._known) > ANCHORS_KEPT:
            self._known.popitem(last=False)


def _shifted(moment: datetime, by: timedelta) -> datetime | None:
    """``moment + by``, or None past the range of datetimes (the window is then open on that side)."""
    try:
        return moment + by
    except OverflowError:
        return None


__all__ = [
    "ALL_TIME",
    "ANCHOR_TTL_S",
    "INITIAL_WIDTH",
    "MAX_GROWTH",
    "MAX_WINDOWS",
    "Anchors",
    "Window",
    "WindowWalk",
]

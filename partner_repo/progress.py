"""Progress hooks: long-running library work (import, check, repair, migrations) reports how far it got to a
callback the caller passes, and never draws anything itself (the CLI draws a bar on a terminal)."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[int, int], None]
"""Called with (steps done, steps in total): once with 0 before the first step, then after each step. The
total is what was known when the work started (units written meanwhile are not counted in it)."""

__all__ = ["Progress"]

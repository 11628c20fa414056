"""How a console is started: where it listens, who may reach it, whether it writes, and how much a page shows.

Plain data, checked by the command before anything is served (and needing no web framework).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PORT = 8080
DEFAULT_LAG_SAMPLE_SECONDS = 30.0


@dataclass(frozen=True)
class ConsoleOptions:
    """A console's options.

    ``host`` is where it listens (its Host and Origin rules follow from it, :mod:`partner_repo.serving`);
    ``token`` the token a browser exchanges once for a session (None: no sign-in, loopback only);
    ``allow_writes`` whether resummarize, dead-letter retry and discard, and forget are offered at all;
    ``allowed_hosts`` and ``allowed_origins`` the names a reverse proxy reaches it by; ``database_name`` the
    one thing of the connection a page shows (never the URI). The sizes bound what one page reads.
    """

    host: str = "127.0.0.1"
    token: str | None = None
    allow_writes: bool = False
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    database_name: str = "partner"
    page_size: int = 50
    """Cores on a page of the cores list."""
    timeline_slices: int = 40
    """Slices on a page of a core's timeline."""
    topic_nodes: int = 100
    """Topic nodes on a page of a core's tree."""
    letters_shown: int = 50
    """Dead letters shown per consumer on a group's page (the oldest failures first)."""
    lag_sample_s: float = DEFAULT_LAG_SAMPLE_SECONDS
    """How often the console samples every group's lag for its charts (0: only when a page is served)."""
    lag_samples: int = 240
    """Samples kept per group (in memory)."""


__all__ = ["DEFAULT_LAG_SAMPLE_SECONDS", "DEFAULT_PORT", "ConsoleOptions"]

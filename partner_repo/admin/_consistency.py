"""Causally consistent page walks: each page reads no older data than the page before it did.

Admin reads may be served by secondaries (``secondaryPreferred``), and two secondaries may lag by different
amounts: a page read on a member that is behind the one the previous page came from could miss slices that
were already there, so a walk would skip them. Each page is read in a causally consistent session; its
cluster time (the reply's ``operationTime`` and ``$clusterTime``) goes into the page's cursor, and the next
page's session is advanced to it, so the driver sends ``readConcern: {afterClusterTime: ...}`` and whichever
member serves the next page first waits until it has caught up with that time.

Backends without sessions (the embedded in-memory one, servers too old for them) read without one; a
standalone server reports no cluster time, so its cursors carry none and the next page reads as usual.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from partner_repo.admin._cursor import ReadTime
from partner_repo.mongo import ConfigurationError, InvalidOperation, MongoDatabase, driver


class CausalReads:
    """Opens the causally consistent session each page is read in, where the database supports sessions."""

    def __init__(self, database: MongoDatabase) -> None:
        self._client = driver.client_of(database)
        self._supported = self._client is not None and callable(
            getattr(type(self._client), "start_session", None)
        )

    @asynccontextmanager
    async def session(self, after: ReadTime | None) -> AsyncIterator[Any | None]:
        """A session whose reads come after ``after`` (None: no session on this backend). Ended on exit."""
        session = await self._start()
        if session is None:
            yield None
            return
        try:
            if after is not None:
                if after.cluster_time is not None:
                    session.advance_cluster_time(after.cluster_time)
                session.advance_operation_time(after.operation_time)
            yield session
        finally:
            await driver.end_session(session)

    def unsupported(self) -> None:
        """The deployment refused a session (sessions unsupported): read without one from now on."""
        self._supported = False

    @staticmethod
    def read_time(session: Any | None) -> ReadTime | None:
        """When the session's reads happened, as the server reported it (None on a standalone server)."""
        if session is None or session.operation_time is None:
            return None
        moment, cluster = session.operation_time, session.cluster_time
        return ReadTime(moment, dict(cluster) if cluster is not None else None)

    async def _start(self) -> Any | None:
        if not self._supported:
            return None
        try:
            return await driver.start_session(self._client, causal_consistency=True)
        except (NotImplementedError, ConfigurationError, InvalidOperation):
            self._supported = False  # mongomock-motor: "does not support sessions"
            return None


SESSIONS_UNSUPPORTED = ConfigurationError
"""What the driver raises when a command is sent in a session on a deployment without sessions."""


__all__ = ["SESSIONS_UNSUPPORTED", "CausalReads"]

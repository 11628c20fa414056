"""One exception hierarchy for everything partner-repo refuses or cannot do.

Callers catch :class:`PartnerRepoError` to handle every library failure; the subclasses say what went wrong
precisely enough to act on (retry a conflict, fix the input, open a new unit).
"""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


class PartnerRepoError(Exception):
    """Root of every error partner-repo raises on purpose."""


class InvalidInput(PartnerRepoError, ValueError):
    """The caller's input breaks the model (unknown role, blank id, negative count); nothing was written."""


class InvalidSettings(InvalidInput):
    """A setting (an environment variable, or a value given for one) is unusable; the message names the
    variable, never its value."""


class NotFound(PartnerRepoError, LookupError):
    """The unit, slice or core asked for does not exist.

    The one rule for unknown ids: a ``get`` answers ``None``; ``require`` and every other lookup by id (a
    view, messages) raises this (``docs/repositories.md``)."""


def found(value: T | None, what: str) -> T:
    """``value``, or :class:`NotFound` naming ``what`` (``"unit 'u1'"``) when it is None: ``require`` is
    ``found(await get(id), ...)``."""
    if value is None:
        raise NotFound(f"no {what}")
    return value


class EmbedderMismatch(InvalidInput):
    """Recall's vectors of a core were made by another embedder than the one given: vectors of two models
    are never compared. Recall (or index) with the core's embedder, or embed the core again with this one
    (``partner-repo recall reindex --core CORE --embedder MODULE:NAME``)."""

    def __init__(self, core_id: str, stored: str, given: str) -> None:
        super().__init__(
            f"core {core_id!r}: its vectors are of embedder {stored}, not {given}; use that embedder, or "
            f"embed the core again with `partner-repo recall reindex --core {core_id} --embedder MODULE:NAME`"
        )
        self.core_id = core_id
        self.stored = stored
        self.given = given


class InvalidCursor(InvalidInput):
    """A page cursor that is malformed, was altered, or was issued for another query; start the walk again."""


class ConflictError(PartnerRepoError):
    """Another writer changed the document first (a stale copy was saved); reload and try again."""


class GroupLeaseLost(ConflictError):
    """A listener's lease on its group lapsed (it stalled past its ttl) while it flushed: another listener
    holds the group now and delivers what this one was asked to."""

    def __init__(self, group: str) -> None:
        super().__init__(
            f"listener group {group!r}: this listener's lease lapsed while it flushed; "
            "the group's holder delivers"
        )
        self.group = group


class LeaseLost(ConflictError):
    """Another roller took over this roller's lease on a core (it expired while this one stalled)."""

    def __init__(self, core_id: str, owner: str) -> None:
        super().__init__(f"core {core_id!r}: the rolling lease of {owner!r} was taken over by another roller")
        self.core_id = core_id
        self.owner = owner


class StaleIncrement(ConflictError):
    """A fenced append found its unit moved on since the increment was resolved (another writer appended
    first, a clear marked the window taken, an erasure left a tombstone); nothing was written: resolve the
    increment again.

    ``expected``/``found`` are message counts for a count fence; ``position``/``taken_until`` say which
    position fence failed (the unit has taken ``taken_until`` > the increment's first ``position``)."""

    def __init__(
        self,
        unit_id: str,
        expected: int,
        found: int | None,
        *,
        position: int | None = None,
        taken_until: int | None = None,
    ) -> None:
        if position is not None and taken_until is not None:
            reason = (
                f"unit {unit_id!r} has taken every position below {taken_until}, past the increment's first "
                f"position {position}"
            )
        else:
            where = "no longer exists" if found is None else f"holds {found} messages"
            reason = f"unit {unit_id!r} {where}, not the {expected} the increment was resolved against"
        super().__init__(f"{reason}; resolve it again")
        self.unit_id = unit_id
        self.expected = expected
        self.found = found
        self.position = position
        self.taken_until = taken_until


class UnitOfAnotherCore(ConflictError):
    """A unit an operation would make a core's (an import adopting it, a state imported twice) is stored under
    another core; nothing was written. A core whose session is another core's unit could never roll."""

    def __init__(self, unit_id: str, owner: str, core_id: str, *, hint: str = "") -> None:
        super().__init__(f"unit {unit_id!r} belongs to core {owner!r}, not {core_id!r}{hint}")
        self.unit_id = unit_id
        self.owner = owner
        self.core_id = core_id


class DuplicateSliceId(ConflictError):
    """A slice id is already used by another unit; slice ids are unique across the whole collection."""

    def __init__(self, slice_id: str, other_unit_id: str | None, *, detail: str = "") -> None:
        where = f"unit {other_unit_id!r}" if other_unit_id else "another unit"
        super().__init__(f"slice id {slice_id!r} is already used by {where}{detail}")
        self.slice_id = slice_id
        self.other_unit_id = other_unit_id


class UnitTooLarge(PartnerRepoError):
    """The write would take a unit past MongoDB's 16 MiB document limit; it was not sent."""

    def __init__(self, unit_id: str, size_bytes: int, limit_bytes: int) -> None:
        super().__init__(
            f"unit {unit_id!r} would be {size_bytes} bytes, over the {limit_bytes}-byte document limit; "
            "open a new memory session (a continuation unit) instead"
        )
        self.unit_id = unit_id
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes


class UnreadableUnit(PartnerRepoError):
    """A stored document in ``memory_units`` cannot be read as a unit (written by another tool with an id that
    is not a string, fields of the wrong type...). It is skipped where a walk meets it (the listener, check)
    and reported by ``partner-repo check``; fix or delete it by hand."""

    def __init__(self, unit_id: object, reason: str) -> None:
        super().__init__(f"unit {unit_id!r} cannot be read as a memory unit: {reason}")
        self.unit_id = unit_id
        self.reason = reason


class WindowTooLarge(PartnerRepoError):
    """Recording would take a core's chat window past the 16 MiB document limit; nothing was recorded.
    ``RollingService.record_and_roll`` recovers by itself (it rolls the window, a one-message window
    included, then records again); after a bare ``record``, call ``RollingService.roll`` then record again."""

    def __init__(self, core_id: str) -> None:
        super().__init__(
            f"core {core_id!r}: the chat window would pass MongoDB's 16 MiB document limit; nothing was "
            "recorded: roll the window (RollingService.record_and_roll does it by itself), then record again"
        )
        self.core_id = core_id


class ConnectionFailed(PartnerRepoError):
    """The MongoDB server at the URI could not be reached, or the connection to it failed during an operation
    (reset, or the operation cancelled by the driver because its server went away): the message names the
    host or the operation, never a password. A write's outcome is then unknown; the library's writes are
    fenced, safe to send again."""


class OperationTimedOut(PartnerRepoError, TimeoutError):
    """MongoDB did not answer within the client's operation timeout (``timeoutMS``, retries included) or the
    server selection timeout: a frozen or unreachable server. Nothing more is known of the write's outcome
    than the driver knows; the library's writes are safe to retry (they are fenced)."""


class ChangeStreamUnavailable(PartnerRepoError):
    """The deployment has no change streams (a standalone server, the in-memory backend): poll instead."""


class MigrationError(PartnerRepoError):
    """A schema migration could not run: a migration failed (the message names it, the cause and what to do;
    it is not recorded as applied), or the migrations directory is unusable."""


class TransactionsUnsupported(MigrationError):
    """Migrations were asked to run in transactions on a deployment without them (a standalone server or the
    in-memory backend); the message says to run without ``--transaction``."""

"""The change-stream source: tails ``memory_units`` and offers the slices each event adds.

Events and what they mean here:

- ``update``: an append shows its new slice as ``updatedFields["slices.N"]`` (pushed at the end) or, when
  the slice went into the middle of the array (a writer whose clock is behind) or into an empty array, as the
  whole ``updatedFields["slices"]``. Both are read. An update that only changes fields *inside* an existing
  slice (``slices.N.summary``) makes the source re-read the unit's slices, to be safe.
- ``insert`` and ``replace`` (``save``): the slices of ``fullDocument`` (its messages are projected out on the
  server, so an event stays small); the insert of an erased unit's tombstone (``{_id, erased_at}``) adds none.
- ``invalidate`` (the collection was dropped or renamed): catch up by a scan, then reopen with
  ``startAfter`` the invalidate event.
- everything else (``delete``, ``drop``...) adds no slice.

Position: the resume token of each event is saved (through the pipeline's ordered commits) once that event's
slices are delivered, and the post-batch token is saved while the stream is idle, so a quiet collection
never leaves a stale token behind. A token the server no longer has (``ChangeStreamHistoryLost``, 286, or
another rejection, see :func:`verdict`) is dropped at once (never retried)
and the source catches up: it opens a fresh stream first (so nothing written during the scan is missed), scans
every unit against the checkpoint, then reads the stream. A resumable error (network, step-down, shutdown) is
resumed by the driver with its latest token; if that fails too, the source reopens from the last token it
saw, with backoff, for as long as the errors last: a resumable error never costs the token.

What an error says about the token (:func:`verdict`): a token is expensive to lose (dropping it means a
catch-up scan of every unit), so it is dropped only when the server says it can never work again, and kept
(retried with backoff, for as long as it takes) on every error the driver change-streams spec calls
resumable: errors that are not server errors (network, timeouts), ``CursorNotFound``, errors labelled
``ResumableChangeStreamError`` (servers 4.4+), and the codes older servers send without labels. Only an
error that is neither counts towards "the server keeps refusing this token"
(:data:`OPEN_FAILURES_BEFORE_GIVING_UP`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from partner_repo.errors import (
    ChangeStreamUnavailable,
    ConnectionFailed,
    InvalidInput,
    OperationTimedOut,
    UnreadableUnit,
)
from partner_repo.listener.delivery import Backoff, DeliveryPipeline
from partner_repo.listener.state import CommitAction, ListenerCheckpoints, TokenKind, describe
from partner_repo.listener.stream._polling import UnitScanner
from partner_repo.models import MemorySlice
from partner_repo.mongo import (
    OperationFailure,
    PyMongoError,
    is_tombstone,
    library_logger,
    slice_from_document,
)
from partner_repo.units import MemoryUnitRepository, UnitOutline, stored_id_problem

Verdict = Literal["unavailable", "dead", "resumable", "unknown"]

UNAVAILABLE_CODES = frozenset({40573, 40324})
"""``$changeStream`` only on replica sets / unknown pipeline stage: this deployment cannot stream."""

DEAD_TOKEN_CODES = frozenset({286, 280, 260})
"""ChangeStreamHistoryLost, ChangeStreamFatalError, InvalidResumeToken: the token can never work again."""

RESUMABLE_CODES = frozenset(
    {6, 7, 43, 63, 89, 91, 133, 150, 189, 234, 262, 9001, 10107, 11600, 11602, 13388, 13435, 13436}
)
"""The spec's resumable codes for servers without error labels (HostUnreachable, HostNotFound,
CursorNotFound, StaleShardVersion, NetworkTimeout, ShutdownInProgress, FailedToSatisfyReadPreference,
StaleEpoch, PrimarySteppedDown, RetryChangeStream, ExceededTimeLimit, SocketException, NotWritablePrimary,
InterruptedAtShutdown, InterruptedDueToReplStateChange, StaleConfig, NotPrimaryNoSecondaryOk,
NotPrimaryOrSecondary)."""

RESUMABLE_LABEL = "ResumableChangeStreamError"
NON_RESUMABLE_LABEL = "NonResumableChangeStreamError"


def verdict(exc: PyMongoError) -> Verdict:
    """How the listener treats ``exc`` raised opening or reading a change stream."""
    if not isinstance(exc, OperationFailure):
        return "resumable"  # not a server error: the network, a timeout, server selection
    if exc.code in UNAVAILABLE_CODES or "only supported on replica sets" in str(exc):
        return "unavailable"
    if exc.has_error_label(NON_RESUMABLE_LABEL) or exc.code in DEAD_TOKEN_CODES:
        return "dead"
    if exc.has_error_label(RESUMABLE_LABEL) or exc.code in RESUMABLE_CODES:
        return "resumable"
    text = str(exc).lower()
    if "resume token" in text or "resume of change stream was not possible" in text:
        return "dead"
    return "unknown"


logger = library_logger("partner_repo.listener")

OPEN_FAILURES_BEFORE_GIVING_UP = 3
"""Server errors in a row on opening from one token, neither resumable nor known to mean "dead token", after
which the token is dropped anyway (and the listener catches up by scan). Resumable errors never count."""

DEFAULT_BACKOFF = Backoff(initial=0.5, multiplier=2.0, maximum=30.0)
_SLICE_KEY = re.compile(r"^slices\.(\d+)$")

EventKind = Literal["slices", "resync", "none", "invalidate"]


@dataclass(frozen=True)
class UnitChange:
    """What one change event means for delivery."""

    kind: EventKind
    unit_id: str | None = None
    core_id: str | None = None
    slices: tuple[MemorySlice, ...] = ()


def parse_event(event: Mapping[str, Any]) -> UnitChange:
    """Read the slices an event adds (see the module docstring for the forms understood)."""
    operation = event.get("operationType")
    if operation == "invalidate":
        return UnitChange("invalidate")
    unit_id = (event.get("documentKey") or {}).get("_id")
    if operation in ("insert", "replace"):
        document = event.get("fullDocument")
        if not isinstance(document, Mapping):
            return UnitChange("resync", unit_id)
        if is_tombstone(document):
            return UnitChange("none", unit_id)
        return _with_slices(unit_id, document.get("core_id"), document.get("slices") or [])
    if operation != "update":
        return UnitChange("none", unit_id)
    fields: Mapping[str, Any] = (event.get("updateDescription") or {}).get("updatedFields") or {}
    documents: list[Any] = []
    resync = False
    for key, value in fields.items():
        if key == "slices":
            if isinstance(value, list):
                documents.extend(value)
            else:
                resync = True
        elif key.startswith("slices."):
            if _SLICE_KEY.match(key) and isinstance(value, Mapping):
                documents.append(value)
            else:
                resync = True
    if resync:
        return UnitChange("resync", unit_id)
    if not documents:
        return UnitChange("none", unit_id)
    return _with_slices(unit_id, None, documents)


def _with_slices(unit_id: Any, core_id: Any, documents: list[Any]) -> UnitChange:
    pieces: list[MemorySlice] = []
    for document in documents:
        if document is None:
            continue
        try:
            piece = slice_from_document(document)
        except ValidationError:
            return UnitChange("resync", unit_id)
        if piece.id is None:  # not normalized yet: the repository gives it an id when it reads the unit
            return UnitChange("resync", unit_id)
        pieces.append(piece)
    return UnitChange("slices", unit_id, core_id if isinstance(core_id, str) else None, tuple(pieces))


@dataclass(frozen=True)
class _Position:
    token: Mapping[str, Any] | None
    kind: TokenKind | None
    catch_up: bool


class ChangeStreamSource:
    """Follows the change stream until stopped; raises :class:`ChangeStreamUnavailable` when it cannot."""

    name = "change_stream"

    def __init__(
        self,
        units: MemoryUnitRepository,
        checkpoints: ListenerCheckpoints,
        pipeline: DeliveryPipeline,
        scanner: UnitScanner,
        *,
        max_await_seconds: float,
        following: asyncio.Event | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> None:
        self._units = units
        self._checkpoints = checkpoints
        self._pipeline = pipeline
        self._scanner = scanner
        self._max_await_ms = max(int(max_await_seconds * 1000), 1)
        self._generation = 0
        self._queued_token: Mapping[str, Any] | None = None
        self._position = _Position(None, None, catch_up=True)
        self._following = following or asyncio.Event()
        self._open_failures: dict[str, int] = {}
        self._backoff = backoff
        self._followed = 0
        """How many times a stream was opened and caught up: a failure after that is a fresh incident."""

    @property
    def got_going(self) -> bool:
        """Whether a stream was ever opened and followed (so a failure afterwards starts backoff afresh)."""
        return self._followed > 0

    async def run(self, stopping: asyncio.Event) -> None:
        checkpoint = await self._checkpoints.group()
        token = None if checkpoint is None else checkpoint.resume_token
        kind = None if checkpoint is None else checkpoint.token_kind
        self._position = _Position(token, kind, catch_up=token is None)
        self._queued_token = token
        failures = 0
        recoveries = 0
        while not stopping.is_set():
            followed = self._followed
            try:
                await self._follow(stopping)
            except ChangeStreamUnavailable:
                raise
            except (
                _TokenRejected,
                PyMongoError,
                ConnectionFailed,
                OperationTimedOut,
            ) as exc:  # the two: watch's
                if self._followed != followed:  # the stream got going since the last failure: back off afresh
                    failures = recoveries = 0
                if isinstance(exc, PyMongoError) and verdict(exc) == "unavailable":
                    raise ChangeStreamUnavailable(
                        f"change streams are not available: {describe(exc)}"
                    ) from exc
                dead = _dead_token_error(exc)
                if dead is not None:
                    recoveries += 1
                    await self._forget_token(dead, recoveries, stopping)
                else:
                    failures += 1
                    await self._pause_after(exc, failures, stopping)
            else:  # invalidated: reopened at once, after a catch-up scan
                failures = recoveries = 0

    async def _forget_token(self, exc: OperationFailure, recoveries: int, stopping: asyncio.Event) -> None:
        """The server will never accept the token again: drop it (here and in the checkpoint) and catch up."""
        logger.warning(
            "listener group %r: the change stream cannot resume from its token (%s); dropping the token, "
            "catching up by scanning every unit, then reopening the stream",
            self._checkpoints.group_name,
            describe(exc),
        )
        self._generation += 1  # token commits still queued belong to the dead stream: they are skipped
        await self._checkpoints.save_token(None)
        self._queued_token = None
        self._position = _Position(None, None, catch_up=True)
        if recoveries > 1:  # the fresh stream failed the same way: do not spin on the server
            await self._pause_after(exc, recoveries - 1, stopping)

    def _rejects(self, token: Mapping[str, Any], exc: OperationFailure) -> bool:
        """Whether the server refused to open a stream at ``token`` for good.

        Known codes, labels and messages say so at once, and resumable errors (a step-down, a shutdown, a
        network error) never do: the token is kept and retried with backoff for as long as they last. Any
        other server error on opening from the same token counts once it has happened
        :data:`OPEN_FAILURES_BEFORE_GIVING_UP` times in a row, so an unforeseen rejection (a malformed token,
        a server-specific code) can never keep the listener retrying a dead token.
        """
        found = verdict(exc)
        if found != "unknown":
            return found == "dead"
        key = repr(sorted(token.items()))
        self._open_failures[key] = self._open_failures.get(key, 0) + 1
        return self._open_failures[key] >= OPEN_FAILURES_BEFORE_GIVING_UP

    async def _pause_after(self, exc: Exception, failures: int, stopping: asyncio.Event) -> None:
        delay = self._backoff.delay(failures)
        logger.warning(
            "listener group %r: change stream failed (%s); reopening in %.1fs",
            self._checkpoints.group_name,
            describe(exc),
            delay,
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), delay)

    async def _follow(self, stopping: asyncio.Event) -> None:
        """Open the stream at the current position and deliver from it until stopping or invalidated.

        ``self._position`` always says where to reopen: the last token seen (the driver has already tried to
        resume from it once when an error reaches here), or the invalidate event to start after.
        """
        position = self._position
        options: dict[str, Any] = {}
        if position.token is not None:
            key = "start_after" if position.kind == "start_after" else "resume_after"
            options[key] = position.token
        async with contextlib.AsyncExitStack() as stack:
            try:  # the aggregate that opens the stream (PyMongo async sends it in watch, Motor on entry)
                stream = await self._units.watch(max_await_time_ms=self._max_await_ms, **options)
                await stack.enter_async_context(stream)
            except OperationFailure as exc:
                if position.token is not None and self._rejects(position.token, exc):
                    raise _TokenRejected(exc) from exc
                raise
            self._open_failures.clear()
            if position.catch_up:
                started = await self._scanner.scan(probe=False)
                logger.info(
                    "listener group %r: catch-up scan offered %d slice(s); following the change stream",
                    self._checkpoints.group_name,
                    started,
                )
                self._position = _Position(position.token, position.kind, catch_up=False)
            opened = stream.resume_token  # the post-batch token of an empty first batch, else the start token
            if opened is not None and opened != self._queued_token:
                kind: TokenKind = "resume_after"
                if position.kind == "start_after" and opened == position.token:
                    kind = "start_after"
                self._position = _Position(opened, kind, catch_up=False)
                await self._commit_token(opened, kind)
            self._following.set()
            self._followed += 1
            while not stopping.is_set():
                event = await stream.try_next()
                token = stream.resume_token
                if event is None:
                    if token is not None and token != self._queued_token:
                        self._position = _Position(token, "resume_after", catch_up=False)
                        await self._commit_token(token, "resume_after")
                    continue
                change = parse_event(event)
                if change.kind == "invalidate":
                    logger.warning(
                        "listener group %r: the change stream was invalidated (memory_units dropped or "
                        "renamed); catching up by scan, then reopening after the invalidate event",
                        self._checkpoints.group_name,
                    )
                    self._position = _Position(event["_id"], "start_after", catch_up=True)
                    return
                self._position = _Position(token, "resume_after", catch_up=False)
                await self._deliver(change, token)

    async def _deliver(self, change: UnitChange, token: Mapping[str, Any] | None) -> None:
        commit = self._token_commit(token, "resume_after") if token is not None else None
        if token is not None:
            self._queued_token = token
        unit_id = change.unit_id
        foreign_id = unit_id is not None and stored_id_problem(unit_id) is not None
        if change.kind in ("resync", "slices") and foreign_id:
            await self._outline(unit_id)  # another tool's id: logged as unreadable (once) and skipped
        elif change.kind == "resync" and isinstance(unit_id, str):
            outline = await self._outline(unit_id)
            if outline is not None:
                await self._pipeline.offer(
                    unit_id, outline.core_id, outline.slices, on_commit=commit, commit_key="token"
                )
                return
        elif change.kind == "slices" and isinstance(unit_id, str) and change.slices:
            await self._pipeline.offer(
                unit_id, change.core_id, change.slices, on_commit=commit, commit_key="token"
            )
            return
        if commit is not None:
            await self._pipeline.barrier(commit, commit_key="token")

    async def _outline(self, unit_id: object) -> UnitOutline | None:
        """The unit's outline, or None when it is gone or unreadable (skipped: the stream goes on)."""
        try:
            return await self._units.outline(unit_id)
        except UnreadableUnit as exc:
            self._scanner.unreadable.skip(exc)
        except InvalidInput:  # an id no unit can have, and its document is gone already
            pass
        return None

    async def _commit_token(self, token: Mapping[str, Any], kind: TokenKind) -> None:
        self._queued_token = token
        await self._pipeline.barrier(self._token_commit(token, kind), commit_key="token")

    def _token_commit(self, token: Mapping[str, Any], kind: TokenKind) -> CommitAction:
        generation = self._generation

        async def save() -> None:
            if generation == self._generation:
                await self._checkpoints.save_token(token, kind)

        return save


class _TokenRejected(Exception):
    """Opening the stream from a token failed in a way that will not change: the token is dead."""

    def __init__(self, error: OperationFailure) -> None:
        super().__init__(str(error))
        self.error = error


def _dead_token_error(exc: Exception) -> OperationFailure | None:
    """The server error saying the stream's token can never work again, if ``exc`` is (or wraps) one."""
    if isinstance(exc, _TokenRejected):
        return exc.error
    if isinstance(exc, OperationFailure) and verdict(exc) == "dead":
        return exc
    return None


__all__: list[str] = []  # internal to the listener: nothing here is public API

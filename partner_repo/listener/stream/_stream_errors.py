"""What a change-stream error says about the resume token: keep it, drop it, or give up on streams.

A token is expensive to lose: dropping it means a catch-up scan of every unit. So it is dropped only when
the server says it can never work again, and kept (retried with backoff, for as long as it takes) on every
error the driver change-streams spec calls resumable: errors that are not server errors (network, timeouts),
``CursorNotFound``, errors labelled ``ResumableChangeStreamError`` (servers 4.4+), and the codes older servers
send without labels. Only an error that is neither counts towards "the server keeps refusing this token"
(see :data:`partner_repo.listener.stream._change_stream.OPEN_FAILURES_BEFORE_GIVING_UP`).
"""

from __future__ import annotations

from typing import Literal

from partner_repo.mongo import OperationFailure, PyMongoError

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


__all__: list[str] = []  # internal to the listener: nothing here is public API

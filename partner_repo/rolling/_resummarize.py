"""Summaries that recover: summarizing again the slices a failing summarizer left with a placeholder.

A roll whose every summarizer attempt failed stores the placeholder ``SUMMARY_ON_EXCEPTION`` with the slice
marked ``unsummarized`` (the messages are stored all the same). :func:`resummarize` finds such slices
(:class:`~partner_repo.units._summaries.UnitSummaries`, through an index), summarizes each slice's raw
messages again, and replaces its placeholder only while it is still there: runs at once never fight (at most
one of them replaces a slice; the other reports it skipped), and a slice replaced meanwhile by anything else
is left as it is. Each replacement raises the slice's ``revision``, which the rolling listener delivers again
to every group (``RollingResult.revision``). It never takes a core's lease: it writes nothing a roll writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import ValidationError

from partner_repo.errors import InvalidInput, NotFound, UnitTooLarge
from partner_repo.mongo import library_logger
from partner_repo.rolling._plan import storable_summary
from partner_repo.rolling._summarizing import SummaryAttempts
from partner_repo.units import MemoryUnitRepository, UnitSummaries, UnsummarizedSlice
from partner_repo.validation import first_error

logger = library_logger("partner_repo.rolling.service")

DEFAULT_RESUMMARIZE_LIMIT = 100
"""Slices one ``resummarize`` call tries at most (each is one summarizer call, or a few)."""

Outcome = Literal["replaced", "failed", "skipped"]


@dataclass(frozen=True)
class ResummarizedSlice:
    """What became of one unsummarized slice: ``replaced`` (its new ``summary`` and ``revision``), ``failed``
    (the summarizer failed again, or the summary did not fit: the placeholder stays, ``detail`` says why) or
    ``skipped`` (replaced by another run meanwhile, or gone: ``detail`` says which)."""

    unit_id: str
    core_id: str
    slice_id: str
    outcome: Outcome
    revision: int | None = None
    summary: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class ResummarizeReport:
    """Every slice a ``resummarize`` call tried, in the order tried; ``more`` when ``limit`` stopped it with
    unsummarized slices left (call again)."""

    slices: tuple[ResummarizedSlice, ...] = ()
    more: bool = False

    def of(self, outcome: Outcome) -> list[ResummarizedSlice]:
        return [piece for piece in self.slices if piece.outcome == outcome]

    @property
    def replaced(self) -> list[ResummarizedSlice]:
        return self.of("replaced")

    @property
    def failed(self) -> list[ResummarizedSlice]:
        return self.of("failed")

    @property
    def skipped(self) -> list[ResummarizedSlice]:
        return self.of("skipped")


async def resummarize(
    units: MemoryUnitRepository,
    summaries: UnitSummaries,
    summarize: SummaryAttempts,
    *,
    core_id: str | None,
    limit: int,
) -> ResummarizeReport:
    """Summarize again up to ``limit`` unsummarized slices (of ``core_id``, when given); see the module
    docstring."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInput(f"limit must be a positive integer, got {limit!r}")
    found, more = await summaries.unsummarized(core_id, limit)
    done = [await _again(units, summaries, summarize, piece) for piece in found]
    report = ResummarizeReport(tuple(done), more)
    logger.info(
        "resummarize%s: %d replaced, %d failed again, %d skipped%s",
        "" if core_id is None else f" core {core_id!r}",
        len(report.replaced),
        len(report.failed),
        len(report.skipped),
        "; more are left" if more else "",
    )
    return report


async def _again(
    units: MemoryUnitRepository,
    summaries: UnitSummaries,
    summarize: SummaryAttempts,
    piece: UnsummarizedSlice,
) -> ResummarizedSlice:
    def outcome(kind: Outcome, detail: str) -> ResummarizedSlice:
        return ResummarizedSlice(piece.unit_id, piece.core_id, piece.slice_id, kind, detail=detail)

    what = f"slice {piece.slice_id!r} of unit {piece.unit_id!r}"
    try:
        messages = await units.messages_between(piece.unit_id, piece.start_index, piece.end_index)
    except NotFound:
        return outcome("skipped", "the unit is gone")
    except (ValidationError, InvalidInput) as exc:
        reason = first_error(exc) if isinstance(exc, ValidationError) else str(exc)
        return outcome("failed", f"its messages cannot be read: {reason}")
    if not messages:
        return outcome("skipped", "its messages are gone")
    summary = await summarize(what, messages)
    if summary.failed:
        return outcome("failed", summary.error or "the summarizer failed")
    text, changes = storable_summary(summary.text)
    for change in changes:
        logger.warning("%s: the summary is stored with %s", what, change)
    try:
        replaced = await summaries.replace(piece.unit_id, piece.slice_id, text)
    except UnitTooLarge as exc:
        return outcome("failed", str(exc))
    if replaced is None:
        return outcome("skipped", "no longer unsummarized (replaced by another run) or gone")
    logger.info("%s: placeholder replaced (revision %d)", what, replaced.revision)
    return ResummarizedSlice(
        piece.unit_id, piece.core_id, piece.slice_id, "replaced", revision=replaced.revision, summary=text
    )


__all__ = ["DEFAULT_RESUMMARIZE_LIMIT", "ResummarizeReport", "ResummarizedSlice", "resummarize"]

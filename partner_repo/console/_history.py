"""The lag history the console keeps: each listener group's pending slices and position age, sampled.

Nothing in the database records a group's lag over time (``listener status`` reads where each group stands
now), so the console keeps what it saw: a sample of every group each time it reads their status (a page, or
its sampler every ``--lag-sample-interval`` seconds), at most one per :data:`MIN_SPACING_S` per group, the
last ``size`` per group, in this process's memory only (a restart starts the history afresh). The chart is
drawn from it as an SVG polyline: no charting library.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

MIN_SPACING_S = 5.0
CHART_WIDTH = 600.0
CHART_HEIGHT = 120.0


@dataclass(frozen=True)
class Sample:
    """A group's lag at one moment: slices pending, and the age of the position a restart resumes from."""

    at: datetime
    pending: int
    position_age_s: float | None


@dataclass(frozen=True)
class Chart:
    """A lag chart: the polyline's points, the axis ends and what the line shows, as text too."""

    points: str
    top: int
    first: datetime
    last: datetime
    samples: int
    summary: str


class LagHistory:
    """The last ``size`` samples of every group, oldest first."""

    def __init__(self, size: int = 240) -> None:
        self._size = size
        self._samples: dict[str, deque[Sample]] = {}

    def record(self, group: str, sample: Sample) -> None:
        """Keep ``sample`` unless the group's last one is less than :data:`MIN_SPACING_S` older."""
        kept = self._samples.setdefault(group, deque(maxlen=self._size))
        if kept and (sample.at - kept[-1].at).total_seconds() < MIN_SPACING_S:
            return
        kept.append(sample)

    def samples(self, group: str) -> list[Sample]:
        return list(self._samples.get(group, ()))

    def chart(self, group: str) -> Chart | None:
        """The chart of the group's pending slices over time; None with fewer than two samples."""
        return chart(self.samples(group))


def chart(samples: Iterable[Sample]) -> Chart | None:
    kept = list(samples)
    if len(kept) < 2:
        return None
    first, last = kept[0].at, kept[-1].at
    span = max((last - first).total_seconds(), 1.0)
    top = max(max(sample.pending for sample in kept), 1)
    points = " ".join(
        f"{(sample.at - first).total_seconds() / span * CHART_WIDTH:.1f},"
        f"{CHART_HEIGHT - sample.pending / top * CHART_HEIGHT:.1f}"
        for sample in kept
    )
    now = kept[-1].pending
    least, most = min(sample.pending for sample in kept), max(sample.pending for sample in kept)
    summary = (
        f"{len(kept)} samples from {first:%H:%M:%S} to {last:%H:%M:%S} UTC: pending between {least} and "
        f"{most} slices, {now} at the last"
    )
    return Chart(points=points, top=top, first=first, last=last, samples=len(kept), summary=summary)


__all__ = ["CHART_HEIGHT", "CHART_WIDTH", "Chart", "LagHistory", "Sample", "chart"]

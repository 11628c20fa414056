"""What every benchmark section shares: its result shape, statistics and the interleaved timing loop."""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from importlib.metadata import PackageNotFoundError, version
from typing import Any


@dataclass(frozen=True)
class Scale:
    """Sizes of one run: ``full`` is what the published tables show, ``quick`` keeps every path, tiny."""

    name: str
    turn_stored_sizes: tuple[int, ...]
    turn_roll_cycles: int
    wire_unit_sizes: tuple[int, ...]
    overhead_rounds: int
    overhead_inner: int
    overhead_unit_messages: int
    overhead_page_units: int
    overhead_slices_per_unit: int
    share: int
    """The listener's sizes on a server, and the admin section's everywhere, are divided by this: SecantusDB
    (the test server) answers one command at a time and mongomock scans every unit, so the full sizes would
    take most of an hour there."""
    listener_backfill_slices: int
    listener_live_slices: int
    listener_rate_per_s: float
    listener_poll_s: float
    parallel_slices: int
    parallel_units: int
    parallel_consume_s: float
    parallel_concurrencies: tuple[int, ...]
    parallel_live_slices: int
    parallel_live_rate_per_s: float
    parallel_live_concurrency: int
    concurrency_appends_per_writer: int
    concurrency_server_appends_per_writer: int
    """On a server: every lost race costs it a read and an update (SecantusDB answers one at a time)."""
    concurrency_writers: tuple[int, ...]
    admin_units: int
    admin_slices_per_unit: int
    admin_depth: int
    admin_page: int
    admin_repeats: int
    peer_sizes: tuple[int, ...]
    locomo_conversations: int
    """LoCoMo conversations to run (0: all)."""
    locomo_questions: int
    """Questions asked per conversation (0: all)."""
    locomo_server_conversations: int
    """LoCoMo conversations whose ingest and recall are timed on the server (0: all)."""
    recall_scale_sizes: tuple[int, ...]
    """Slices of one core whose calls are counted in memory (``--no-server``)."""
    recall_scale_server_sizes: tuple[int, ...]
    """Slices of one core a server is measured at."""
    recall_scale_queries: int
    recall_scale_writes: int
    """Rolls (each indexed) measured at each size."""
    in_memory_sizes: tuple[int, ...]
    """Slices of one core the in-memory section times the embedded backend at."""
    in_memory_queries: int
    """Few: in memory a recall at 5,000 slices takes most of a minute."""
    in_memory_rolls: int
    import_repeats: int
    """Fresh interpreters per import measured (the median is reported)."""


FULL = Scale(
    name="full",
    turn_stored_sizes=(10, 100, 1_000, 5_000),
    turn_roll_cycles=3,
    wire_unit_sizes=(10, 1_000, 10_000),
    overhead_rounds=21,
    overhead_inner=10,
    overhead_unit_messages=5_000,
    overhead_page_units=40,
    overhead_slices_per_unit=25,
    share=10,
    listener_backfill_slices=2_000,
    listener_live_slices=500,
    listener_rate_per_s=100.0,
    listener_poll_s=0.1,
    parallel_slices=2_000,
    parallel_units=200,
    parallel_consume_s=0.05,
    parallel_concurrencies=(1, 8, 32, 128),
    parallel_live_slices=1_000,
    parallel_live_rate_per_s=100.0,
    parallel_live_concurrency=32,
    concurrency_appends_per_writer=25,
    concurrency_server_appends_per_writer=5,
    concurrency_writers=(1, 8, 32),
    admin_units=2_000,
    admin_slices_per_unit=50,
    admin_depth=10_000,
    admin_page=50,
    admin_repeats=3,
    peer_sizes=(10, 100, 1_000, 5_000),
    locomo_conversations=0,
    locomo_questions=0,
    locomo_server_conversations=1,
    recall_scale_sizes=(1_000, 5_000),
    recall_scale_server_sizes=(1_000, 10_000),
    recall_scale_queries=20,
    recall_scale_writes=10,
    in_memory_sizes=(100, 1_000, 5_000),
    in_memory_queries=5,
    in_memory_rolls=3,
    import_repeats=9,
)

QUICK = Scale(
    name="quick",
    turn_stored_sizes=(10, 100),
    turn_roll_cycles=1,
    wire_unit_sizes=(10, 100),
    overhead_rounds=3,
    overhead_inner=2,
    overhead_unit_messages=200,
    overhead_page_units=10,
    overhead_slices_per_unit=5,
    share=1,
    listener_backfill_slices=10,
    listener_live_slices=10,
    listener_rate_per_s=200.0,
    listener_poll_s=0.01,
    parallel_slices=24,
    parallel_units=6,
    parallel_consume_s=0.005,
    parallel_concurrencies=(1, 4),
    parallel_live_slices=12,
    parallel_live_rate_per_s=200.0,
    parallel_live_concurrency=4,
    concurrency_appends_per_writer=3,
    concurrency_server_appends_per_writer=3,
    concurrency_writers=(1, 4),
    admin_units=20,
    admin_slices_per_unit=5,
    admin_depth=40,
    admin_page=10,
    admin_repeats=2,
    peer_sizes=(10, 40),
    locomo_conversations=1,
    locomo_questions=6,
    locomo_server_conversations=1,
    recall_scale_sizes=(50, 100),
    recall_scale_server_sizes=(50, 100),
    recall_scale_queries=5,
    recall_scale_writes=2,
    in_memory_sizes=(50,),
    in_memory_queries=3,
    in_memory_rolls=2,
    import_repeats=1,
)


def divided(scale: Scale) -> Scale:
    """``scale`` with the listener's and the admin section's sizes divided by ``share`` (see there)."""
    share = scale.share
    return replace(
        scale,
        listener_backfill_slices=scale.listener_backfill_slices // share,
        listener_live_slices=scale.listener_live_slices // share,
        parallel_slices=scale.parallel_slices // share,
        parallel_units=max(scale.parallel_units // share, 1),
        parallel_live_slices=scale.parallel_live_slices // share,
        admin_units=max(scale.admin_units // share, 1),
        admin_depth=scale.admin_depth // share,
    )


@dataclass
class Row:
    """One line of the table: a measurement, its figure, and (when the issue sets one) target and verdict."""

    measurement: str
    value: str
    target: str = ""
    passed: bool | None = None


@dataclass
class SectionResult:
    key: str
    title: str
    backend: str
    rows: list[Row] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, key: str, data: dict[str, Any]) -> SectionResult:
        """A result read back from the JSON file (to render it again without measuring again)."""
        return cls(
            key=key,
            title=data["title"],
            backend=data["backend"],
            rows=[Row(**row) for row in data["rows"]],
            raw=data["raw"],
            notes=list(data["notes"]),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "backend": self.backend,
            "rows": [asdict(row) for row in self.rows],
            "raw": self.raw,
            "notes": list(self.notes),
        }


def package_versions(packages: Sequence[str]) -> dict[str, str | None]:
    """The installed version of each distribution, None for one that is not installed."""
    found: dict[str, str | None] = {}
    for package in packages:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found


def percentile(values: Sequence[float], fraction: float) -> float:
    """Linear-interpolated percentile (``fraction`` in [0, 1]) of a non-empty sequence."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of nothing")
    position = (len(ordered) - 1) * fraction
    low = math.floor(position)
    high = math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(values: Sequence[float]) -> dict[str, float]:
    """Median, quartiles and extremes: the spread of repeated measurements."""
    return {
        "median": statistics.median(values),
        "p25": percentile(values, 0.25),
        "p75": percentile(values, 0.75),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


@dataclass
class Timing:
    """Per-operation CPU (process time, all threads) and wall time of one batch."""

    cpu_s: float
    wall_s: float


async def timed_batch(
    operation: Callable[[], Awaitable[Any]], count: int, *, pause_gc: bool = False
) -> Timing:
    """Run ``operation`` ``count`` times; per-operation process CPU and wall time.

    ``pause_gc`` keeps the cyclic garbage collector off during the batch (a diagnostic: it separates the
    cost of building objects from the collector's work on them; garbage is collected after the batch).
    """
    if pause_gc:
        gc.disable()
    try:
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(count):
            await operation()
        return Timing((time.process_time() - cpu) / count, (time.perf_counter() - wall) / count)
    finally:
        if pause_gc:
            gc.enable()
            gc.collect()


async def interleaved(
    library: Callable[[], Awaitable[Any]],
    raw: Callable[[], Awaitable[Any]],
    *,
    rounds: int,
    inner: int,
    before_round: Callable[[], Awaitable[Any]] | None = None,
    pause_gc: bool = False,
) -> dict[str, Any]:
    """Library and raw batches alternated (and their order swapped every round) so drift and noise hit both.

    Returns per-round library/raw ratios of CPU and wall time with their spread, and per-operation times.
    """
    library_times: list[Timing] = []
    raw_times: list[Timing] = []
    await library()  # warm both paths (imports, connections, caches) before anything is timed
    await raw()
    for index in range(rounds):
        if before_round is not None:
            await before_round()
        if index % 2 == 0:
            library_times.append(await timed_batch(library, inner, pause_gc=pause_gc))
            raw_times.append(await timed_batch(raw, inner, pause_gc=pause_gc))
        else:
            raw_times.append(await timed_batch(raw, inner, pause_gc=pause_gc))
            library_times.append(await timed_batch(library, inner, pause_gc=pause_gc))
    cpu_ratios = [lib.cpu_s / max(r.cpu_s, 1e-9) for lib, r in zip(library_times, raw_times, strict=True)]
    wall_ratios = [lib.wall_s / max(r.wall_s, 1e-9) for lib, r in zip(library_times, raw_times, strict=True)]
    return {
        "cpu_ratio": summary(cpu_ratios),
        "wall_ratio": summary(wall_ratios),
        "library_cpu_us": summary([t.cpu_s * 1e6 for t in library_times]),
        "raw_cpu_us": summary([t.cpu_s * 1e6 for t in raw_times]),
        "library_wall_us": summary([t.wall_s * 1e6 for t in library_times]),
        "raw_wall_us": summary([t.wall_s * 1e6 for t in raw_times]),
        "rounds": rounds,
        "operations_per_round": inner,
    }


def ratio_text(figures: dict[str, float]) -> str:
    return f"{figures['median']:.2f}x (IQR {figures['p25']:.2f}-{figures['p75']:.2f})"


def verdict(passed: bool | None) -> str:
    return "" if passed is None else ("PASS" if passed else "FAIL")

"""Section 1: what each operation costs on the wire, against the size of the unit it works on.

The real Motor driver, with pymongo command monitoring, against the scripted standalone MongoDB of
:mod:`benchmarks.wire_server` (and against ``MONGODB_URI`` as well when it is set). Units of each size are
seeded directly (one insert, not measured) with a slice every ten messages; each operation is then measured a
few times and its command count and request/reply BSON bytes recorded.

Claim: an operation's cost is O(increment), never O(unit): the same commands at every size, and bytes at the
largest size within 1.1x of bytes at the smallest.
"""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from benchmarks.backends import motor_database, on_servers, server_version
from benchmarks.common import Row, Scale, SectionResult
from benchmarks.monitor import WireCost, WireMeter
from benchmarks.workload import conversation, seed_unit
from partner_repo import MemoryCoreRepository, MemoryUnitRepository
from partner_repo.clock import utc_now
from partner_repo.rolling import ExtractiveSummarizer, RollingConfig, RollingService

OPERATIONS = ("append", "resolve_increment", "slice_messages", "tail_messages", "rolling step")
CONTROL = "get (control)"
"""``get`` reads the whole unit on purpose: its bytes must grow with the unit, which shows the meter would
see an operation that is O(unit). It has no target."""
MESSAGES_PER_SLICE = 10
WINDOW_CONTEXT = 4
"""Messages of a window that are already stored: the context kept by the previous roll (the unit's tail)."""
WINDOW_NEW = 6
"""New messages in a window. A window of 10 reads at most 10 stored messages, which even the smallest unit
holds, so every size does the same reads: the cost grows with the window, never with the unit."""
REPEATS = 3
BYTES_TARGET = 1.1


async def run(scale: Scale) -> list[SectionResult]:
    return await on_servers(lambda uri, backend: _measure(scale, uri, backend))


async def _measure(scale: Scale, uri: str, backend: str) -> SectionResult:
    meter = WireMeter()
    costs: dict[str, dict[int, list[WireCost]]] = {name: {} for name in (*OPERATIONS, CONTROL)}
    async with motor_database(uri, listeners=[meter]) as database:
        version = await server_version(database)
        for size in scale.wire_unit_sizes:
            for name, operation in (await _operations(database, size)).items():
                runs = []
                for _ in range(REPEATS):
                    prepare, act = operation
                    await prepare()
                    meter.start()
                    try:
                        await act()
                    finally:
                        cost = meter.stop()
                    runs.append(cost)
                costs[name][size] = runs
    return _report(scale, backend, version, costs)


Operation = tuple[Callable[[], Awaitable[Any]], Callable[[], Awaitable[Any]]]


async def _operations(database: Any, size: int) -> dict[str, Operation]:
    """(prepare, measured action) per operation, on a new core whose session unit holds ``size`` messages."""
    units = MemoryUnitRepository(database)
    cores = MemoryCoreRepository(database)
    service = RollingService(database, ExtractiveSummarizer(), RollingConfig())
    core_id = f"core-{size:06d}"
    unit_id = await cores.session_id(core_id)
    # Every size ends with the same last slice of messages and sees the same new messages, so the figures
    # differ only by what the unit's size could change.
    stored = conversation(size - MESSAGES_PER_SLICE, seed=1) + conversation(MESSAGES_PER_SLICE, seed=2)
    slice_ids = await seed_unit(database, unit_id, core_id, stored, messages_per_slice=MESSAGES_PER_SLICE)
    last_full_slice = slice_ids[-1]
    turn = conversation(2, seed=3)
    counter = iter(range(1_000_000))
    clock = {"now": utc_now()}

    snapshot = [*stored[-WINDOW_CONTEXT:], *conversation(WINDOW_NEW, seed=4)]

    async def nothing() -> None:
        return None

    async def set_window() -> None:
        # The window a roll sees: the context the previous roll kept (positions the unit has taken), then
        # WINDOW_NEW new messages. The measured operations before this one appended to the unit through
        # other repositories: an unmeasured roll first, so the measured one is the steady state of a process
        # that rolled the core last (one that did not reads the unit's head first, one more command).
        clock["now"] = clock["now"] + timedelta(seconds=1)
        await cores.record(core_id, conversation(WINDOW_NEW, seed=10 + next(counter)), at=clock["now"])
        await roll()
        clock["now"] = clock["now"] + timedelta(seconds=1)
        await cores.record(core_id, conversation(WINDOW_NEW, seed=10 + next(counter)), at=clock["now"])

    async def roll() -> None:
        result = await service.roll(core_id, now=clock["now"])
        if result is None:
            raise RuntimeError("the measured roll did not roll")

    # The seeded unit was written without positions: the first roll derives its mark from the stored tail
    # (once, as for data written before 0.4); the measured rolls are the ones every later turn pays.
    await cores.record(
        core_id, [*stored[-WINDOW_CONTEXT:], *conversation(WINDOW_NEW, seed=5)], at=clock["now"]
    )
    await roll()

    return {
        # A new repository each run, so every run measures the same cold append (head read, then push); a
        # repository that remembers the head would send the push alone after its first run.
        "append": (
            nothing,
            lambda: MemoryUnitRepository(database).append(unit_id, turn, "a turn", core_id=core_id),
        ),
        "resolve_increment": (nothing, lambda: service.resolve_increment(core_id, snapshot)),
        "slice_messages": (nothing, lambda: units.slice_messages(unit_id, last_full_slice)),
        "tail_messages": (nothing, lambda: units.tail_messages(unit_id, WINDOW_CONTEXT)),
        "rolling step": (set_window, roll),
        CONTROL: (nothing, lambda: units.get(unit_id)),
    }


def _report(
    scale: Scale, backend: str, version: str | None, costs: dict[str, dict[int, list[WireCost]]]
) -> SectionResult:
    smallest, largest = min(scale.wire_unit_sizes), max(scale.wire_unit_sizes)
    result = SectionResult(key="wire", title="1. Wire cost per operation vs unit size", backend=backend)
    raw: dict[str, Any] = {
        "server_version": version,
        "unit_sizes": list(scale.wire_unit_sizes),
        "operations": {},
    }
    for name, by_size in costs.items():
        counts = {size: sorted({c.command_count for c in runs}) for size, runs in by_size.items()}
        total = {size: statistics.median(c.total_bytes for c in runs) for size, runs in by_size.items()}
        failures = [f for runs in by_size.values() for c in runs for f in c.failed]
        same_commands = len({tuple(c.commands) for runs in by_size.values() for c in runs}) == 1
        growth = total[largest] / total[smallest]
        passed = None if name == CONTROL else same_commands and growth <= BYTES_TARGET and not failures
        commands = by_size[smallest][0].commands
        sizes_text = ", ".join(f"{size:,}: {total[size]:,.0f} B" for size in scale.wire_unit_sizes)
        result.rows.append(
            Row(
                f"{name}: {len(commands)} cmd ({'+'.join(commands)})"
                + ("" if same_commands else " - commands differ by size"),
                f"{sizes_text}; {largest:,}/{smallest:,} = {growth:.3f}x",
                "" if name == CONTROL else f"same commands, bytes <= {BYTES_TARGET}x",
                passed,
            )
        )
        raw["operations"][name] = {
            "commands": commands,
            "same_commands_at_every_size": same_commands,
            "command_counts": {str(size): count for size, count in counts.items()},
            "bytes_growth": growth,
            "failed_commands": failures,
            "by_size": {
                str(size): {
                    "median_total_bytes": total[size],
                    "runs": [c.as_dict() for c in runs],
                }
                for size, runs in by_size.items()
            },
        }
    result.raw = raw
    result.notes.append(
        "bytes = BSON size of each command document plus its reply, from pymongo command monitoring "
        f"(median of {REPEATS} runs); units hold a slice every {MESSAGES_PER_SLICE} messages; a turn is 2 "
        f"messages; a window is {WINDOW_CONTEXT} retained + {WINDOW_NEW} new messages"
    )
    return result

"""Section 0: what a service pays per turn of a conversation, rolls included, against the session's size.

The real Motor driver with pymongo command monitoring against the scripted standalone MongoDB of
:mod:`benchmarks.wire_server` (and ``MONGODB_URI`` when set). One session holds 10 / 100 / 1,000 / 5,000
stored messages and a window of the context its last roll kept; turns of two 200-character messages are then
recorded through a path until a whole number of roll cycles has passed (default ``trigger_limit`` 36, so a
roll every 15 turns), and every command of every turn is counted.

- **recommended**: ``RollingService.record_and_roll`` (the README's per-turn call);
- **record + maybe_roll**: the two calls of 0.2.0, still supported.

Targets (issue 19): the recommended path at most 1.25 round trips and 2,500 bytes per turn at every size, flat
(largest/smallest bytes at most 1.1x); a roll in at most 3 commands once the process has seen the unit (the
first roll of a process reads the unit's head first: 4); the two-call path no slower than 0.2.0's 2.53 round
trips and 14,756 bytes per turn at 5,000 messages.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.backends import describe, given_uri, mongodb_uri, motor_database, on_servers, server_version
from benchmarks.common import Row, Scale, SectionResult
from benchmarks.monitor import WireMeter
from benchmarks.workload import conversation, seed_unit, turn
from partner_repo import MemoryCoreRepository, Message, RollingConfig, RollingService
from partner_repo.mongo import mark_size_change
from partner_repo.rolling import ExtractiveSummarizer

PER_TURN_GOAL = 2_000
"""Issue 37's goal on a server, gossip included (the floor: one command a turn, three per roll)."""
ROUND_TRIPS_TARGET = 1.25
BYTES_TARGET = 2_500
FLAT_TARGET = 1.1
ROLL_COMMANDS_TARGET = 3
FIRST_ROLL_COMMANDS_TARGET = 4
"""The first roll of a process has not seen the unit yet: it reads the unit's head (no message) first."""
BEFORE = {"round_trips": 2.53, "bytes": 14_756}
"""0.2.0's two-call path at 5,000 stored messages, as issue 12 measured it."""
RETAINED = 6
"""The window a roll leaves with the default ``retain_divisor`` 6: the last sixth of 36 messages."""
PATHS = ("recommended", "record + maybe_roll")


@dataclass
class PathCost:
    """Every turn of one path at one size: commands and bytes per turn, and which turns rolled."""

    turns: int = 0
    commands: int = 0
    bytes: int = 0
    roll_commands: list[list[str]] = field(default_factory=list)
    parts: dict[str, int] = field(default_factory=dict)
    """Bytes by part (:func:`benchmarks.monitor.split`) over every turn."""
    plain_turns: int = 0
    plain_parts: dict[str, int] = field(default_factory=dict)
    """The same over the turns that did not roll: what a turn costs by itself."""

    @property
    def round_trips(self) -> float:
        return self.commands / self.turns

    @property
    def bytes_per_turn(self) -> float:
        return self.bytes / self.turns


Step = Callable[[str, list[Message]], Awaitable[Any]]


async def run(scale: Scale) -> list[SectionResult]:
    results = await on_servers(lambda uri, backend: _measure(scale, uri, backend))
    started = mongodb_uri()
    if started is not None and started != given_uri():  # a replica set's bytes: its gossip and sessions
        results.append(await _measure(scale, started, describe("mongodb", started)))
    return results


async def _measure(scale: Scale, uri: str, backend: str) -> SectionResult:
    meter = WireMeter()
    costs: dict[str, dict[int, PathCost]] = {path: {} for path in PATHS}
    async with motor_database(uri, listeners=[meter]) as database:
        version = await server_version(database)
        cores = MemoryCoreRepository(database)
        service = RollingService(database, ExtractiveSummarizer(), RollingConfig())

        async def two_calls(core_id: str, messages: list[Message]) -> Any:
            await cores.record(core_id, messages)
            return await service.maybe_roll(core_id)

        steps: dict[str, Step] = {"recommended": service.record_and_roll, "record + maybe_roll": two_calls}
        for size in scale.turn_stored_sizes:
            for path, step in steps.items():
                core_id = f"{path.split()[0]}-{size:06d}"
                await _seed(database, cores, core_id, size)
                costs[path][size] = await _turns(meter, step, core_id, scale.turn_roll_cycles)
    return _report(scale, backend, version, costs)


async def _seed(database: Any, cores: MemoryCoreRepository, core_id: str, size: int) -> None:
    """A session unit of ``size`` messages, and the window its last roll left (its last messages), with
    positions as a roll (or the 0.4 migration) leaves them: the window's messages are taken by the unit."""
    unit_id = await cores.session_id(core_id)
    stored = conversation(size, seed=size)
    await seed_unit(database, unit_id, core_id, stored, messages_per_slice=min(size, 10))
    await cores.record(core_id, stored[-RETAINED:])
    await database["memory_units"].update_one(
        {"_id": unit_id},
        {
            "$set": {"taken_until": RETAINED, "taken_count": size},
            "$inc": {"size_bytes": mark_size_change((None, None), (RETAINED, size))},
        },
    )


async def _turns(meter: WireMeter, step: Step, core_id: str, cycles: int) -> PathCost:
    """Turns through ``step`` until ``cycles`` rolls have happened (so the figures cover whole cycles)."""
    cost = PathCost()
    while len(cost.roll_commands) < cycles:
        meter.start()
        try:
            rolled = await step(core_id, turn(cost.turns))
        finally:
            wire = meter.stop()
        if wire.failed:
            raise RuntimeError(f"{core_id}: a command failed: {wire.failed}")
        cost.turns += 1
        cost.commands += wire.command_count
        cost.bytes += wire.total_bytes
        for part, size in wire.parts.items():
            cost.parts[part] = cost.parts.get(part, 0) + size
            if rolled is None:
                cost.plain_parts[part] = cost.plain_parts.get(part, 0) + size
        if rolled is None:
            cost.plain_turns += 1
        else:
            cost.roll_commands.append(wire.commands)
    return cost


PARTS = ("messages", "library", "envelope")


def _parts_row(cost: PathCost, size: int) -> Row:
    """Where a turn's bytes go, and why each part is needed (issue 37's goal: at most 2,000 bytes a turn on a
    server, gossip included). A turn that does not roll is one command; the rolls' share is what every roll
    costs (reading the window, appending to the unit, trimming), spread over the turns of its cycle."""
    per_turn = {part: cost.parts.get(part, 0) / cost.turns for part in PARTS}
    record = {part: cost.plain_parts.get(part, 0) / max(cost.plain_turns, 1) for part in PARTS}
    share = {part: per_turn[part] - record[part] for part in PARTS}  # a rolling turn records the same way

    def parts(figures: dict[str, float]) -> str:
        return ", ".join(f"{name} {figures[name]:,.0f}" for name in PARTS)

    figures = (
        f"at {size:,}: {cost.bytes_per_turn:,.0f} B = a turn's record, one command "
        f"({sum(record.values()):,.0f} B: {parts(record)}) + the rolls' share a turn "
        f"({sum(share.values()):,.0f} B: {parts(share)}). messages: a turn's two as stored, on the wire "
        "three times (recorded; read by the roll that summarizes them; written into the unit, which is what "
        "keeps them); library: the core's id and window-count guard, $push/$set/$inc of the window, its "
        "count, bytes and version, the projection, and the state a turn is answered with (session, lease, "
        "counters, times: what decides a roll without reading the window); the roll's lease, unit head, "
        "summary and trim; envelope: the session id, the replica set's cluster time gossip, the write "
        "concern and the acknowledgement, on every command and answer"
    )
    return Row(
        "recommended: bytes per turn by part",
        figures,
        f"goal <= {PER_TURN_GOAL:,} B (issue 37); above it, every part named",
        None,  # informational: the parts are always named, and the goal is the per-turn row's to judge
    )


def _report(
    scale: Scale, backend: str, version: str | None, costs: dict[str, dict[int, PathCost]]
) -> SectionResult:
    sizes = scale.turn_stored_sizes
    smallest, largest = min(sizes), max(sizes)
    result = SectionResult(key="turn", title="0. Per turn of a conversation, rolls included", backend=backend)
    raw: dict[str, Any] = {"server_version": version, "stored_sizes": list(sizes), "paths": {}}
    for path, by_size in costs.items():
        trips = {size: cost.round_trips for size, cost in by_size.items()}
        per_turn = {size: cost.bytes_per_turn for size, cost in by_size.items()}
        growth = per_turn[largest] / per_turn[smallest]
        figures = "; ".join(f"{size:,}: {trips[size]:.2f} rt, {per_turn[size]:,.0f} B" for size in sizes)
        if path == "recommended":
            passed = (
                max(trips.values()) <= ROUND_TRIPS_TARGET
                and max(per_turn.values()) <= BYTES_TARGET
                and growth <= FLAT_TARGET
            )
            target = f"<= {ROUND_TRIPS_TARGET} rt, <= {BYTES_TARGET:,} B, flat <= {FLAT_TARGET}x"
        else:
            passed = trips[largest] <= BEFORE["round_trips"] and per_turn[largest] <= BEFORE["bytes"]
            target = f"<= 0.2.0: {BEFORE['round_trips']} rt, {BEFORE['bytes']:,} B at {largest:,}"
        result.rows.append(
            Row(f"{path}: per turn", f"{figures}; {largest:,}/{smallest:,} = {growth:.2f}x", target, passed)
        )
        for which, pick, limit in (
            ("a roll", lambda cost: cost.roll_commands[1:], ROLL_COMMANDS_TARGET),
            (
                "the first roll of the process",
                lambda cost: cost.roll_commands[:1],
                FIRST_ROLL_COMMANDS_TARGET,
            ),
        ):
            rolls = [commands for cost in by_size.values() for commands in pick(cost)]
            if not rolls:
                continue
            shapes = sorted({"+".join(commands[1:]) for commands in rolls})  # the turn's record comes first
            worst = max(len(commands) - 1 for commands in rolls)
            result.rows.append(
                Row(
                    f"{path}: {which}, after its turn's record",
                    f"{worst} cmd ({'; '.join(shapes)}) in {len(rolls)} rolls",
                    f"<= {limit} cmd" if path == "recommended" else "",
                    worst <= limit if path == "recommended" else None,
                )
            )
        if path == "recommended":
            result.rows.append(_parts_row(by_size[largest], largest))
        raw["paths"][path] = {
            str(size): {
                "turns": cost.turns,
                "round_trips_per_turn": cost.round_trips,
                "bytes_per_turn": cost.bytes_per_turn,
                "roll_commands": cost.roll_commands,
                "bytes_per_turn_by_part": {part: size / cost.turns for part, size in cost.parts.items()},
                "bytes_of_a_turn_that_does_not_roll_by_part": {
                    part: size / max(cost.plain_turns, 1) for part, size in cost.plain_parts.items()
                },
            }
            for size, cost in by_size.items()
        }
    result.raw = raw
    result.notes.append(
        "per turn = all commands and BSON bytes (command + reply, pymongo command monitoring) of every turn "
        f"until {scale.turn_roll_cycles} roll(s), divided by the turns; a turn is 2 messages of 200 "
        "characters; default RollingConfig (trigger_limit 36, retain_divisor 6); extractive summarizer"
    )
    return result

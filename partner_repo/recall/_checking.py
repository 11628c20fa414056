"""Checking the recall index's counters against the index itself, and setting them again.

The index keeps two kinds of counters (:mod:`.store`): each core's slice count and each topic node's. They
move in the same ordered write as the slice that moves them, so they only drift when a write stops between
its operations (a server failing mid-batch) or an erasure stops between its counters and its slices: then
they read low, never high. :class:`RecallIndexCheck` counts again from the slices themselves (what the
index holds is the truth; the counters are a cache of it) and reports, per core, every counter that
differs, every node no slice holds any more, and every slice whose unit is gone or erased (the index was
not told); ``repair`` sets the counters to the counts, recreates missing nodes, deletes the unheld ones and
removes the orphaned slices. ``partner-repo check`` and ``repair`` run it after the units.

A check reads every slice of the core (their nodes and units only): admin work, not the request path.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from partner_repo.mongo import ERASED_AT, RECALL_INDEX, UNITS, DeleteMany, UpdateOne, driver
from partner_repo.recall._keys import CORE, core_key, node_key
from partner_repo.recall._store import RecallStore, node_fields
from partner_repo.recall._topics import SEPARATOR

UNIT_BATCH = 500


@dataclass(frozen=True)
class CounterOff:
    """A counter that differs from what the index holds (``recorded`` None: the document is missing)."""

    path: str
    recorded: int | None
    counted: int


@dataclass(frozen=True)
class CoreIndexCheck:
    """What checking one core's part of the index found."""

    core_id: str
    slices: int
    """How many slices of the core the index holds."""
    core: CounterOff | None = None
    """The core's slice counter, when it differs (``path`` is empty)."""
    nodes: list[CounterOff] = field(default_factory=list)
    unheld: list[str] = field(default_factory=list)
    """Nodes no slice holds any more."""
    orphans: list[str] = field(default_factory=list)
    """Units whose slices are indexed although the unit is gone or erased."""

    @property
    def ok(self) -> bool:
        return self.core is None and not self.nodes and not self.unheld and not self.orphans


@dataclass
class _Counted:
    slices: int = 0
    last_seq: int = 0
    nodes: dict[str, int] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    units: set[str] = field(default_factory=set)


class RecallIndexCheck:
    """Checks (and repairs) the recall index of one database, core by core (see the module)."""

    def __init__(self, database: Any) -> None:
        self._database = database
        self._index = database[RECALL_INDEX]

    async def check(self, core_id: str | None = None) -> list[CoreIndexCheck]:
        """Every core of the index (or ``core_id``) and what is off in it."""
        return [await self._check(core) for core in await self._cores(core_id)]

    async def repair(self, core_id: str | None = None) -> list[CoreIndexCheck]:
        """Check, then set every counter that is off, recreate missing nodes, delete unheld ones and remove
        the slices of units that are gone; what was found (now repaired)."""
        found = await self.check(core_id)
        for report in found:
            if not report.ok:
                await self._repair(report)
        return found

    async def _cores(self, core_id: str | None) -> list[str]:
        if core_id is not None:
            return [core_id]
        return sorted(str(core) for core in await self._index.distinct("core_id"))

    async def _check(self, core_id: str) -> CoreIndexCheck:
        counted = await self._count(core_id)
        recorded = await self._index.find({"core_id": core_id, "_id": core_key(core_id)}).to_list(None)
        core_slices = int(recorded[0].get("slices") or 0) if recorded else None
        core_off = None
        if core_slices != counted.slices and (core_slices is not None or counted.slices):
            core_off = CounterOff("", core_slices, counted.slices)
        nodes = await self._index.find(
            {"core_id": core_id, "depth": {"$gte": 1}}, {"node": 1, "slices": 1}
        ).to_list(None)
        stored = {row["node"]: int(row.get("slices") or 0) for row in nodes}
        off = [
            CounterOff(path, stored.get(path), count)
            for path, count in sorted(counted.nodes.items())
            if stored.get(path) != count
        ]
        unheld = sorted(path for path in stored if path not in counted.nodes)
        orphans = await self._orphans(counted.units)
        return CoreIndexCheck(core_id, counted.slices, core_off, off, unheld, orphans)

    async def _count(self, core_id: str) -> _Counted:
        counted = _Counted()
        cursor = self._index.find(
            {"core_id": core_id, "seq": {"$gte": 1}}, {"ancestors": 1, "topic": 1, "seq": 1, "unit_id": 1}
        )
        async for row in cursor:
            counted.slices += 1
            counted.last_seq = max(counted.last_seq, int(row.get("seq") or 0))
            counted.units.add(row["unit_id"])
            shown = str(row.get("topic") or "").split(SEPARATOR)
            for depth, path in enumerate(row.get("ancestors") or ()):
                counted.nodes[path] = counted.nodes.get(path, 0) + 1
                if len(shown) > depth and path not in counted.labels:
                    counted.labels[path] = SEPARATOR.join(shown[: depth + 1])
        return counted

    async def _orphans(self, unit_ids: Iterable[str]) -> list[str]:
        """The units whose slices are indexed but which are gone, or erased (a tombstone)."""
        wanted = sorted(unit_ids)
        live: set[str] = set()
        for start in range(0, len(wanted), UNIT_BATCH):
            batch = wanted[start : start + UNIT_BATCH]
            async for row in self._database[UNITS].find({"_id": {"$in": batch}}, {ERASED_AT: 1}):
                if ERASED_AT not in row:
                    live.add(row["_id"])
        return [unit_id for unit_id in wanted if unit_id not in live]

    async def _repair(self, report: CoreIndexCheck) -> None:
        core_id = report.core_id
        if report.orphans:
            await RecallStore(self._database).remove_units(core_id, report.orphans)
        counted = await self._count(core_id)
        writes: list[Any] = []
        if counted.slices:
            core: dict[str, Any] = {
                "$set": {"slices": counted.slices},
                "$max": {"last_seq": counted.last_seq},
                "$setOnInsert": {"kind": CORE},
            }
            writes.append(UpdateOne({"_id": core_key(core_id), "core_id": core_id}, core, upsert=True))
        else:
            writes.append(DeleteMany({"_id": core_key(core_id), "core_id": core_id}))
        for path, count in counted.nodes.items():
            fixed = {
                "$set": {"slices": count},
                "$setOnInsert": node_fields(path, counted.labels.get(path, path)),
            }
            writes.append(UpdateOne({"_id": node_key(core_id, path), "core_id": core_id}, fixed, upsert=True))
        unheld = [node_key(core_id, path) for path in report.unheld if path not in counted.nodes]
        if unheld:
            writes.append(DeleteMany({"core_id": core_id, "_id": {"$in": unheld}}))
        await driver.bulk_write(self._index, writes, ordered=True)


__all__ = ["CoreIndexCheck", "CounterOff", "RecallIndexCheck"]

"""Checking the recall index's counters against the index itself, and setting them again.

The index keeps two kinds of counters (:mod:`.store`): each core's slice count and each topic node's. They
move in the same ordered write as the slice that moves them, so they only drift when a write stops between
its operations (a server failing mid-batch) or an erasure stops between its counters and its slices: then
they read low, never high. :class:`RecallIndexCheck` counts again from the slices themselves (what the
index holds is the truth; the counters are a cache of it) and reports, per core, every counter that
differs, every node no slice holds any more, and every slice whose unit is gone or erased (the index was
not told); ``repair`` sets the counters to the counts, recreates missing nodes, deletes the unheld ones and
removes the orphaned slices. An operator's tool reads what is there: a counter of another type, a node
missing a field, a last sequence number below the slices' are reported and repaired, never raised on.
``partner-repo check`` and ``repair`` run it after the units.

A check reads every slice of the core (their nodes and units only): admin work, not the request path.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from partner_repo.mongo import ERASED_AT, RECALL_INDEX, UNITS, DeleteMany, UpdateOne, driver
from partner_repo.recall._keys import CORE, NODE, SLICE, core_key, key_kind, node_key, node_path, stored_count
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
    sequence: CounterOff | None = None
    """The core's last sequence number, when it is below the highest its slices hold (``path``
    ``"last_seq"``): the next slice indexed would take a number another slice has."""
    damaged: list[str] = field(default_factory=list)
    """Nodes whose own fields (path, label, depth, words) are missing or of the wrong type."""

    @property
    def ok(self) -> bool:
        return (
            self.core is None
            and self.sequence is None
            and not self.nodes
            and not self.unheld
            and not self.orphans
            and not self.damaged
        )


@dataclass
class _Counted:
    """One pass over a core's part of the index: what its slices say, and what its counters hold."""

    slices: int = 0
    last_seq: int = 0
    nodes: dict[str, int] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    units: set[str] = field(default_factory=set)
    core: dict[str, Any] | None = None
    stored_nodes: dict[str, dict[str, Any]] = field(default_factory=dict)


class RecallIndexCheck:
    """Checks (and repairs) the recall index of one database, core by core (see the module).

    It reads every document of a core, whatever it holds: a counter of the wrong type, a node missing its
    depth, a slice whose number is not a number are reported (and repaired), never raised on."""

    def __init__(self, database: Any) -> None:
        self._database = database
        self._index = database[RECALL_INDEX]

    async def check(self, core_id: str | None = None) -> list[CoreIndexCheck]:
        """Every core of the index (or ``core_id``) and what is off in it."""
        return [await self._check(core) for core in await self._cores(core_id)]

    async def repair(self, core_id: str | None = None) -> list[CoreIndexCheck]:
        """Check, then set every counter that is off, recreate missing nodes and rewrite damaged ones, delete
        unheld ones and remove the slices of units that are gone; what was found (now repaired)."""
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
        core_slices = stored_count(counted.core.get("slices")) if counted.core is not None else None
        core_off = None
        if core_slices != counted.slices and (counted.core is not None or counted.slices):
            core_off = CounterOff("", core_slices, counted.slices)
        last_seq = stored_count(counted.core.get("last_seq")) if counted.core is not None else None
        sequence = None
        if counted.slices and (last_seq is None or last_seq < counted.last_seq):
            sequence = CounterOff("last_seq", last_seq, counted.last_seq)
        stored = {path: stored_count(row.get("slices")) for path, row in counted.stored_nodes.items()}
        off = [
            CounterOff(path, stored.get(path), count)
            for path, count in sorted(counted.nodes.items())
            if stored.get(path) != count
        ]
        unheld = sorted(path for path in stored if path not in counted.nodes)
        damaged = sorted(
            path
            for path, row in counted.stored_nodes.items()
            if path in counted.nodes and not _sound_node(path, row)
        )
        orphans = await self._orphans(counted.units)
        return CoreIndexCheck(core_id, counted.slices, core_off, off, unheld, orphans, sequence, damaged)

    async def _count(self, core_id: str) -> _Counted:
        """Every document of the core, read once: slices counted (their nodes, numbers and units), the core's
        counters and the nodes as stored. Documents are told apart by their ids (:mod:`.keys`), which hold
        whatever else a document lost."""
        counted = _Counted()
        projection = {"ancestors": 1, "topic": 1, "seq": 1, "unit_id": 1, "slices": 1, "last_seq": 1}
        projection |= {"node": 1, "label": 1, "depth": 1, "words": 1, "names": 1, "kind": 1}
        async for row in self._index.find({"core_id": core_id}, projection):
            kind = key_kind(row.get("_id"))
            if kind == CORE:
                counted.core = row
            elif kind == NODE:
                path = node_path(row.get("_id"))
                if path is not None:
                    counted.stored_nodes[path] = row
            elif kind == SLICE:
                self._count_slice(counted, row)
        return counted

    @staticmethod
    def _count_slice(counted: _Counted, row: dict[str, Any]) -> None:
        counted.slices += 1
        counted.last_seq = max(counted.last_seq, stored_count(row.get("seq")) or 0)
        if isinstance(row.get("unit_id"), str):
            counted.units.add(row["unit_id"])
        shown = str(row.get("topic") or "").split(SEPARATOR)
        ancestors = row.get("ancestors")
        for depth, path in enumerate(ancestors if isinstance(ancestors, list) else ()):
            if not isinstance(path, str):
                continue
            counted.nodes[path] = counted.nodes.get(path, 0) + 1
            if len(shown) > depth and path not in counted.labels:
                counted.labels[path] = SEPARATOR.join(shown[: depth + 1])

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
        core = {"_id": core_key(core_id), "core_id": core_id}
        if counted.slices:
            fixed: dict[str, Any] = {"$set": {"kind": CORE, "slices": counted.slices}}
            if stored_count((counted.core or {}).get("last_seq")) is None:  # another type: $max would keep it
                fixed["$set"]["last_seq"] = counted.last_seq
            else:  # an index write may have numbered a slice since the count: never lower it
                fixed["$max"] = {"last_seq": counted.last_seq}
            writes.append(UpdateOne(core, fixed, upsert=True))
        else:
            writes.append(DeleteMany(core))
        for path, count in counted.nodes.items():
            stored = counted.stored_nodes.get(path)
            if (
                stored is not None
                and stored_count(stored.get("slices")) == count
                and _sound_node(path, stored)
            ):
                continue
            fields = {**node_fields(path, _label(path, stored, counted)), "slices": count}
            writes.append(
                UpdateOne({"_id": node_key(core_id, path), "core_id": core_id}, {"$set": fields}, upsert=True)
            )
        unheld = [node_key(core_id, path) for path in counted.stored_nodes if path not in counted.nodes]
        if unheld:
            writes.append(DeleteMany({"core_id": core_id, "_id": {"$in": unheld}}))
        await driver.bulk_write(self._index, writes, ordered=True)


def _sound_node(path: str, row: dict[str, Any]) -> bool:
    """Whether a stored node holds its own fields as indexing writes them (its counter aside)."""
    expected = node_fields(path, row["label"] if isinstance(row.get("label"), str) else path)
    return all(row.get(name) == value for name, value in expected.items())


def _label(path: str, stored: dict[str, Any] | None, counted: _Counted) -> str:
    """A node's label: the one it holds, else the one its slices' topics show, else its path."""
    if stored is not None and isinstance(stored.get("label"), str) and stored["label"]:
        return str(stored["label"])
    return counted.labels.get(path, path)


__all__ = ["CoreIndexCheck", "CounterOff", "RecallIndexCheck"]

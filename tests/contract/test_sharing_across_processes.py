"""The sharing promise across OS processes, with kills: every increment stored once, every roll delivered.

Against the server named by ``MONGODB_URI`` (skipped, with the reason shown, without one), the test starts
separate processes (``tests/processes/``) sharing one database:

- 4 writer processes recording turns into 3 shared cores and rolling after each turn (a small
  ``trigger_limit`` and a small unit soft limit, so rolls and continuation units happen often); writer 0 is
  SIGKILLed inside a (deliberately hanging) summarizer, holding a core's lease, and started again;
- 2 listener processes of group ``A`` (one active, one standing by) and 1 of group ``B``, each consumer
  logging what it receives to a file; the active listener of ``A`` is SIGKILLed in the middle of a delivery.

Then it checks, from the database and the files: every recorded message is stored exactly once across the
units and the window of its core, in each writer's order; the slices tile their units; each group received
every slice at least once, in per-unit order; no slice whose checkpoint was saved before the kill is
delivered again to that group. It prints one summary line.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from partner_repo import (
    MemoryCoreRepository,
    MemoryUnit,
    MemoryUnitRepository,
    close_database,
    connect,
    resolve_chat_increment,
)
from partner_repo.mongo import CHECKPOINTS, UNITS
from tests.conftest import requires_mongodb

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
WRITERS = 4
CORES = ("core-a", "core-b", "core-c")
TURNS = 90
LEASE_SECONDS = 2.0
LISTENER_TTL = 2.0
PATIENCE_S = 120.0


class Processes:
    """The worker processes of one run, killed at the end whatever happened."""

    def __init__(self, uri: str, db: str, workdir: Path) -> None:
        self.uri, self.db, self.workdir = uri, db, workdir
        self.running: list[subprocess.Popen[bytes]] = []
        self.kills = 0

    def start(self, script: str, *args: str, log: str) -> subprocess.Popen[bytes]:
        environment = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [
            sys.executable,
            str(ROOT / "tests" / "processes" / script),
            "--uri",
            self.uri,
            "--db",
            self.db,
        ]
        with (self.workdir / log).open("ab") as output:
            process = subprocess.Popen([*command, *args], env=environment, stdout=output, stderr=output)
        self.running.append(process)
        return process

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        process.send_signal(signal.SIGKILL)
        process.wait()
        self.kills += 1

    def close(self) -> None:
        for process in self.running:
            if process.poll() is None:
                process.kill()
                process.wait()


async def eventually(check: Any, what: str, within: float = PATIENCE_S) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def lease_takeovers(workdir: Path) -> int:
    """How often a writer took over a silent rolling lease (each logs it once)."""
    return "".join(path.read_text() for path in workdir.glob("w*.log")).count("taking it over")


def read_lines(path: Path) -> list[dict[str, Any]]:
    return (
        [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    )


async def test_many_processes_share_cores_through_kills_storing_each_increment_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = requires_mongodb()
    db_name = f"partner_repo_share_{uuid.uuid4().hex[:10]}"
    database = await connect(uri, db_name)
    cores = MemoryCoreRepository(database)
    for core_id in CORES:  # created up front, one at a time (concurrent first upserts: see emulator_gaps)
        await cores.get_or_create(core_id)
    processes = Processes(uri, db_name, tmp_path)
    try:
        outcome = await run(processes, database, tmp_path)
    finally:
        processes.close()
        await database.client.drop_database(db_name)
        await close_database(database)
    with capsys.disabled():
        print(
            f"\nsharing across processes: {outcome['turns']} turns, {outcome['rolls']} rolls, "
            f"{processes.kills} kills, {outcome['takeovers']} lease takeovers, {outcome['deliveries']} "
            f"deliveries, {outcome['duplicates']} duplicates (redeliveries after the listener kill), "
            f"{outcome['units']} units"
        )


async def run(processes: Processes, database: Any, workdir: Path) -> dict[str, int]:
    listener_args = ("--lease-ttl", str(LISTENER_TTL))
    ready = {name: workdir / f"{name}.ready" for name in ("A1", "A2", "B1")}
    a1 = processes.start(
        "listener.py", "--group", "A", "--out", str(workdir / "A1.jsonl"), "--ready", str(ready["A1"]),
        "--delay", "0.05", *listener_args, log="A1.log",
    )  # fmt: skip
    await eventually(
        ready["A1"].exists, "listener A1 to start"
    )  # the group exists before its standby opens it
    a2 = processes.start(
        "listener.py", "--group", "A", "--out", str(workdir / "A2.jsonl"), "--ready", str(ready["A2"]),
        "--delay", "0.05", *listener_args, log="A2.log",
    )  # fmt: skip
    processes.start(
        "listener.py", "--group", "B", "--out", str(workdir / "B1.jsonl"), "--ready", str(ready["B1"]),
        *listener_args, log="B1.log",
    )  # fmt: skip
    await eventually(lambda: ready["A2"].exists() and ready["B1"].exists(), "listeners A2 and B1 to start")

    marker = workdir / "w0.stalled"

    def writer(number: int, stall: bool) -> subprocess.Popen[bytes]:
        args = [
            "--writer", str(number), "--cores", ",".join(CORES), "--turns", str(TURNS),
            "--journal", str(workdir / f"w{number}.journal"), "--trigger-limit", "6",
            "--lease-seconds", str(LEASE_SECONDS), "--soft-limit", "6000",
        ]  # fmt: skip
        if stall:
            args += ["--stall-at-roll", "3", "--stall-marker", str(marker)]
        return processes.start("writer.py", *args, log=f"w{number}.log")

    writers = [writer(n, stall=n == 0) for n in range(WRITERS)]
    await eventually(marker.exists, "writer 0 to hang inside its summarizer")
    processes.kill(writers[0])  # mid-roll, holding the lease
    writers[0] = writer(0, stall=False)

    active = await active_listener(database, "A", {a1.pid: a1, a2.pid: a2})
    await eventually(
        lambda: len(read_lines(workdir / f"A{1 if active is a1 else 2}.jsonl")) >= 5, "deliveries"
    )
    processes.kill(active)  # in the middle of a delivery (each takes 50 ms)
    saved = await delivered(database, "A")  # the checkpoint as the killed listener left it
    standby_file = workdir / ("A2.jsonl" if active is a1 else "A1.jsonl")
    killed_file = workdir / ("A1.jsonl" if active is a1 else "A2.jsonl")

    await eventually(lambda: all(w.poll() is not None for w in writers), "the writers to finish")
    assert [w.returncode for w in writers] == [0] * WRITERS, "a writer failed: see its log in the work dir"
    slices = await stored_slices(database)
    for group in ("A", "B"):
        await eventually(lambda g=group: delivered_all(database, g, slices), f"group {group} to deliver all")

    turns = await check_storage(database, workdir)
    deliveries = check_deliveries(
        slices, {"A": [killed_file, standby_file], "B": [workdir / "B1.jsonl"]}, saved
    )
    return {
        "turns": turns,
        "rolls": len(slices),
        "deliveries": deliveries,
        "duplicates": deliveries - 2 * len(slices),
        "units": len({unit for unit, _ in slices.values()}),
        "takeovers": lease_takeovers(workdir),
    }


async def active_listener(
    database: Any, group: str, candidates: dict[int, subprocess.Popen[bytes]]
) -> subprocess.Popen[bytes]:
    async def owner_pid() -> int | None:
        document = await database[CHECKPOINTS].find_one({"_id": {"group": group}}, {"owner": 1})
        owner = (document or {}).get("owner")
        return int(owner.split(":")[1]) if owner else None

    pid = await eventually(owner_pid, f"an active listener of group {group}")
    assert pid in candidates
    return candidates[pid]


async def delivered(database: Any, group: str) -> set[str]:
    cursor = database[CHECKPOINTS].find({"group": group, "kind": "unit"}, {"delivered": 1})
    return {slice_id async for document in cursor for slice_id in document.get("delivered") or []}


async def delivered_all(database: Any, group: str, slices: dict[str, tuple[str, int]]) -> bool:
    return set(slices) <= await delivered(database, group)


async def stored_slices(database: Any) -> dict[str, tuple[str, int]]:
    """slice id -> (unit id, start index), for every slice stored."""
    found: dict[str, tuple[str, int]] = {}
    async for unit in database[UNITS].find({}, {"slices": 1}):
        for piece in unit.get("slices") or []:
            assert piece["id"] not in found, f"slice id {piece['id']} in two units"
            found[piece["id"]] = (unit["_id"], piece["start_index"])
    return found


async def check_storage(database: Any, workdir: Path) -> int:
    """Every journaled message stored exactly once per core (units + window), in each writer's order."""
    expected: dict[str, list[str]] = defaultdict(list)
    turns = 0
    for number in range(WRITERS):
        journaled = [int(t) for t in (workdir / f"w{number}.journal").read_text().split()]
        assert journaled == sorted(set(journaled)), f"writer {number} recorded a turn twice"
        turns += len(journaled)
        for turn in journaled:
            core_id = CORES[turn % len(CORES)]
            expected[core_id] += [f"w{number} t{turn} user", f"w{number} t{turn} assistant"]
    units, cores = MemoryUnitRepository(database), MemoryCoreRepository(database)
    for core_id in CORES:
        chain = session_chain(await units.list_units(core_id))
        for unit in chain:
            pieces = unit.complete_slices()
            assert pieces[0].start_index == 0
            assert all(a.end_index == b.start_index for a, b in itertools.pairwise(pieces))
            assert pieces[-1].end_index == len(unit.conversation_messages)
        stored = [m for unit in chain for m in unit.conversation_messages]
        window = await cores.snapshot(core_id)
        everything = [m.content for m in stored + resolve_chat_increment(stored, window)]
        assert len(everything) == len(set(everything)), f"{core_id}: a message stored twice"
        assert sorted(everything) == sorted(expected[core_id]), f"{core_id}: messages lost or foreign"
        for number in range(WRITERS):
            mine = [c for c in everything if c.startswith(f"w{number} ")]
            assert mine == [c for c in expected[core_id] if c.startswith(f"w{number} ")], (
                "writer order broken"
            )
    return turns


def session_chain(units: list[MemoryUnit]) -> list[MemoryUnit]:
    """A core's units in session order: the first, then each continuation of the one before."""
    following = {unit.previous_unit_id: unit for unit in units}
    assert len(following) == len(units), "two units continue the same unit"
    chain = [following[None]]
    while chain[-1].id in following:
        chain.append(following[chain[-1].id])
    assert len(chain) == len(units), "a unit outside the core's chain of sessions"
    return chain


def check_deliveries(
    slices: dict[str, tuple[str, int]], files: dict[str, list[Path]], saved_before_kill: set[str]
) -> int:
    """Each group got every slice, each process in per-unit order; nothing saved was delivered again."""
    total = 0
    for group, paths in files.items():
        received: set[str] = set()
        for index, path in enumerate(paths):
            lines = read_lines(path)
            total += len(lines)
            starts: dict[str, list[int]] = defaultdict(list)
            for line in lines:
                assert slices[line["slice"]] == (line["unit"], line["start"]), "a delivery of no stored slice"
                starts[line["unit"]].append(line["start"])
                received.add(line["slice"])
            for unit_id, order in starts.items():
                assert order == sorted(set(order)), (
                    f"group {group}: unit {unit_id} out of order in {path.name}"
                )
            if group == "A" and index == 1:  # the listener that took over
                again = {line["slice"] for line in lines} & saved_before_kill
                assert not again, f"group A delivered {len(again)} checkpointed slice(s) again"
        assert received == set(slices), f"group {group} missed {len(set(slices) - received)} slice(s)"
    return total

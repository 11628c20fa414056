"""Issue 19 across OS processes: two writers and two rollers share one core on a real server (MONGODB_URI),
with kills, a stall and a clear; every message is stored exactly once per session (positions_support).

- the writers (``tests/processes/journaled_writer.py``) take turns on a file lock, so their journal is the
  core's record order; the test clears the window under the same lock;
- the rollers (``tests/processes/roller.py``) roll at random (count, idle, by hand, with a refresh) and log
  every write they send on the machine's monotonic clock. Roller 0 is SIGKILLed inside its summarizer
  (holding the lease), restarted, SIGKILLed again right after an append landed (before its trim), and
  restarted. Then roller 1 stalls before an append for three times its lease's ttl; meanwhile roller 0 is
  paused (SIGSTOP) and the test clears the window (taking roller 1's lease over), holding the writers back
  until roller 1 has gone on;
- at the end the core gets a last turn and a roll, and the oracle checks units, journal and write logs.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import signal
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from partner_repo import (
    MemoryCoreRepository,
    MemoryEraser,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingService,
    close_database,
    connect,
)
from tests.conftest import requires_mongodb
from tests.contract.observed import ObservedDatabase, Wire, Write
from tests.contract.positions_support import CoreHistory, Ticks, storage_problems
from tests.contract.rolling_contract_support import T0, summarize
from tests.contract.test_sharing_across_processes import Processes, eventually

pytestmark = pytest.mark.integration

CORE = "shared"
LEASE_SECONDS = 2.0
STALL = 3 * LEASE_SECONDS
CONFIG = RollingConfig(trigger_limit=4, unit_soft_limit_bytes=1500)
"""What the rollers use (``tests/processes/roller.py`` defaults), for the last roll."""
NEVER_ANSWERED = 2**62
"""The end of a write whose process was killed before the answer came: it may have landed at any time."""


class Run:
    """The processes, files and journal of one run."""

    def __init__(self, uri: str, db_name: str, workdir: Path) -> None:
        self.processes = Processes(uri, db_name, workdir)
        self.workdir = workdir
        self.lock = workdir / "records.lock"
        self.journal = workdir / "journal.jsonl"
        self.stop_writing, self.stop_rolling = workdir / "stop-writing", workdir / "stop-rolling"
        self.wire = Wire(clock=time.monotonic_ns)

    def writer(self, number: int) -> Any:
        args = [
            "--writer",
            str(number),
            "--core",
            CORE,
            "--lock",
            str(self.lock),
            "--journal",
            str(self.journal),
        ]
        return self.processes.start(
            "journaled_writer.py", *args, "--stop", str(self.stop_writing), log=f"w{number}.log"
        )

    def roller(self, number: int, seed: int, *trap: str) -> Any:
        args = [
            "--name",
            f"r{number}-{seed}",
            "--core",
            CORE,
            "--seed",
            str(seed),
            "--stop",
            str(self.stop_rolling),
        ]
        args += [
            "--log",
            str(self.workdir / f"r{number}-{seed}.jsonl"),
            "--lease-seconds",
            str(LEASE_SECONDS),
        ]
        return self.processes.start("roller.py", *args, *trap, log=f"r{number}.log")

    async def locked(self) -> Any:
        """The records lock (no writer records meanwhile), for a clear or the last turn."""
        handle = self.lock.open("a")
        await asyncio.to_thread(fcntl.flock, handle, fcntl.LOCK_EX)
        return handle

    def note(self, entry: dict[str, Any]) -> None:
        with self.journal.open("a") as journal:
            journal.write(json.dumps(entry) + "\n")

    async def clear(self, database: Any, *, hold_until: float) -> None:
        """Clear the window under the records lock (the clear waits for, or takes over, a roller's lease), and
        keep the writers waiting until ``hold_until`` (``time.monotonic()``)."""
        eraser = MemoryEraser(ObservedDatabase(database, self.wire))
        handle = await self.locked()
        try:
            start = self.wire.tick()
            cleared = await eraser.clear_window(CORE)
            self.note({"clear": cleared, "start": start, "end": self.wire.tick()})
            await asyncio.sleep(max(hold_until - time.monotonic(), 0))
        finally:
            handle.close()

    async def last_turn(self, database: Any) -> None:
        """A last turn and a roll, taking over any lease a killed roller left behind."""
        observed, ticks = ObservedDatabase(database, self.wire), Ticks()
        messages = [
            Message(role="user", content="last turn"),
            Message(role="assistant", content="last answer"),
        ]
        handle = await self.locked()
        try:
            await MemoryCoreRepository(observed).record(CORE, messages, at=T0)
            self.note({"record": "last turn"})
            self.note({"record": "last answer"})
        finally:
            handle.close()
        service = RollingService(observed, summarize, CONFIG, monotonic=ticks)
        for _ in range(3):
            if await service.roll(CORE, now=T0) is not None:
                return
            ticks.now += 2 * LEASE_SECONDS
        raise AssertionError("the last roll stored nothing")

    def history(self) -> CoreHistory:
        """The core's record order and clears, as the journal (written under the records lock) has them."""
        history = CoreHistory(CORE)
        for line in self.journal.read_text().splitlines():
            entry = json.loads(line)
            if "record" in entry:
                history.recorded.append(entry["record"])
                continue
            history.cleared(entry["clear"], self.wire.writes, entry["start"], entry["end"])
        return history

    def writes(self) -> list[Write]:
        """Every write of every roller (a write whose answer never came counts as landed, at any time) and of
        this process."""
        sent: dict[tuple[str, int], Write] = {}
        for path in self.workdir.glob("r*-*.jsonl"):
            for line in path.read_text().splitlines():
                entry = json.loads(line)
                process, event = entry.pop("process"), entry.pop("event")
                write = Write(**{**entry, "contents": tuple(entry["contents"])})
                answered = event == "landed"
                sent[process, write.start] = (
                    write if answered else replace(write, end=NEVER_ANSWERED, applied=True)
                )
        return [*sent.values(), *self.wire.writes]


async def test_writers_and_rollers_in_processes_with_kills_and_a_clear_store_each_message_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = requires_mongodb()
    db_name = f"partner_repo_positions_{uuid.uuid4().hex[:10]}"
    database = await connect(uri, db_name)
    await MemoryCoreRepository(database).get_or_create(CORE)
    run = Run(uri, db_name, tmp_path)
    try:
        await play(run, database)
        history = run.history()
        units = await MemoryUnitRepository(database).list_units(CORE)
        problems = storage_problems(history, units, run.writes())
    finally:
        run.processes.close()
        await database.client.drop_database(db_name)
        await close_database(database)
    summary = (
        f"{len(history.recorded)} messages, {len(units)} units, {run.processes.kills} kills, "
        f"{sum(len(c.positions) for c in history.clears)} messages cleared"
    )
    with capsys.disabled():
        print(f"\npositions across processes: {summary}")
    assert not problems, summary + "\n" + "\n".join(problems[:60])


async def play(run: Run, database: Any) -> None:
    writers = [run.writer(n) for n in range(2)]
    marker = {name: run.workdir / f"{name}.marker" for name in ("in-summary", "after-append", "stall")}
    stall_now = run.workdir / "stall-now"
    roller_0 = run.roller(0, 1, "--marker", str(marker["in-summary"]), "--hang-in-summary", "3")
    run.roller(
        1, 2, "--marker", str(marker["stall"]), "--stall-when", str(stall_now), "--stall-seconds", str(STALL)
    )

    await eventually(marker["in-summary"].exists, "roller 0 to hang in its summarizer")
    run.processes.kill(roller_0)  # holding the lease, before its append
    roller_0 = run.roller(0, 3, "--marker", str(marker["after-append"]), "--hang-after-append", "3")
    await eventually(marker["after-append"].exists, "roller 0 to hang after an append")
    run.processes.kill(roller_0)  # holding the lease, its append stored, its window untrimmed
    roller_0 = run.roller(0, 4)

    stall_now.touch()
    await eventually(marker["stall"].exists, "roller 1 to stall before an append")
    roller_0.send_signal(signal.SIGSTOP)  # paused: roller 1's lease is left for the clear to take over
    # the writers wait until roller 1 went on: with nothing new to roll, no other append moves the unit first
    await run.clear(database, hold_until=time.monotonic() + STALL + 1)
    roller_0.send_signal(signal.SIGCONT)

    await asyncio.sleep(2)  # more turns and rolls
    run.stop_writing.touch()
    await eventually(lambda: all(w.poll() is not None for w in writers), "the writers to stop")
    assert [w.returncode for w in writers] == [0, 0], "a writer failed: see its log in the work dir"
    run.stop_rolling.touch()
    await eventually(lambda: all(p.poll() is not None for p in run.processes.running), "the rollers to stop")
    await run.last_turn(database)

"""A roller process for the positions test: rolls one shared core at random until a stop file appears.

Run as ``python tests/processes/roller.py --uri ... --name r0 --core shared --log r0.jsonl ...``. Each step is
a count roll, an idle roll (a new session), a roll, or a roll with a session refresh (the writers record at
one fixed time; an idle roll passes a ``now`` hours later). Every write it sends is logged to ``--log`` as a
JSON line before it is sent and again once answered, on the machine's monotonic clock (one clock for every
process), so the test can place it against a clear made by another process, even if this one is killed.

For the test to kill or stall it at a known point (each writes ``--marker`` first):
``--hang-in-summary N``: the Nth summary hangs (killed holding the lease, before its append);
``--hang-after-append N``: once its Nth append has landed it hangs (killed before its trim);
``--stall-when PATH --stall-seconds S``: its first append once PATH exists waits S seconds before it is sent
(past its lease's ttl: a clear takes the lease over meanwhile), then goes on.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import time
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pymongo.errors import ConnectionFailure

from partner_repo import (
    ConflictError,
    ConnectionFailed,
    Message,
    RollingConfig,
    RollingService,
    close_database,
    connect,
)
from tests.contract.observed import UNITS, ObservedDatabase, Wire, Write

T0 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
IDLE = timedelta(hours=1)


class JournaledWire(Wire):
    """Logs every write of this process to a file, once as it is sent and once as it is answered."""

    def __init__(self, path: Path, process: str) -> None:
        super().__init__(clock=time.monotonic_ns)
        self._file = path.open("a")
        self._process = process

    def sending(self, write: Write) -> None:
        self._log("sending", write)

    def landed(self, write: Write) -> None:
        super().landed(write)
        self._log("landed", write)

    def _log(self, event: str, write: Write) -> None:
        self._file.write(json.dumps({"event": event, "process": self._process, **asdict(write)}, default=str))
        self._file.write("\n")
        self._file.flush()


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uri", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--core", required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--stop", type=Path, required=True, help="stop once this file exists")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trigger-limit", type=int, default=4)
    parser.add_argument("--retain-divisor", type=int, default=6)
    parser.add_argument("--soft-limit", type=int, default=1500)
    parser.add_argument("--lease-seconds", type=float, default=2.0)
    parser.add_argument("--marker", type=Path)
    parser.add_argument("--hang-in-summary", type=int, default=0)
    parser.add_argument("--hang-after-append", type=int, default=0)
    parser.add_argument("--stall-when", type=Path)
    parser.add_argument("--stall-seconds", type=float, default=0.0)
    return parser.parse_args()


async def main(args: argparse.Namespace) -> None:
    database = await connect(args.uri, args.db, create_indexes=False)
    observed = ObservedDatabase(database, JournaledWire(args.log, args.name))
    summaries = appends = 0
    stalled = False

    async def summarize(messages: list[Message]) -> str:
        nonlocal summaries
        summaries += 1
        if summaries == args.hang_in_summary:
            args.marker.write_text("inside the summarizer")
            await asyncio.sleep(3600)  # killed here, holding the lease
        return f"{len(messages)} messages from {messages[0].content}"

    async def before(write: Write) -> None:
        nonlocal appends, stalled
        if write.collection == UNITS and write.contents:
            appends += 1
            if not stalled and args.stall_when is not None and args.stall_when.exists():
                stalled = True
                args.marker.write_text("stalled before an append")
                await asyncio.sleep(args.stall_seconds)

    async def after(write: Write) -> None:
        hang = args.hang_after_append and appends >= args.hang_after_append
        if hang and write.collection == UNITS and write.contents and write.applied:
            args.marker.write_text("after an append")
            await asyncio.sleep(3600)  # killed here: the append landed, the trim never will

    observed.before, observed.after = before, after
    config = RollingConfig(
        trigger_limit=args.trigger_limit,
        retain_divisor=args.retain_divisor,
        idle_after=IDLE,
        unit_soft_limit_bytes=args.soft_limit,
        lease_duration=timedelta(seconds=args.lease_seconds),
    )
    service, rng = RollingService(observed, summarize, config), random.Random(args.seed)
    steps: dict[str, Any] = {
        "count": lambda: service.maybe_roll(args.core, now=T0),
        "idle": lambda: service.maybe_roll(args.core, now=T0 + 3 * IDLE),
        "roll": lambda: service.roll(args.core, now=T0),
        "refresh": lambda: service.roll(args.core, refresh_session=True, now=T0 + 3 * IDLE),
    }
    while not args.stop.exists():
        step = rng.choices(list(steps), weights=(8, 2, 2, 1))[0]
        with contextlib.suppress(ConnectionFailure, ConnectionFailed, ConflictError):  # lost: the next step
            await steps[step]()
        await asyncio.sleep(rng.uniform(0, 0.02))
    await close_database(database)


if __name__ == "__main__":
    asyncio.run(main(parse()))

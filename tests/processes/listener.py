"""A listener process for the sharing contract: delivers every roll to a consumer that logs what it receives.

Run as ``python tests/processes/listener.py --uri ... --group A --out A1.jsonl``. The consumer appends one
JSON line per delivery (slice, unit, interval, this process's pid) the moment it receives it, then takes
``--delay`` seconds (so a kill can land in the middle of a delivery). ``--ready`` is written once the
listener has started (active or standing by). SIGTERM stops it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
from pathlib import Path

from partner_repo import AfterRollingRegistry, RollingListener, RollingResult, close_database, connect


class FileConsumer:
    name = "file-log"

    def __init__(self, out: Path, delay: float) -> None:
        self._out = out.open("a")
        self._delay = delay

    async def consume(self, result: RollingResult) -> None:
        piece = result.memory_slice
        line = {
            "slice": result.slice_id,
            "unit": result.memory_unit.id,
            "core": result.memory_unit.core_id,
            "start": piece.start_index,
            "end": piece.end_index,
            "messages": [m.content for m in result.increment_messages],
            "pid": os.getpid(),
        }
        self._out.write(json.dumps(line) + "\n")
        self._out.flush()
        await asyncio.sleep(self._delay)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uri", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ready", type=Path, required=True)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--lease-ttl", type=float, default=2.0)
    return parser.parse_args()


async def main(args: argparse.Namespace) -> None:
    database = await connect(args.uri, args.db, create_indexes=False)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    registry = AfterRollingRegistry([FileConsumer(args.out, args.delay)])
    listener = RollingListener(
        database, registry, group=args.group, poll_interval=0.2, lease_ttl=args.lease_ttl, drain_timeout=10
    )
    await listener.start()
    args.ready.write_text(listener.owner)
    await stop.wait()
    await listener.stop()
    await close_database(database)


if __name__ == "__main__":
    asyncio.run(main(parse()))

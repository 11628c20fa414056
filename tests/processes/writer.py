"""A backend service process for the sharing contract: records turns into shared cores, rolls after each.

Run as ``python tests/processes/writer.py --uri ... --writer 0 ...``. Every turn is two messages naming the
writer and the turn (``w0 t12 user``), recorded into core ``turn % cores``; the turn number is appended to the
journal (flushed and synced) as soon as ``record`` returns, so a restarted writer knows where it stopped.
With ``--stall-at-roll N`` the Nth summary of this process writes ``--stall-marker`` and then hangs, so the
test can SIGKILL the process in the middle of a roll, holding the core's lease.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from datetime import timedelta
from pathlib import Path

from partner_repo import MemoryCoreRepository, Message, RollingConfig, RollingService, close_database, connect


def turn_messages(writer: int, turn: int) -> list[Message]:
    return [
        Message(role="user", content=f"w{writer} t{turn} user"),
        Message(role="assistant", content=f"w{writer} t{turn} assistant"),
    ]


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uri", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--writer", type=int, required=True)
    parser.add_argument("--cores", required=True, help="comma-separated core ids")
    parser.add_argument("--turns", type=int, required=True)
    parser.add_argument("--journal", type=Path, required=True)
    parser.add_argument("--trigger-limit", type=int, default=6)
    parser.add_argument("--lease-seconds", type=float, default=3.0)
    parser.add_argument("--soft-limit", type=int, default=8 * 1024 * 1024)
    parser.add_argument("--pause", type=float, default=0.01, help="seconds between turns")
    parser.add_argument("--stall-at-roll", type=int, default=0)
    parser.add_argument("--stall-marker", type=Path)
    return parser.parse_args()


async def main(args: argparse.Namespace) -> None:
    database = await connect(args.uri, args.db, create_indexes=False)
    core_ids = args.cores.split(",")
    summaries = 0

    async def summarize(messages: list[Message]) -> str:
        nonlocal summaries
        summaries += 1
        if summaries == args.stall_at_roll:
            args.stall_marker.write_text(str(os.getpid()))
            await asyncio.sleep(3600)  # killed here, holding the lease
        return f"{len(messages)} messages, from {messages[0].content!r}"

    config = RollingConfig(
        trigger_limit=args.trigger_limit,
        retain_divisor=3,
        idle_after=timedelta(days=1),
        lease_duration=timedelta(seconds=args.lease_seconds),
        unit_soft_limit_bytes=args.soft_limit,
    )
    cores = MemoryCoreRepository(database)
    rolling = RollingService(database, summarize, config)
    done = {int(line) for line in args.journal.read_text().split()} if args.journal.exists() else set()
    start = max(done) + 1 if done else 0
    with args.journal.open("a") as journal:
        for turn in range(start, args.turns):
            core_id = core_ids[turn % len(core_ids)]
            await cores.record(core_id, turn_messages(args.writer, turn))
            journal.write(f"{turn}\n")
            journal.flush()
            os.fsync(journal.fileno())
            for candidate in core_ids:  # the rolling path after each turn (and a look at the others' leases)
                await rolling.maybe_roll(candidate)
            await asyncio.sleep(args.pause)
    await close_database(database)


if __name__ == "__main__":
    asyncio.run(main(parse()))

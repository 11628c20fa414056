"""A writer process for the positions test: records turns into one shared core until a stop file appears.

Run as ``python tests/processes/journaled_writer.py --uri ... --writer 0 --core shared ...``. Records from all
writers take turns: each holds an exclusive lock on ``--lock`` while it is sent and its contents are appended
to ``--journal``, so the journal is the core's record order (the test clears the window under the same lock).
Every message's content is unique (``w0 t12 1``). All turns are recorded at one fixed time: the rollers decide
when the conversation is idle by the ``now`` they pass.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import random
from datetime import UTC, datetime
from pathlib import Path

from partner_repo import MemoryCoreRepository, Message, close_database, connect

T0 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uri", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--writer", type=int, required=True)
    parser.add_argument("--core", required=True)
    parser.add_argument("--lock", type=Path, required=True)
    parser.add_argument("--journal", type=Path, required=True)
    parser.add_argument("--stop", type=Path, required=True, help="stop once this file exists")
    parser.add_argument("--pause", type=float, default=0.08, help="at most this many seconds between turns")
    parser.add_argument("--max-turns", type=int, default=2000)
    return parser.parse_args()


async def main(args: argparse.Namespace) -> None:
    database = await connect(args.uri, args.db, create_indexes=False)
    cores, rng = MemoryCoreRepository(database), random.Random(args.writer)
    with args.lock.open("a") as lock:
        for turn in range(args.max_turns):
            if args.stop.exists():
                break
            messages = [
                Message(role="user" if n % 2 == 0 else "assistant", content=f"w{args.writer} t{turn} {n}")
                for n in range(rng.choice((1, 2, 2, 3)))
            ]
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                await cores.record(args.core, messages, at=T0)
                with args.journal.open("a") as journal:
                    journal.writelines(json.dumps({"record": m.content}) + "\n" for m in messages)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
            await asyncio.sleep(rng.uniform(0, args.pause))
    await close_database(database)


if __name__ == "__main__":
    asyncio.run(main(parse()))

"""``partner-repo demo``: the main job, a short tour of the library on the embedded in-memory backend."""

from __future__ import annotations

import click

from partner_repo.cli.app import run_async
from partner_repo.cores import MemoryCoreRepository
from partner_repo.database import connect
from partner_repo.models import Message
from partner_repo.units import MemoryUnitRepository


@click.command()
def demo() -> None:
    """Exercise the repositories on the in-memory backend and print what they stored."""

    async def work() -> None:
        database = await connect(None)
        cores = MemoryCoreRepository(database)
        units = MemoryUnitRepository(database)
        session = await cores.session_id("demo")
        turns = [
            [
                Message(role="user", content="Hi, I'm planning a trip to Kyoto."),
                Message(role="assistant", content="Lovely! Spring or autumn?"),
            ],
            [
                Message(role="user", content="Autumn, for the maple leaves."),
                Message(role="assistant", content="Then book early: November is busy."),
            ],
        ]
        for number, turn in enumerate(turns, 1):
            piece = await units.append(session, turn, f"turn {number}: {turn[0].content}", core_id="demo")
            click.echo(f"slice {piece.id} [{piece.start_index}, {piece.end_index}): {piece.summary}")
        unit = await units.get(session)
        assert unit is not None
        click.echo(f"unit {unit.id}: {len(unit.conversation_messages)} messages, {len(unit.slices)} slices")

    run_async(work)

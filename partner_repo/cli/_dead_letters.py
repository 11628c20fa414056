"""``partner-repo dead-letters list|replay``: inspect and re-deliver deliveries that consumers gave up on."""

from __future__ import annotations

import click

from partner_repo.cli._consumers import (
    consumer_option,
    consumer_registry,
    recall_embedder,
    recall_option,
    with_recall,
)
from partner_repo.cli._output import console, echo_json, json_option, short, when
from partner_repo.cli._plugins import embedder_option
from partner_repo.cli._rows import Column, Rows
from partner_repo.cli._runtime import EXIT_NOT_FOUND, connection, run_async
from partner_repo.listener.delivery import replay_dead_letters
from partner_repo.listener.state import DeadLetter, DeadLetterRepository


@click.group("dead-letters")
def dead_letters() -> None:
    """Deliveries a consumer failed every attempt at (kept in rolling_dead_letters)."""


@dead_letters.command("list")
@click.option("--group", default=None, help="Only this listener group's letters [default: every group].")
@click.option("--consumer", default=None, help="Only this consumer's letters (its name).")
@json_option
@click.pass_context
def list_letters(ctx: click.Context, group: str | None, consumer: str | None, as_json: bool) -> None:
    """List dead letters, oldest failure first."""
    target = connection(ctx, "read")

    async def work() -> list[DeadLetter]:
        return await DeadLetterRepository(await target.open()).list(group=group, consumer=consumer)

    letters = run_async(work)
    if as_json:
        echo_json(list(letters))
        return
    if not letters:
        click.echo("no dead letters")
        return
    console().print(_table(letters))


@dead_letters.command("replay")
@consumer_option("A consumer to replay to (as for `listen`); letters of consumers not given are left alone.")
@recall_option
@embedder_option("The embedder of --recall's index (the one the cores' vectors are of).")
@click.option("--group", default="default", show_default=True, help="Listener group whose letters to replay.")
@click.option("--only", "only", default=None, metavar="NAME", help="Replay only this consumer's letters.")
@click.pass_context
def replay(
    ctx: click.Context,
    consumer_paths: tuple[str, ...],
    recall: bool,
    embedder_path: str | None,
    group: str,
    only: str | None,
) -> None:
    """Deliver dead letters again: delivered letters are removed, failing ones updated and kept."""
    target = connection(ctx, "write")
    registry = consumer_registry(consumer_paths, recall=recall)
    embedder = recall_embedder(recall, embedder_path)

    async def work() -> tuple[int, int, int, int]:
        database = await target.open()
        consumers = with_recall(registry, database, recall, embedder)
        report = await replay_dead_letters(database, consumers, group=group, consumer=only)
        return len(report.delivered), len(report.failed), len(report.no_consumer), len(report.slice_gone)

    delivered, failed, no_consumer, gone = run_async(work)
    click.echo(
        f"{delivered} delivered, {failed} failed again, {no_consumer} left (consumer not given), "
        f"{gone} left (slice gone)"
    )
    if failed:
        raise SystemExit(EXIT_NOT_FOUND)


def _what(letter: DeadLetter) -> str:
    if letter.erasure_seq is not None:
        return f"erasure {letter.erasure_seq}"
    return letter.slice_id if not letter.revision else f"{letter.slice_id} (revision {letter.revision})"


COLUMNS = [
    Column("failed (UTC)"),
    Column("group", "id"),
    Column("consumer", "id"),
    Column("slice", "id"),
    Column("unit", "id"),
    Column("attempts", "fixed", "right"),
    Column("error"),
]
"""The ids are never broken over lines (an id split in two cannot be copied); the error wraps instead."""

ID_COLUMNS = {column.name for column in COLUMNS if column.kind == "id"}
"""The id columns by name (0.4's name for them)."""


def _table(letters: list[DeadLetter]) -> Rows:
    rows = [
        [
            when(letter.failed_at),
            letter.group,
            letter.consumer,
            _what(letter),
            letter.unit_id,
            str(letter.attempts),
            short(letter.error),
        ]
        for letter in letters
    ]
    return Rows(COLUMNS, rows)

"""The ``--consumer MODULE:ATTR`` option that ``listen`` and ``dead-letters replay`` load consumers from (like
``roll-idle --summarizer``, it finds modules in the working directory too), and their ``--recall``, which adds
the recall index's consumer (:class:`~partner_repo.recall.RecallIndexer`, ``recall-index``): it needs the
database, so it cannot be named by an import path; ``--embedder MODULE:NAME`` gives it an embedder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from partner_repo.cli._plugins import importable_from_working_directory, load_embedder
from partner_repo.listener.delivery import AfterRollingRegistry, registry_from_paths
from partner_repo.recall import NAME as RECALL_INDEX
from partner_repo.recall import Embedder, RecallIndexer

F = TypeVar("F", bound=Callable[..., object])


def consumer_option(help: str) -> Callable[[F], F]:
    """A repeatable ``--consumer`` passed to the command as ``consumer_paths`` (one of it or ``--recall`` is
    required: :func:`consumer_registry`)."""
    return click.option("--consumer", "consumer_paths", multiple=True, metavar="MODULE:ATTR", help=help)


recall_option = click.option(
    "--recall",
    is_flag=True,
    help=f"Deliver to the recall index too: RecallIndexer (consumer {RECALL_INDEX}), offline defaults.",
)


def consumer_registry(consumer_paths: tuple[str, ...], *, recall: bool = False) -> AfterRollingRegistry:
    """The consumers at ``consumer_paths``, in order; one that cannot be loaded is a usage error, and so is
    neither a path nor ``recall``."""
    if not consumer_paths and not recall:
        raise click.UsageError("give at least one --consumer MODULE:ATTR, or --recall")
    importable_from_working_directory()
    try:
        return registry_from_paths(list(consumer_paths))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--consumer") from None


def recall_embedder(recall: bool, embedder_path: str | None) -> Embedder | None:
    """The embedder ``--embedder`` gives ``--recall``'s indexer (None without one); ``--embedder`` without
    ``--recall`` is a usage error: no other consumer takes it."""
    if embedder_path is None:
        return None
    if not recall:
        raise click.UsageError("--embedder is the recall index's: give --recall too")
    return load_embedder(embedder_path)


def with_recall(
    registry: AfterRollingRegistry, database: Any, recall: bool, embedder: Embedder | None = None
) -> AfterRollingRegistry:
    """``registry``, with a :class:`~partner_repo.recall.RecallIndexer` of ``database`` (and ``embedder``)
    added last when ``recall`` (a consumer of the same name given by ``--consumer`` is refused: one line,
    exit 2)."""
    if recall:
        registry.register(RecallIndexer(database, embedder=embedder))
    return registry

"""The ``--consumer MODULE:ATTR`` option that ``listen`` and ``dead-letters replay`` load consumers from (like
``roll-idle --summarizer``, it finds modules in the working directory too), and their ``--recall``, which adds
the recall index's consumer (:class:`~partner_repo.recall.RecallIndexer`, ``recall-index``): it needs the
database, so it cannot be named by an import path."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from partner_repo.listener.delivery import AfterRollingRegistry, registry_from_paths
from partner_repo.recall import NAME as RECALL_INDEX
from partner_repo.recall import RecallIndexer

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


def importable_from_working_directory() -> None:
    """Let ``MODULE:ATTR`` name a module of the working directory, as ``python -m`` and uvicorn do: the
    ``partner-repo`` console script's own ``sys.path`` does not hold it."""
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.insert(0, here)


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


def with_recall(registry: AfterRollingRegistry, database: Any, recall: bool) -> AfterRollingRegistry:
    """``registry``, with a :class:`~partner_repo.recall.RecallIndexer` of ``database`` added last when
    ``recall`` (a consumer of the same name given by ``--consumer`` is refused: one line, exit 2)."""
    if recall:
        registry.register(RecallIndexer(database))
    return registry

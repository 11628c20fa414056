"""The ``--consumer MODULE:ATTR`` option that ``listen`` and ``dead-letters replay`` load consumers from; like
``roll-idle --summarizer``, it finds modules in the working directory too."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TypeVar

import click

from partner_repo.listener.loading import registry_from_paths
from partner_repo.listener.registry import AfterRollingRegistry

F = TypeVar("F", bound=Callable[..., object])


def consumer_option(help: str) -> Callable[[F], F]:
    """A required, repeatable ``--consumer`` passed to the command as ``consumer_paths``."""
    return click.option(
        "--consumer", "consumer_paths", multiple=True, required=True, metavar="MODULE:ATTR", help=help
    )


def importable_from_working_directory() -> None:
    """Let ``MODULE:ATTR`` name a module of the working directory, as ``python -m`` and uvicorn do: the
    ``partner-repo`` console script's own ``sys.path`` does not hold it."""
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.insert(0, here)


def consumer_registry(consumer_paths: tuple[str, ...]) -> AfterRollingRegistry:
    """The consumers at ``consumer_paths``, in order; one that cannot be loaded is a usage error."""
    importable_from_working_directory()
    try:
        return registry_from_paths(list(consumer_paths))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--consumer") from None

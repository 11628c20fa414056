"""The ``--consumer MODULE:ATTR`` option that ``listen`` and ``dead-letters replay`` load consumers from."""

from __future__ import annotations

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


def consumer_registry(consumer_paths: tuple[str, ...]) -> AfterRollingRegistry:
    """The consumers at ``consumer_paths``, in order; one that cannot be loaded is a usage error."""
    try:
        return registry_from_paths(list(consumer_paths))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--consumer") from None

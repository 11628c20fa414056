"""Loading consumers from import paths (``package.module:attr``), as the command line names them."""

from __future__ import annotations

import inspect

from partner_repo.errors import InvalidInput
from partner_repo.listener.delivery._registry import AfterRolling, AfterRollingRegistry
from partner_repo.plugins import import_object


def load_consumer(path: str) -> AfterRolling:
    """The consumer at ``package.module:attr``: an AfterRolling object, or a class built with no arguments."""
    target = import_object(path, what="consumer")
    if inspect.isclass(target):
        try:
            target = target()
        except TypeError as exc:
            raise InvalidInput(
                f"consumer {path!r}: the class cannot be built without arguments: {exc}"
            ) from exc
    if not isinstance(target, AfterRolling):
        raise InvalidInput(
            f"consumer {path!r} is not an AfterRolling (needs `name` and `consume(result)`, async or plain)"
        )
    return target


def registry_from_paths(paths: list[str]) -> AfterRollingRegistry:
    """A registry holding the consumers at ``paths``, in that order."""
    registry = AfterRollingRegistry()
    for path in paths:
        registry.register(load_consumer(path))
    return registry


__all__ = ["load_consumer"]

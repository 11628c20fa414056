"""Loading consumers from import paths (``package.module:attr``), as the command line names them."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from partner_repo.errors import InvalidInput
from partner_repo.listener.registry import AfterRolling, AfterRollingRegistry


def load_consumer(path: str) -> AfterRolling:
    """The consumer at ``package.module:attr``: an AfterRolling object, or a class built with no arguments."""
    module_name, colon, attribute = path.partition(":")
    if not colon or not module_name or not attribute:
        raise InvalidInput(f"consumer {path!r} must look like package.module:attr")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidInput(f"consumer {path!r}: cannot import {module_name!r}: {exc}") from exc
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise InvalidInput(f"consumer {path!r}: {module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    if inspect.isclass(target):
        try:
            target = target()
        except TypeError as exc:
            raise InvalidInput(
                f"consumer {path!r}: the class cannot be built without arguments: {exc}"
            ) from exc
    if not isinstance(target, AfterRolling):
        raise InvalidInput(
            f"consumer {path!r} is not an AfterRolling (needs `name` and `async consume(result)`)"
        )
    return target


def registry_from_paths(paths: list[str]) -> AfterRollingRegistry:
    """A registry holding the consumers at ``paths``, in that order."""
    registry = AfterRollingRegistry()
    for path in paths:
        registry.register(load_consumer(path))
    return registry


__all__ = ["load_consumer"]

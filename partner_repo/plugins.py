"""Loading an object by its import path: a plug-in the command line names (``package.module:attr``), and
the names a package front loads on first use (PEP 562), so importing the front imports no extra."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from partner_repo.errors import InvalidInput


def import_object(path: str, *, what: str) -> Any:
    """The object at ``package.module:attr`` (``attr`` may be dotted); ``what`` names it in errors."""
    module_name, colon, attribute = path.partition(":")
    if not colon or not module_name or not attribute:
        raise InvalidInput(f"{what} {path!r} must look like package.module:attr")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidInput(f"{what} {path!r}: cannot import {module_name!r}: {exc}") from exc
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise InvalidInput(f"{what} {path!r}: {module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    return target


def on_first_use(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A package front's ``__getattr__`` (PEP 562): each name of ``homes`` is loaded from its module when
    first asked for (the module that brings an extra, or much of the library, with it)."""

    def __getattr__(name: str) -> Any:
        module = homes.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__

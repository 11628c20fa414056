"""Loading an object from an import path (``package.module:attr``), as the command line names plug-ins."""

from __future__ import annotations

import importlib
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

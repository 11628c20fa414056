"""Plug-ins the command line loads by import path (``MODULE:NAME``): from the working directory too, as
``python -m`` and uvicorn find them. ``--embedder`` (recall's vector channel: ``recall``, ``recall reindex``,
``listen --recall``, ``dead-letters replay --recall``, ``mcp``) is read here; the recall package itself is
imported only when a command runs, so ``partner-repo mcp``'s start imports nothing more for it."""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from partner_repo.errors import InvalidInput
from partner_repo.plugins import import_object

if TYPE_CHECKING:
    from partner_repo.recall import Embedder

F = TypeVar("F", bound=Callable[..., object])


def importable_from_working_directory() -> None:
    """Let ``MODULE:ATTR`` name a module of the working directory, as ``python -m`` and uvicorn do: the
    ``partner-repo`` console script's own ``sys.path`` does not hold it."""
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.insert(0, here)


def embedder_option(help: str, *, required: bool = False) -> Callable[[F], F]:
    """``--embedder MODULE:NAME`` (passed as ``embedder_path``), as :func:`load_embedder` reads it."""
    # no ``default=None`` beside ``required``: click 8.3+ takes an explicit None for a given value
    return click.option("--embedder", "embedder_path", required=required, metavar="MODULE:NAME", help=help)


def load_callable(path: str, *, what: str, option: str) -> Any:
    """The callable at ``path`` (a module of the working directory too), which ``option`` named; a usage
    error when it cannot be loaded or is not callable."""
    importable_from_working_directory()
    try:
        found = import_object(path, what=what)
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None
    if not callable(found):
        raise click.BadParameter(f"{path!r} is not callable", param_hint=option)
    return found


def load_embedder(path: str) -> Embedder:
    """The embedder ``--embedder MODULE:NAME`` names (a module of the working directory too): a callable
    ``(texts) -> vectors``, or a class or function of no arguments that makes one (called once: a model is
    loaded when the command starts, not at import). A usage error when it cannot be loaded."""
    found = load_callable(path, what="embedder", option="--embedder")
    if _makes_one(found):
        try:
            found = found()
        except Exception as exc:
            message = f"{path!r} could not make an embedder: {type(exc).__name__}: {exc}"
            raise click.BadParameter(message, param_hint="--embedder") from None
        if not callable(found):
            message = f"{path!r} made a {type(found).__name__}, not a callable"
            raise click.BadParameter(message, param_hint="--embedder")
    embedder: Embedder = found
    return embedder


def _makes_one(found: Any) -> bool:
    """Whether ``found`` is a class, or a function every parameter of which has a default: it makes the
    embedder (an embedder takes the texts)."""
    if inspect.isclass(found):
        return True
    try:
        parameters = inspect.signature(found).parameters.values()
    except (TypeError, ValueError):
        return False
    needed = [
        p for p in parameters if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    return not needed and inspect.isfunction(found)

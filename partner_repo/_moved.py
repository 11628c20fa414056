"""Where 0.4's modules went: each import path of 0.4 still works, as an alias of the module holding it now.

0.5 put the driver boundary in :mod:`partner_repo.mongo` and made every module that is not public API private
(``units/append.py`` is ``units/_append.py``, behind ``partner_repo.units``). Code written against 0.4 may
import a name from the module it lived in (``from partner_repo.database import connect``,
``from partner_repo.rolling.result import RollingResult``); :data:`MOVED` keeps every such path working. An
old path is the very module that now holds its names (so ``partner_repo.database is
partner_repo.mongo._database``); a module 0.4 had that is now two (``listener.dead_letters``: the letters are
the listener's state, their replay is delivery) is a module holding the public names of both.

New code imports from the package front modules (``partner_repo``, ``partner_repo.listener``, ...);
``tests/unit/package/test_layout.py`` checks that every public name of 0.4 is still found where it was.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Sequence

MOVED: dict[str, tuple[str, ...]] = {
    "partner_repo.admin.check": ("partner_repo.admin._check",),
    "partner_repo.admin.consistency": ("partner_repo.admin._consistency",),
    "partner_repo.admin.cursor": ("partner_repo.admin._cursor",),
    "partner_repo.admin.filters": ("partner_repo.admin._filters",),
    "partner_repo.admin.inspection": ("partner_repo.admin._inspection",),
    "partner_repo.admin.queries": ("partner_repo.admin._queries",),
    "partner_repo.admin.slice_ids": ("partner_repo.admin._slice_ids",),
    "partner_repo.admin.views": ("partner_repo.admin._views",),
    "partner_repo.admin.windows": ("partner_repo.admin._windows",),
    "partner_repo.cli.app": ("partner_repo.cli._app",),
    "partner_repo.cli.consumers": ("partner_repo.cli._consumers",),
    "partner_repo.cli.dead_letters": ("partner_repo.cli._dead_letters",),
    "partner_repo.cli.demo": ("partner_repo.cli._demo",),
    "partner_repo.cli.demo_script": ("partner_repo.cli._demo_script",),
    "partner_repo.cli.erasure": ("partner_repo.cli._erasure",),
    "partner_repo.cli.listen": ("partner_repo.cli._listen",),
    "partner_repo.cli.listener_status": ("partner_repo.cli._listener_status",),
    "partner_repo.cli.logs": ("partner_repo.cli._logs",),
    "partner_repo.cli.maintenance": ("partner_repo.cli._maintenance",),
    "partner_repo.cli.migrate": ("partner_repo.cli._migrate",),
    "partner_repo.cli.output": ("partner_repo.cli._output",),
    "partner_repo.cli.progress": ("partner_repo.cli._progress",),
    "partner_repo.cli.recall": ("partner_repo.cli._recall",),
    "partner_repo.cli.resummarize": ("partner_repo.cli._resummarize",),
    "partner_repo.cli.roll_idle": ("partner_repo.cli._roll_idle",),
    "partner_repo.cli.runtime": ("partner_repo.cli._runtime",),
    "partner_repo.cli.shared": ("partner_repo.cli._shared",),
    "partner_repo.cli.signals": ("partner_repo.cli._signals",),
    "partner_repo.cli.slices": ("partner_repo.cli._slices",),
    "partner_repo.connection": ("partner_repo.mongo._connection",),
    "partner_repo.cores.hold": ("partner_repo.cores._hold",),
    "partner_repo.cores.lease": ("partner_repo.cores._lease",),
    "partner_repo.cores.repository": ("partner_repo.cores._repository",),
    "partner_repo.cores.state": ("partner_repo.cores._state",),
    "partner_repo.cores.trim": ("partner_repo.cores._trim",),
    "partner_repo.cores.window": ("partner_repo.cores._window",),
    "partner_repo.database": ("partner_repo.mongo._database",),
    "partner_repo.driver": ("partner_repo.mongo._driver",),
    "partner_repo.embedded": ("partner_repo.mongo._embedded",),
    "partner_repo.erasure.eraser": ("partner_repo.erasure._eraser",),
    "partner_repo.erasure.preview": ("partner_repo.erasure._preview",),
    "partner_repo.erasure.requests": ("partner_repo.erasure._requests",),
    "partner_repo.erasure.tombstones": ("partner_repo.erasure._tombstones",),
    "partner_repo.importing.importer": ("partner_repo.importing._importer",),
    "partner_repo.importing.state_format": ("partner_repo.importing._state_format",),
    "partner_repo.indexes": ("partner_repo.mongo._indexes",),
    "partner_repo.langchain.history": ("partner_repo.langchain._history",),
    "partner_repo.langchain.messages": ("partner_repo.langchain._messages",),
    "partner_repo.listener.attempts": ("partner_repo.listener.delivery._attempts",),
    "partner_repo.listener.change_stream": ("partner_repo.listener.stream._change_stream",),
    "partner_repo.listener.checkpoints": ("partner_repo.listener.state._checkpoints",),
    "partner_repo.listener.commits": ("partner_repo.listener.delivery._commits",),
    "partner_repo.listener.dead_letters": (
        "partner_repo.listener.state._dead_letters",
        "partner_repo.listener.delivery._replay",
    ),
    "partner_repo.listener.erased_progress": ("partner_repo.listener.state._erased_progress",),
    "partner_repo.listener.erasure_log": ("partner_repo.listener.state._erasure_log",),
    "partner_repo.listener.erasures": ("partner_repo.listener.delivery._erasures",),
    "partner_repo.listener.lanes": ("partner_repo.listener.delivery._lanes",),
    "partner_repo.listener.lease": ("partner_repo.listener.state._lease",),
    "partner_repo.listener.listener": ("partner_repo.listener._listener",),
    "partner_repo.listener.loading": ("partner_repo.listener.delivery._loading",),
    "partner_repo.listener.metrics": ("partner_repo.listener.observing._metrics",),
    "partner_repo.listener.observer": ("partner_repo.listener.observing._observer",),
    "partner_repo.listener.options": ("partner_repo.listener._options",),
    "partner_repo.listener.pipeline": ("partner_repo.listener.delivery._pipeline",),
    "partner_repo.listener.polling": ("partner_repo.listener.stream._polling",),
    "partner_repo.listener.progress": ("partner_repo.listener.state._progress",),
    "partner_repo.listener.prometheus": ("partner_repo.listener.observing._prometheus",),
    "partner_repo.listener.registry": ("partner_repo.listener.delivery._registry",),
    "partner_repo.listener.results": ("partner_repo.listener.delivery._results",),
    "partner_repo.listener.retry": ("partner_repo.listener.delivery._retry",),
    "partner_repo.listener.sources": ("partner_repo.listener.stream._sources",),
    "partner_repo.listener.status": ("partner_repo.listener.state._status",),
    "partner_repo.listener.stream_errors": ("partner_repo.listener.stream._stream_errors",),
    "partner_repo.listener.unreadable": ("partner_repo.listener.stream._unreadable",),
    "partner_repo.masking": ("partner_repo.mongo._masking",),
    "partner_repo.migrating.failures": ("partner_repo.migrating._failures",),
    "partner_repo.migrating.runner": ("partner_repo.migrating._runner",),
    "partner_repo.recall.cues": ("partner_repo.recall._cues",),
    "partner_repo.recall.indexer": ("partner_repo.recall._indexer",),
    "partner_repo.recall.scoring": ("partner_repo.recall._scoring",),
    "partner_repo.recall.search": ("partner_repo.recall._search",),
    "partner_repo.recall.service": ("partner_repo.recall._service",),
    "partner_repo.recall.store": ("partner_repo.recall._store",),
    "partner_repo.recall.terms": ("partner_repo.recall._terms",),
    "partner_repo.recall.topics": ("partner_repo.recall._topics",),
    "partner_repo.recall.vectors": ("partner_repo.recall._vectors",),
    "partner_repo.recall.weights": ("partner_repo.recall._weights",),
    "partner_repo.rolling.background": ("partner_repo.rolling._background",),
    "partner_repo.rolling.config": ("partner_repo.rolling._config",),
    "partner_repo.rolling.increment": ("partner_repo.rolling._increment",),
    "partner_repo.rolling.leased_roll": ("partner_repo.rolling._leased_roll",),
    "partner_repo.rolling.plan": ("partner_repo.rolling._plan",),
    "partner_repo.rolling.positions": ("partner_repo.rolling._positions",),
    "partner_repo.rolling.result": ("partner_repo.events",),
    "partner_repo.rolling.resummarize": ("partner_repo.rolling._resummarize",),
    "partner_repo.rolling.service": ("partner_repo.rolling._service",),
    "partner_repo.rolling.summarizer": ("partner_repo.rolling._summarizer",),
    "partner_repo.rolling.summarizing": ("partner_repo.rolling._summarizing",),
    "partner_repo.rolling.triggers": ("partner_repo.rolling._triggers",),
    "partner_repo.storage": ("partner_repo.mongo._storage",),
    "partner_repo.topology": ("partner_repo.mongo._topology",),
    "partner_repo.units.adoption": ("partner_repo.units._adoption",),
    "partner_repo.units.append": ("partner_repo.units._append",),
    "partner_repo.units.claims": ("partner_repo.units._claims",),
    "partner_repo.units.feed": ("partner_repo.units._feed",),
    "partner_repo.units.heads": ("partner_repo.units._heads",),
    "partner_repo.units.increment": ("partner_repo.units._increment",),
    "partner_repo.units.marks": ("partner_repo.units._marks",),
    "partner_repo.units.picking": ("partner_repo.units._picking",),
    "partner_repo.units.queue": ("partner_repo.units._queue",),
    "partner_repo.units.repository": ("partner_repo.units._repository",),
    "partner_repo.units.rules": ("partner_repo.units._rules",),
    "partner_repo.units.summaries": ("partner_repo.units._summaries",),
}
"""0.4's module path -> the module(s) holding its names now."""


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module that holds its names now (or, for a module that became two, as one
    module holding the public names of both)."""

    def __init__(self, targets: Sequence[str]) -> None:
        self._targets = tuple(targets)
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        modules = [importlib.import_module(target) for target in self._targets]
        if len(modules) == 1:
            self._spec = modules[0].__spec__
            return modules[0]
        merged = types.ModuleType(spec.name, modules[0].__doc__)
        for module in modules:
            for name in getattr(module, "__all__", ()):
                setattr(merged, name, getattr(module, name))
        merged.__all__ = [name for module in modules for name in getattr(module, "__all__", ())]  # type: ignore[attr-defined]
        return merged

    def exec_module(self, module: types.ModuleType) -> None:
        if self._spec is not None:  # importing set the alias's spec on the real module: give it its own back
            module.__spec__ = self._spec


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the 0.4 paths of :data:`MOVED` (asked last: no file answers to them any more)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        targets = MOVED.get(fullname)
        return None if targets is None else importlib.util.spec_from_loader(fullname, _Alias(targets))


def install() -> None:
    """Make the 0.4 paths importable (once per interpreter, whatever imports the package again)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedFinder())


__all__ = ["MOVED", "install"]

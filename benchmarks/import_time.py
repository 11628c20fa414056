"""Section 10: what importing partner-repo costs, against importing the driver stack it stands on.

A service pays the import once per process, and a command-line tool (``partner-repo``, the MCP server) pays
it on every start: the package should cost about what its driver stack costs. Each statement runs in a fresh
interpreter with ``-X importtime`` (from the repository root, the statements interleaved, ``import_repeats``
rounds after one unmeasured round that leaves the bytecode caches written). A statement's cost is the sum of
the cumulative microseconds of the top-level lines of its report, leaving out the modules a bare interpreter
imports at startup (``python -c pass``): for ``import beanie, pymongo`` that counts the ``beanie`` and the
``pymongo`` entries, whichever the other imports first; for the everyday API every name loaded on first use
(PEP 562: ``partner_repo.cores``, ...) is a top-level entry of its own. Medians over the rounds.

- ``import partner_repo`` against ``import beanie, pymongo``: target at most 1.3x;
- ``from partner_repo import MemoryCoreRepository, MemoryRecall, RollingListener, RollingService, connect``
  (the everyday API) against the same: reported, no target;
- how many ``partner_repo`` modules each loads.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass

from benchmarks.backends import DRIVER_NAME, ROOT
from benchmarks.common import Row, Scale, SectionResult

DRIVER = "import beanie, pymongo"
PACKAGE = "import partner_repo"
EVERYDAY = (
    "from partner_repo import MemoryCoreRepository, MemoryRecall, RollingListener, RollingService, connect"
)
STATEMENTS = (PACKAGE, EVERYDAY, DRIVER)
TARGET = 1.3
_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)\s*$")


@dataclass(frozen=True)
class Report:
    """One ``-X importtime`` report: each top-level module's cumulative microseconds, and every module."""

    top_level: dict[str, int]
    modules: tuple[str, ...]

    def cost_us(self, startup: set[str]) -> int:
        """The statement's own import time: its top-level entries, those of interpreter startup left out."""
        return sum(us for module, us in self.top_level.items() if module not in startup)

    def package_modules(self) -> int:
        return sum(
            1 for module in self.modules if module == "partner_repo" or module.startswith("partner_repo.")
        )


def parse(stderr: str) -> Report:
    """The lines of an ``-X importtime`` report (nested imports are indented two spaces a level)."""
    top_level: dict[str, int] = {}
    modules: list[str] = []
    for line in stderr.splitlines():
        found = _LINE.match(line)
        if found is None:
            continue
        cumulative, indent, module = int(found[2]), found[3], found[4]
        modules.append(module)
        if not indent:
            top_level[module] = top_level.get(module, 0) + cumulative
    return Report(top_level, tuple(modules))


def imported(statement: str) -> Report:
    """Run ``statement`` in a fresh interpreter with ``-X importtime``; its report."""
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    completed = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return parse(completed.stderr)


async def run(scale: Scale) -> list[SectionResult]:
    startup = set(imported("pass").top_level)
    for statement in STATEMENTS:  # unmeasured: writes the bytecode caches a later run reads
        imported(statement)
    costs: dict[str, list[int]] = {statement: [] for statement in STATEMENTS}
    modules: dict[str, int] = {}
    for _ in range(scale.import_repeats):
        for statement in STATEMENTS:
            report = imported(statement)
            costs[statement].append(report.cost_us(startup))
            modules[statement] = report.package_modules()
    median = {statement: statistics.median(values) for statement, values in costs.items()}
    driver = median[DRIVER]
    result = SectionResult(
        key="import",
        title="10. Import time vs the driver stack",
        backend=f"fresh interpreters (python -X importtime), {DRIVER_NAME} stack",
    )
    for statement, target in ((PACKAGE, TARGET), (EVERYDAY, None)):
        ratio = median[statement] / max(driver, 1)
        result.rows.append(
            Row(
                f"{'the everyday API: ' if statement == EVERYDAY else ''}`{statement}` vs `{DRIVER}`",
                f"{median[statement] / 1000:,.1f} ms vs {driver / 1000:,.1f} ms = {ratio:.2f}x; loads "
                f"{modules[statement]} partner_repo module{'s' if modules[statement] != 1 else ''}",
                "" if target is None else f"<= {target}x",
                None if target is None else ratio <= target,
            )
        )
    result.raw = {
        "repeats": scale.import_repeats,
        "startup_modules": sorted(startup),
        "cost_us": costs,
        "median_us": median,
        "partner_repo_modules": modules,
    }
    result.notes.append(
        f"median of {scale.import_repeats} fresh interpreter(s) per statement, interleaved, after one "
        "unmeasured round; cost = the cumulative import time of the statement's top-level imports"
    )
    return [result]

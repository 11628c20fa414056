"""A ``pytest_terminal_summary`` hook: the skipped tests summed up by reason, one line per reason.

``-rs`` would print one line per skipped test, the same reason over and over (about 160 integration tests
skip for want of ``MONGODB_URI``); this says each reason once, with how many tests it skipped. Imported by
``tests/conftest.py``.
"""

from __future__ import annotations

from collections import Counter

import pytest


def skip_reason(report: pytest.TestReport) -> str:
    """The reason a test was skipped, without pytest's ``Skipped: `` prefix."""
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    skipped = [report for report in terminalreporter.stats.get("skipped", []) if report.skipped]
    if not skipped:
        return
    terminalreporter.section("skipped, by reason", sep="=")
    for reason, count in Counter(skip_reason(report) for report in skipped).most_common():
        terminalreporter.line(f"{count:5d} {reason}")

"""pytest's summary says each reason tests were skipped for once, with how many (tests/skip_summary.py)."""

from __future__ import annotations

import pytest

SKIPPING = """
import pytest

@pytest.mark.parametrize("n", range(3))
def test_needs_a_server(n):
    pytest.skip("MONGODB_URI is not set")

@pytest.mark.skip(reason="needs the package index")
def test_packaging():
    pass

def test_runs():
    pass
"""


def test_skipped_tests_are_summed_up_by_reason_one_line_each(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makeconftest("from tests.skip_summary import pytest_terminal_summary  # noqa: F401\n")
    pytester.makepyfile(SKIPPING)

    result = pytester.runpytest("-p", "no:cacheprovider")

    result.assert_outcomes(passed=1, skipped=4)
    lines = result.outlines[
        result.outlines.index(next(x for x in result.outlines if "skipped, by reason" in x)) :
    ]
    assert [line.split(maxsplit=1) for line in lines[1:3]] == [
        ["3", "MONGODB_URI is not set"],
        ["1", "needs the package index"],
    ]
    assert not any(line.startswith("SKIPPED [") for line in result.outlines)

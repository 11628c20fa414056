"""A core's page costs the same at 10,000 slices as at 100: the documents its queries examine, by ``explain``
on the server of ``MONGODB_URI`` (SecantusDB in CI), within 1.3x. The benchmark's own measurement
(``python -m benchmarks --sections console``), asserted."""

from __future__ import annotations

import pytest

from benchmarks.console_page import TARGET, measure_core_page
from tests.conftest import requires_mongodb

pytestmark = pytest.mark.integration


async def test_a_core_with_10000_slices_opens_examining_what_one_with_100_does() -> None:
    uri = requires_mongodb()

    small = await measure_core_page(uri, 100, repeats=1)
    large = await measure_core_page(uri, 10_000, repeats=1)

    print(f"documents examined: {small['docs_examined']} at 100 slices, {large['docs_examined']} at 10,000")
    assert small["timeline_slices"] == large["timeline_slices"] == 40
    assert small["queries"] == large["queries"]
    assert large["docs_examined"] <= TARGET * small["docs_examined"]

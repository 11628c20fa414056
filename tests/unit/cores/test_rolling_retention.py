"""Retention: after a roll the window is Partner's ``window[safe - retain : safe] + window[safe:]``."""

from __future__ import annotations

from typing import Any

import pytest

from partner_repo import InvalidInput, MemoryCoreRepository, roll_chat_messages
from partner_repo.cores import dropped_count
from tests.unit.rolling.support import numbered

WINDOW_SIZES = range(101)
DIVISORS = range(11)


def partner_formula(window: list[Any], snapshot_size: int, retain_divisor: int) -> list[Any]:
    """The issue's formula, written out literally as the oracle."""
    safe = min(max(snapshot_size, 0), len(window))
    if safe == 0:
        return list(window)
    divisor = max(retain_divisor, 1)
    retain = safe // divisor
    return window[safe - retain : safe] + window[safe:]


@pytest.mark.parametrize("divisor", DIVISORS)
def test_a_rolled_snapshot_keeps_the_formulas_messages_for_every_window_size(divisor: int) -> None:
    for size in WINDOW_SIZES:
        window = list(range(size))
        assert roll_chat_messages(window, size, divisor) == partner_formula(window, size, divisor), size


@pytest.mark.parametrize("divisor", DIVISORS)
def test_messages_recorded_after_the_snapshot_always_survive(divisor: int) -> None:
    for size in WINDOW_SIZES:
        window = list(range(size + 3))
        after = roll_chat_messages(window, size, divisor)
        assert after == partner_formula(window, size, divisor), size
        assert after[-3:] == window[-3:]


@pytest.mark.parametrize(("snapshot_size", "expected"), [(-5, 10), (0, 10), (30, 1)])
def test_the_snapshot_size_is_clamped_to_the_window(snapshot_size: int, expected: int) -> None:
    window = list(range(10))
    assert len(roll_chat_messages(window, snapshot_size, 6)) == expected
    assert roll_chat_messages(window, snapshot_size, 6) == partner_formula(window, snapshot_size, 6)


def test_a_negative_divisor_keeps_everything_like_divisor_one() -> None:
    window = list(range(12))
    assert roll_chat_messages(window, 12, -3) == roll_chat_messages(window, 12, 1) == window


def test_the_argument_window_is_not_modified() -> None:
    window = list(range(12))
    roll_chat_messages(window, 12, 6)
    assert window == list(range(12))


@pytest.mark.parametrize("arguments", [(10, 5.0, 6), (10, 5, "6"), (10, True, 6), (-1, 5, 6), (None, 5, 6)])
def test_non_integer_or_negative_sizes_are_refused(arguments: tuple[Any, Any, Any]) -> None:
    with pytest.raises(InvalidInput):
        dropped_count(*arguments)


@pytest.mark.parametrize("divisor", DIVISORS)
async def test_the_stored_window_is_trimmed_by_the_formula_for_every_window_size(
    memory_db: Any, divisor: int
) -> None:
    cores = MemoryCoreRepository(memory_db)
    for size in WINDOW_SIZES:
        core_id = f"core-{size}"
        window = numbered(0, size)
        await cores.record(core_id, window)
        dropped = await cores.trim_window(core_id, size, divisor)
        assert await cores.snapshot(core_id) == partner_formula(window, size, divisor), size
        assert dropped == size - len(partner_formula(window, size, divisor))

"""Backoff: the delay before each retry grows, is capped, and stays bounded however long failures last."""

from __future__ import annotations

import sys

import pytest

from partner_repo import Backoff, InvalidInput


def test_delays_grow_by_the_multiplier_up_to_the_maximum() -> None:
    backoff = Backoff(initial=0.5, multiplier=2.0, maximum=3.0, jitter=0)

    assert [backoff.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


@pytest.mark.parametrize("retry", [1_025, 1_100, 10**6, 10**100])
def test_the_delay_after_any_number_of_failures_is_the_maximum(retry: int) -> None:
    assert Backoff(initial=0.5, multiplier=2.0, maximum=30.0, jitter=0).delay(retry) == 30.0


@pytest.mark.parametrize("multiplier", [1e10, 1e300, sys.float_info.max, 1.0000001])
def test_huge_and_tiny_multipliers_never_overflow(multiplier: float) -> None:
    backoff = Backoff(initial=0.001, multiplier=multiplier, maximum=5.0, jitter=0)

    for retry in (1, 2, 3, 1_000, 10**6, 10**12):
        assert 0.001 <= backoff.delay(retry) <= 5.0
    assert backoff.delay(10**12) == 5.0


def test_extreme_ranges_between_initial_and_maximum_stay_bounded() -> None:
    backoff = Backoff(initial=1e-300, multiplier=10.0, maximum=1e300, jitter=0)

    assert backoff.delay(400) <= 1e300
    assert backoff.delay(10**9) == 1e300


def test_jitter_spreads_the_capped_delay_without_leaving_its_band() -> None:
    backoff = Backoff(initial=1.0, multiplier=2.0, maximum=10.0, jitter=0.1)

    assert all(9.0 <= backoff.delay(10**6) <= 11.0 for _ in range(100))


def test_a_zero_initial_delay_stays_zero() -> None:
    assert Backoff(initial=0, multiplier=3.0, maximum=10.0).delay(10**6) == 0.0


@pytest.mark.parametrize(
    "options",
    [
        {"maximum": float("inf")},
        {"initial": float("inf")},
        {"multiplier": float("nan")},
        {"initial": float("nan")},
        {"multiplier": float("inf")},
    ],
)
def test_unbounded_or_undefined_delays_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(InvalidInput):
        Backoff(**options)

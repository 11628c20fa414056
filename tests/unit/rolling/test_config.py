"""RollingConfig: Partner's defaults, and a clear error for values that cannot work."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from partner_repo import MAX_DOCUMENT_BYTES, InvalidInput, RollingConfig


def test_the_defaults_are_partners() -> None:
    config = RollingConfig()
    assert config.trigger_limit == 36
    assert config.idle_after == timedelta(hours=1)
    assert config.retain_divisor == 6
    assert config.check_interval == timedelta(seconds=10)
    assert config.unit_soft_limit_bytes == 8 * 1024 * 1024
    assert config.lease_duration == timedelta(seconds=60)


def test_the_config_is_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        RollingConfig().trigger_limit = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    "changes",
    [
        {"trigger_limit": 1},
        {"trigger_limit": 0},
        {"trigger_limit": 36.0},
        {"trigger_limit": True},
        {"retain_divisor": -1},
        {"retain_divisor": "6"},
        {"idle_after": timedelta(seconds=-1)},
        {"idle_after": 3600},
        {"check_interval": timedelta(0)},
        {"check_interval": 10},
        {"lease_duration": timedelta(0)},
        {"unit_soft_limit_bytes": 0},
        {"unit_soft_limit_bytes": MAX_DOCUMENT_BYTES + 1},
    ],
)
def test_values_that_cannot_work_are_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        RollingConfig(**changes)


def test_a_divisor_of_zero_and_an_idle_time_of_zero_are_allowed() -> None:
    config = RollingConfig(retain_divisor=0, idle_after=timedelta(0))
    assert config.retain_divisor == 0 and config.idle_after == timedelta(0)

"""One reading of durations for every setting and option: seconds, ISO 8601 or HH:MM:SS."""

from __future__ import annotations

from datetime import timedelta

import pytest

from partner_repo.durations import parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90", timedelta(seconds=90)),
        ("2.5", timedelta(seconds=2.5)),
        (" 30 ", timedelta(seconds=30)),
        ("PT30M", timedelta(minutes=30)),
        ("pt30m", timedelta(minutes=30)),
        ("P1DT2H", timedelta(days=1, hours=2)),
        ("1:30:00", timedelta(hours=1, minutes=30)),
    ],
)
def test_a_duration_may_be_seconds_iso_8601_or_clock_time(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


def test_numbers_are_seconds() -> None:
    assert parse_duration(90) == parse_duration(90.0) == timedelta(seconds=90)


@pytest.mark.parametrize("value", ["bogus", "", "PT", "30 minutes", True])
def test_anything_else_is_refused_naming_the_forms_but_not_the_value(value: object) -> None:
    with pytest.raises(ValueError, match=r"not a duration: give seconds .*ISO 8601") as caught:
        parse_duration(value)

    assert "bogus" not in str(caught.value)

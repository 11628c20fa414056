"""Properties every normalized unit has, whatever incomplete or contradictory slices it started with."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partner_repo import MemoryUnit, normalize_unit

NOW = datetime(2024, 5, 1, 12, tzinfo=UTC)
BASE = datetime(2024, 1, 1, tzinfo=UTC)

# Few distinct values on purpose, so generated slices share ids and creation times (duplicates and ties).
ids = st.one_of(st.none(), st.sampled_from(["", "  ", "a", "b", "c", "legacy-id"]))
times = st.one_of(st.none(), st.integers(0, 4).map(lambda h: BASE + timedelta(hours=h)))
indexes = st.one_of(st.none(), st.integers(-3, 12))
slices = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "id": ids,
            "start_index": indexes,
            "end_index": indexes,
            "created_at": times,
            "summary": st.text(max_size=3),
        },
    ),
)
units = st.builds(
    lambda count, pieces, updated_at: MemoryUnit.model_validate(
        {
            "id": "u",
            "core_id": "c",
            "conversation_messages": [{"role": "user", "content": str(i)} for i in range(count)],
            "slices": pieces,
            "updated_at": updated_at,
        }
    ),
    st.integers(0, 8),
    st.lists(slices, max_size=8),
    times,
)

PROPERTY = settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def complete(unit: MemoryUnit) -> list[Any]:
    return [s for s in unit.slices if s is not None]


@PROPERTY
@given(units)
def test_intervals_lie_within_the_messages(unit: MemoryUnit) -> None:
    normalized = normalize_unit(unit, now=NOW)
    for piece in normalized.slices:
        assert piece is not None
        assert piece.start_index is not None and piece.end_index is not None
        assert 0 <= piece.start_index <= piece.end_index <= len(normalized.conversation_messages)


@PROPERTY
@given(units)
def test_slices_are_sorted_by_creation_time(unit: MemoryUnit) -> None:
    times_out = [s.created_at for s in complete(normalize_unit(unit, now=NOW))]
    assert all(t is not None for t in times_out)
    assert times_out == sorted(times_out)  # type: ignore[type-var]


@PROPERTY
@given(units)
def test_slice_ids_are_unique_and_never_blank(unit: MemoryUnit) -> None:
    slice_ids = [s.id for s in complete(normalize_unit(unit, now=NOW))]
    assert all(isinstance(i, str) and i.strip() for i in slice_ids)
    assert len(set(slice_ids)) == len(slice_ids)


@PROPERTY
@given(units)
def test_normalizing_is_idempotent(unit: MemoryUnit) -> None:
    once = normalize_unit(unit, now=NOW)
    assert normalize_unit(once, now=NOW + timedelta(days=3)).model_dump() == once.model_dump()


@PROPERTY
@given(units)
def test_only_none_entries_are_dropped_and_ties_keep_input_order(unit: MemoryUnit) -> None:
    normalized = normalize_unit(unit, now=NOW)
    originals = complete(unit)
    assert len(normalized.slices) == len(originals)
    # Summaries travel with their slice; equal creation times keep the input order.
    fill = unit.updated_at or NOW
    keyed = sorted(enumerate(originals), key=lambda pair: pair[1].created_at or fill)
    assert [s.summary for s in complete(normalized)] == [s.summary for _, s in keyed]


@PROPERTY
@given(units)
def test_normalizing_leaves_the_input_untouched(unit: MemoryUnit) -> None:
    before = unit.model_dump()
    normalize_unit(unit, now=NOW)
    assert unit.model_dump() == before


@PROPERTY
@given(units)
def test_messages_and_identity_are_never_changed(unit: MemoryUnit) -> None:
    normalized = normalize_unit(unit, now=NOW)
    assert (normalized.id, normalized.core_id) == (unit.id, unit.core_id)
    assert normalized.conversation_messages == unit.conversation_messages
    assert normalized.updated_at == (unit.updated_at or NOW)

"""``scoring.rank``, recall's one pure ranking function: channels fused with Partner's weights, recency, the
profile, and the messages that matter chosen within the budget, in order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from partner_repo.models import Message
from partner_repo.recall import RecallWeights, TopicProfile, terms
from partner_repo.recall._scoring import Candidate, rank
from partner_repo.recall._weights import read_marks, slice_terms, stored_marks

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def candidate(
    name: str,
    *,
    unit: str = "u",
    text: float = 0.0,
    ranks: Mapping[str, int] | None = None,
    size: int = 5,
    marks: Mapping[str, Sequence[tuple[int, float]]] | None = None,
    age: timedelta = timedelta(0),
    profile: TopicProfile | None = None,
) -> Candidate:
    return Candidate(
        unit_id=unit,
        slice_id=name,
        summary=f"summary of {name}",
        start=100,
        end=100 + size,
        began_at=NOW - age - timedelta(minutes=10),
        ended_at=NOW - age,
        topic="t",
        profile=profile or TopicProfile(),
        text=text,
        marks=marks or {},
        ranks=ranks if ranks is not None else {"text": 1},
    )


def ranked_names(found: Sequence[object]) -> list[str]:
    return [item.candidate.slice_id for item in found]  # type: ignore[attr-defined]


def test_no_candidates_rank_to_nothing() -> None:
    assert rank([], {}, now=NOW, limit=10, max_messages=40) == []


def test_the_text_channel_counts_by_score_normalized_to_the_best() -> None:
    best = candidate("best", text=4.0, ranks={"text": 1})
    half = candidate("half", text=2.0, ranks={"text": 2})

    found = rank([half, best], {}, now=NOW, limit=10, max_messages=40)

    assert ranked_names(found) == ["best", "half"]
    assert [item.why["text"] for item in found] == [1.0, 0.5]


@pytest.mark.parametrize(("place", "expected"), [(1, 0.6), (2, 0.6 * 11 / 12), (10, 0.6 * 11 / 20)])
def test_another_channel_counts_by_reciprocal_rank(place: int, expected: float) -> None:
    [found] = rank([candidate("d", ranks={"date": place})], {}, now=NOW, limit=1, max_messages=5)

    assert found.why["date"] == pytest.approx(expected, abs=1e-6)


def test_a_related_topic_find_counts_as_much_as_the_slices_diffusion() -> None:
    diffuse = candidate("r", ranks={"related": 1}, profile=TopicProfile(diffusion=0.25))

    [found] = rank([diffuse], {}, now=NOW, limit=1, max_messages=5)

    assert found.why["related"] == pytest.approx(0.2 * 0.25)


def test_recency_halves_every_half_life() -> None:
    fresh, month_old = candidate("fresh"), candidate("old", age=timedelta(days=30))

    found = {
        item.candidate.slice_id: item.why
        for item in rank([fresh, month_old], {}, now=NOW, limit=2, max_messages=10)
    }

    assert found["fresh"]["recency"] == pytest.approx(0.05)
    assert found["old"]["recency"] == pytest.approx(0.025)


def test_the_profile_adds_activation_and_independence() -> None:
    profile = TopicProfile(activation=1.0, independence=0.5)

    [found] = rank([candidate("p", profile=profile)], {}, now=NOW, limit=1, max_messages=5)

    assert (found.why["activation"], found.why["independence"]) == (0.05, 0.01)
    assert found.score == pytest.approx(sum(found.why.values()), abs=1e-6)


def test_a_channel_weighted_zero_contributes_nothing() -> None:
    weights = RecallWeights(channels={"text": 1.0, "date": 0.0})

    [found] = rank([candidate("d", ranks={"date": 1})], {}, now=NOW, limit=1, max_messages=5, weights=weights)

    assert "date" not in found.why


def test_limit_caps_the_slices_and_max_messages_the_messages() -> None:
    three = [candidate(name, text=float(n + 1)) for n, name in enumerate("abc")]  # five messages each

    capped = rank(three, {}, now=NOW, limit=2, max_messages=40)
    budget = rank(three, {}, now=NOW, limit=3, max_messages=7)

    assert ranked_names(capped) == ["c", "b"] and [len(item.offsets) for item in capped] == [5, 5]
    assert ranked_names(budget) == ["c", "b"] and [len(item.offsets) for item in budget] == [5, 2]


def test_the_message_that_matters_is_chosen_with_its_neighbours_in_order() -> None:
    passport = candidate("long", size=12, marks={"passport": [(7, 1.0)]}, text=1.0)

    one = rank([passport], {"passport": 2.0}, now=NOW, limit=1, max_messages=1)
    three = rank([passport], {"passport": 2.0}, now=NOW, limit=1, max_messages=3)

    assert one[0].offsets == [7]
    assert three[0].offsets == [6, 7, 8]


def test_a_speakers_name_counts_for_what_they_said_not_for_a_message_greeting_them() -> None:
    """Message 0 is Caroline's (her name is in its terms), message 3 greets her twice."""
    marks = {"carolin": [(0, 0.8), (3, 1.5)]}
    chat = replace(candidate("chat", size=5, marks=marks, text=1.0), speakers={"carolin": [0]})

    [found] = rank([chat], {"carolin": 1.0}, now=NOW, limit=1, max_messages=1)

    assert found.offsets == [0]


def test_a_slice_takes_no_more_messages_than_it_has() -> None:
    [found] = rank([candidate("short", size=3)], {}, now=NOW, limit=1, max_messages=40)

    assert found.offsets == [0, 1, 2]


def test_messages_go_to_the_slices_whose_messages_match_best() -> None:
    weak = candidate("weak", text=3.0, size=4, marks={"rye": [(0, 0.2)]})
    strong = candidate("strong", text=2.0, size=4, marks={"rye": [(2, 1.5)]})

    [found] = rank([weak, strong], {"rye": 1.0}, now=NOW, limit=1, max_messages=1)

    assert found.candidate.slice_id == "strong" and found.offsets == [2]


def test_per_unit_cap_limits_the_slices_of_one_unit() -> None:
    same_unit = [candidate(f"s{n}", unit="u1", text=10.0 - n) for n in range(3)]
    other = candidate("o", unit="u2", text=1.0)
    weights = RecallWeights(per_unit_cap=1)

    found = rank([*same_unit, other], {}, now=NOW, limit=3, max_messages=40, weights=weights)

    assert ranked_names(found) == ["s0", "o"]


def test_equal_candidates_keep_the_order_they_came_in() -> None:
    twins = [candidate("first"), candidate("second")]

    assert ranked_names(rank(twins, {}, now=NOW, limit=2, max_messages=10)) == ["first", "second"]


def test_marks_are_stored_as_one_string_a_term_and_read_back_as_they_were() -> None:
    features = slice_terms(
        "", [Message(role="user", content="rye bread"), Message(role="user", content="rye")], terms
    )

    stored = stored_marks(features.marks)

    assert all(isinstance(text, str) for text in stored.values())
    assert stored["rye"].split() == [
        f"0:{features.marks['rye'][0][1]!r}",
        f"1:{features.marks['rye'][1][1]!r}",
    ]
    assert read_marks(stored) == features.marks

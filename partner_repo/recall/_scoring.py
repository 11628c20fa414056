"""Ranking recall's candidates: one pure function from what the channels found to the activated slices.

**Slices.** Each candidate slice was found by one or more channels (``text``, ``search``, ``vector``,
``topic``, ``parent``, ``related``, ``date``, ``recent``). Its score fuses them with Partner's weights::

    slice = w_text · text / best_text                       (BM25 of the whole slice, normalized)
          + Σ_channel w_channel · (k + 1) / (k + rank)      (reciprocal rank fusion, 1.0 for a first place)
          + w_recency · 0.5 ^ (age / half_life)
          + w_activation · activation + w_independence · independence

The text channel enters by its normalized score rather than its rank: BM25 says by how much one slice beats
another, and that margin matters when the next step picks messages. A related-topic find is scaled by the
slice's ``diffusion``. A slice next to another candidate in its unit gains ``adjacent`` times its
neighbour's normalized score: a question needing two pieces of a conversation often finds them one slice
apart, so a neighbour is returned when its messages earn a place in the budget.

**Messages.** Recall returns raw messages within a budget (``max_messages``), so the unit of choice is the
message. A message's score is its own BM25 (from the slice's marks, normalized), plus ``slice_share`` of its
slice's normalized score, plus ``neighbour`` times the best normalized BM25 of the messages next to it in
the slice (one further away counts ``second_neighbour`` as much): an answer often sits beside the message
that names the topic; plus ``speaker`` when its speaker is named in the query ("What did Caroline paint?"
is about what Caroline said). A speaker's name counts that way only, not by its BM25: a message that greets
Caroline ("Thanks, Caroline!") is not about her, and in a conversation between two people every other
message names one of them. And, with an embedder, ``message_similarity`` times the cosine similarity of
its vector to the query's (a paraphrase no word of the query matches), and ``similar_neighbour`` times the
best similarity beside it (an answer follows the message its question paraphrases). Messages are taken
best first into at most ``limit`` slices (and ``per_unit_cap`` slices of one unit, when set) until the
budget is spent; each slice's messages come back in order.

With an embedder, ranking runs twice: first the slices (:func:`best_slices`, with no message vectors read),
then, once the best slices' message vectors are read, their messages. The defaults were chosen on LoCoMo's
shared half (``docs/recall.md``, "Fusion").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from partner_repo.recall._topics import TopicProfile

CHANNELS = ("text", "search", "vector", "topic", "parent", "related", "date", "recent")


def _default_channels() -> dict[str, float]:
    return {
        "text": 1.0,
        "search": 0.4,
        "vector": 1.0,
        "topic": 0.3,
        "parent": 0.1,
        "related": 0.2,
        "date": 0.6,
        "recent": 0.05,
    }


@dataclass(frozen=True)
class RecallWeights:
    """The knobs of :func:`rank` (see the module docstring for where each one enters)."""

    channels: Mapping[str, float] = field(default_factory=_default_channels)
    rank_constant: int = 10
    recency: float = 0.05
    half_life_days: float = 30.0
    activation: float = 0.05
    independence: float = 0.02
    slice_share: float = 0.4
    neighbour: float = 0.5
    second_neighbour: float = 0.5
    speaker: float = 0.4
    emphasis: float = 2.0
    adjacent: float = 0.1
    message_similarity: float = 2.0
    similar_neighbour: float = 0.5
    per_unit_cap: int | None = None


@dataclass(frozen=True)
class Candidate:
    """One slice a channel found: where it is, what it says, and what ranking needs."""

    unit_id: str
    slice_id: str
    summary: str
    start: int
    end: int
    began_at: datetime
    ended_at: datetime
    topic: str
    profile: TopicProfile
    text: float
    marks: Mapping[str, Sequence[tuple[int, float]]]
    ranks: Mapping[str, int]
    speakers: Mapping[str, Sequence[int]] = field(default_factory=dict)
    """The offsets of the messages each query term names the speaker of."""
    similarities: Sequence[float] | None = None
    """Each message's cosine similarity to the query (with an embedder, once its vectors are read)."""


@dataclass(frozen=True)
class Ranked:
    """A slice :func:`rank` activated: its score, why, and the offsets of its chosen messages in order."""

    candidate: Candidate
    score: float
    why: dict[str, float]
    offsets: list[int]


def rank(
    candidates: Sequence[Candidate],
    idf: Mapping[str, float],
    *,
    now: datetime,
    limit: int,
    max_messages: int,
    weights: RecallWeights | None = None,
) -> list[Ranked]:
    """The activated slices, best first, each with the offsets of its chosen messages (see the module)."""
    weights = weights or RecallWeights()
    if not candidates or limit <= 0 or max_messages <= 0:
        return []
    whys, scores = _slice_scores(candidates, now, weights)
    best_slice = max(scores) or 1.0
    messages = [_message_scores(candidate, idf) for candidate in candidates]
    best_message = max((max(scores_, default=0.0) for scores_ in messages), default=0.0) or 1.0
    choices: list[tuple[float, int, int]] = []
    for index, own in enumerate(messages):
        normalized = [value / best_message for value in own]
        share = weights.slice_share * scores[index] / best_slice
        similar = _similarities(candidates[index], len(normalized))
        extra = _message_extras(candidates[index], similar, len(normalized), weights)
        for offset in range(len(normalized)):
            near = _neighbourhood(normalized, offset, weights.second_neighbour)
            value = normalized[offset] + extra[offset] + share + weights.neighbour * near
            if similar is not None:
                value += weights.similar_neighbour * _neighbourhood(similar, offset, weights.second_neighbour)
            choices.append((value, index, offset))
    choices.sort(key=lambda choice: (-choice[0], -scores[choice[1]], choice[1], choice[2]))
    taken: dict[int, list[int]] = {}
    per_unit: dict[str, int] = {}
    budget = max_messages
    for _, index, offset in choices:
        if budget == 0:
            break
        if index not in taken:
            unit_id = candidates[index].unit_id
            cap = weights.per_unit_cap
            if len(taken) >= limit or (cap is not None and per_unit.get(unit_id, 0) >= cap):
                continue
            taken[index] = []
            per_unit[unit_id] = per_unit.get(unit_id, 0) + 1
        taken[index].append(offset)
        budget -= 1
    order = sorted(taken, key=lambda index: (-scores[index], index))
    return [
        Ranked(candidate=candidates[i], score=round(scores[i], 6), why=whys[i], offsets=sorted(taken[i]))
        for i in order
    ]


def best_slices(
    candidates: Sequence[Candidate], *, now: datetime, count: int, weights: RecallWeights | None = None
) -> list[Candidate]:
    """The ``count`` candidates whose slices score best (the first of recall's two rankings with an
    embedder: the slices whose message vectors are worth reading)."""
    weights = weights or RecallWeights()
    _, scores = _slice_scores(candidates, now, weights)
    scored = sorted(enumerate(scores), key=lambda item: (-item[1], item[0]))
    return [candidates[index] for index, _ in scored[:count]]


def _slice_scores(
    candidates: Sequence[Candidate], now: datetime, weights: RecallWeights
) -> tuple[list[dict[str, float]], list[float]]:
    """Each slice's parts (its ``why``) and their sum: the slice sum of the module's docstring."""
    best_text = max((candidate.text for candidate in candidates), default=0.0)
    whys = [_why(candidate, best_text, now, weights) for candidate in candidates]
    _beside(candidates, whys, weights.adjacent)
    return whys, [sum(why.values()) for why in whys]


def _beside(candidates: Sequence[Candidate], whys: list[dict[str, float]], weight: float) -> None:
    """Each slice next to another candidate in its unit (one ends where the other starts) gains ``weight``
    times the better neighbour's score, normalized by the best slice's: evidence of a question that needs
    two pieces is often one slice away."""
    if weight <= 0:
        return
    base = [sum(why.values()) for why in whys]
    best = max(base, default=0.0) or 1.0
    by_start = {(c.unit_id, c.start): index for index, c in enumerate(candidates) if c.end > c.start}
    by_end = {(c.unit_id, c.end): index for index, c in enumerate(candidates) if c.end > c.start}
    for index, candidate in enumerate(candidates):
        beside = [
            by_end.get((candidate.unit_id, candidate.start)),
            by_start.get((candidate.unit_id, candidate.end)),
        ]
        found = [base[other] for other in beside if other is not None and other != index]
        if found:
            whys[index]["adjacent"] = round(weight * max(found) / best, 6)


def _message_extras(
    candidate: Candidate, similar: list[float] | None, size: int, weights: RecallWeights
) -> list[float]:
    """What each message adds beyond its words: its speaker named in the query, its similarity to the
    query's vector (``similar``: :func:`_similarities`)."""
    extra = [0.0] * size
    for offsets in candidate.speakers.values():
        for offset in offsets:
            if 0 <= offset < size:
                extra[offset] = weights.speaker
    if similar is not None:
        for offset, similarity in enumerate(similar):
            extra[offset] += weights.message_similarity * similarity
    return extra


def _similarities(candidate: Candidate, size: int) -> list[float] | None:
    """Each message's similarity to the query (none below 0), when its vectors were read."""
    if candidate.similarities is None or len(candidate.similarities) != size:
        return None
    return [max(similarity, 0.0) for similarity in candidate.similarities]


def _why(candidate: Candidate, best_text: float, now: datetime, weights: RecallWeights) -> dict[str, float]:
    why: dict[str, float] = {}
    for channel, place in candidate.ranks.items():
        weight = weights.channels.get(channel, 0.0)
        if channel == "text":
            value = weight * (candidate.text / best_text if best_text > 0 else 0.0)
        else:
            value = weight * (weights.rank_constant + 1) / (weights.rank_constant + place)
            if channel == "related":
                value *= candidate.profile.diffusion
        if value:
            why[channel] = round(value, 6)
    age_days = max((now - candidate.ended_at).total_seconds(), 0.0) / 86400
    why["recency"] = round(weights.recency * 0.5 ** (age_days / weights.half_life_days), 6)
    why["activation"] = round(weights.activation * candidate.profile.activation, 6)
    why["independence"] = round(weights.independence * candidate.profile.independence, 6)
    return why


def _message_scores(candidate: Candidate, idf: Mapping[str, float]) -> list[float]:
    size = max(candidate.end - candidate.start, 0)
    scores = [0.0] * size
    for term, marks in candidate.marks.items():
        if term in candidate.speakers:  # a speaker's name: who said a message counts by ``speaker``
            continue
        weight = idf.get(term, 0.0)
        for offset, value in marks:
            if 0 <= offset < size:
                scores[int(offset)] += weight * value
    return scores


def _neighbourhood(scores: Sequence[float], offset: int, second: float) -> float:
    near = 0.0
    for distance, factor in ((1, 1.0), (2, second)):
        for other in (offset - distance, offset + distance):
            if 0 <= other < len(scores):
                near = max(near, factor * scores[other])
    return near


__all__ = ["CHANNELS", "Candidate", "RecallWeights", "Ranked", "best_slices", "rank"]

"""What recall answers: the activated slices with their raw messages, and a core's topic tree."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from partner_repo.clock import to_utc_ms
from partner_repo.models import Message
from partner_repo.recall._scoring import CHANNELS, Candidate, Ranked
from partner_repo.recall._topics import SEPARATOR, TopicProfile
from partner_repo.recall._weights import read_marks, read_speakers

_PROFILE = ("activation", "diffusion", "independence")


@dataclass(frozen=True)
class TopicNode:
    """A node of a core's topic tree and how many indexed slices sit under it.

    ``path`` is the node as a person reads it (``beagle->adopted``); ``key``, when it differs, is the path
    the index matches it by (the offline extractor's stems, ``beagl->adopt``). A :class:`~.TopicCue` may
    give either."""

    path: str
    slices: int
    key: str | None = None

    @property
    def depth(self) -> int:
        return len(self.path.split(SEPARATOR))


@dataclass(frozen=True)
class TopicPage:
    """One page of a core's topic tree in path order; ``after`` names the last node's path (pass it for the
    next page), None on the last page."""

    nodes: list[TopicNode]
    after: str | None


@dataclass(frozen=True)
class ActivatedSlice:
    """A recalled slice: where it is, what it says, when, why it was found, and its raw messages.

    ``topic`` is its primary topic path as a person reads it. ``messages`` are the slice's messages (or,
    within ``max_messages``, the ones that matter), in order; ``positions`` their indexes in the unit.
    ``sources`` names the channels that found it; ``why`` (on request) what each part of its score
    contributed."""

    slice_id: str
    unit_id: str
    core_id: str
    summary: str
    day: date
    began_at: datetime
    ended_at: datetime
    topic: str
    sources: tuple[str, ...]
    score: float
    messages: tuple[Message, ...]
    positions: tuple[int, ...]
    why: dict[str, float] | None = None


def tree_nodes(rows: Sequence[Mapping[str, Any]]) -> list[TopicNode]:
    """The index's node documents as :class:`TopicNode` (readable path, count, matching key)."""
    nodes = []
    for row in rows:
        label = row.get("label") or row["node"]
        nodes.append(
            TopicNode(
                path=label, slices=int(row["slices"]), key=None if label == row["node"] else row["node"]
            )
        )
    return nodes


def candidates(found: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[Candidate]:
    """Each slice the channels found, once, with its place in each channel that found it."""
    rows: dict[tuple[str, str], Mapping[str, Any]] = {}
    ranks: dict[tuple[str, str], dict[str, int]] = {}
    for channel, documents in found.items():
        for place, document in enumerate(documents, start=1):
            key = (document["unit_id"], document["slice_id"])
            rows.setdefault(key, document)
            ranks.setdefault(key, {})[channel] = place
    return [_candidate(rows[key], ranks[key]) for key in rows]


def _candidate(document: Mapping[str, Any], ranks: dict[str, int]) -> Candidate:
    profile = document.get("profile") or {}
    created = to_utc_ms(document["created_at"])
    return Candidate(
        unit_id=document["unit_id"],
        slice_id=document["slice_id"],
        summary=document.get("summary") or "",
        start=int(document.get("start") or 0),
        end=int(document.get("end") or 0),
        began_at=to_utc_ms(document.get("began_at") or created),
        ended_at=to_utc_ms(document.get("ended_at") or created),
        topic=document.get("topic") or document.get("path") or "",
        profile=TopicProfile(**{key: float(value) for key, value in profile.items() if key in _PROFILE}),
        text=float(document.get("text") or 0.0),
        marks=read_marks(document.get("marks") or {}),
        ranks=ranks,
        speakers=read_speakers(document.get("speakers") or {}),
    )


def wanted_positions(ranked: Sequence[Ranked]) -> dict[str, list[int]]:
    """The positions of each unit's chosen messages."""
    wanted: dict[str, list[int]] = {}
    for choice in ranked:
        wanted.setdefault(choice.candidate.unit_id, []).extend(
            choice.candidate.start + offset for offset in choice.offsets
        )
    return wanted


def activated(
    core_id: str,
    ranked: Sequence[Ranked],
    read: Mapping[str, Mapping[int, Message]],
    *,
    explain: bool,
    zone: ZoneInfo,
) -> list[ActivatedSlice]:
    """The ranked slices whose messages could be read (a unit gone or erased yields none: nothing erased
    comes back), each with those messages."""
    answer: list[ActivatedSlice] = []
    for choice in ranked:
        picked = read.get(choice.candidate.unit_id)
        if picked is None:
            continue
        positions = [choice.candidate.start + offset for offset in choice.offsets]
        kept = [position for position in positions if position in picked]
        if kept:
            answer.append(_activated(core_id, choice, kept, picked, explain, zone))
    return answer


def _activated(
    core_id: str,
    choice: Ranked,
    kept: list[int],
    picked: Mapping[int, Message],
    explain: bool,
    zone: ZoneInfo,
) -> ActivatedSlice:
    candidate = choice.candidate
    return ActivatedSlice(
        slice_id=candidate.slice_id,
        unit_id=candidate.unit_id,
        core_id=core_id,
        summary=candidate.summary,
        day=candidate.began_at.astimezone(zone).date(),
        began_at=candidate.began_at,
        ended_at=candidate.ended_at,
        topic=candidate.topic,
        sources=tuple(sorted(candidate.ranks, key=CHANNELS.index)),
        score=choice.score,
        messages=tuple(picked[position] for position in kept),
        positions=tuple(kept),
        why=dict(choice.why) if explain else None,
    )


__all__ = [
    "ActivatedSlice",
    "TopicNode",
    "TopicPage",
    "activated",
    "candidates",
    "tree_nodes",
    "wanted_positions",
]

"""MemoryRecall: Partner's recall, from a query to the slices it is about and their raw messages.

A recall is three round trips whatever the history's size: the vocabulary (each query term's slice count,
the core's, the topic nodes the query names), the candidates of every channel in one aggregation (core and
time filters applied *before* ranking, in its ``$match``), and the chosen messages of the activated slices
in one more. Ranking in between is :func:`.scoring.rank`, a pure function. A slice whose unit is gone or
erased is dropped when its messages cannot be read, so nothing erased comes back, even before the indexer
has been told.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from partner_repo.clock import to_utc_ms, utc_now
from partner_repo.errors import InvalidInput
from partner_repo.models import Message
from partner_repo.mongo import driver
from partner_repo.recall._cues import DateCue, date_cues
from partner_repo.recall._scoring import CHANNELS, Candidate, RecallWeights, rank
from partner_repo.recall._search import SearchSupport, text_pipeline, vector_pipeline
from partner_repo.recall._store import (
    CHANNEL_LIMIT_FLOOR,
    COMMON_TERM_SLICES,
    MATCH_TERM_LIMIT,
    TOPIC_CUES,
    Plan,
    RecallStore,
)
from partner_repo.recall._terms import terms
from partner_repo.recall._topics import SEPARATOR, TopicProfile, parts
from partner_repo.recall._vectors import Embedder, embed, nearest
from partner_repo.recall._weights import Tokenizer, idf
from partner_repo.units import messages_at
from partner_repo.validation import optional_datetime, require_id

MAX_LIMIT = 100
MAX_MESSAGES = 1000


@dataclass(frozen=True)
class TopicCue:
    """A topic path the caller's own cue extractor (Partner's LLM) read from the input."""

    path: str


Cue = DateCue | TopicCue


@dataclass(frozen=True)
class TopicNode:
    """A node of a core's topic tree and how many indexed slices sit under it."""

    path: str
    slices: int

    @property
    def depth(self) -> int:
        return len(self.path.split(SEPARATOR))


@dataclass(frozen=True)
class ActivatedSlice:
    """A recalled slice: where it is, what it says, when, why it was found, and its raw messages.

    ``messages`` are the slice's messages (or, within ``max_messages``, the ones that matter), in order;
    ``positions`` their indexes in the unit. ``sources`` names the channels that found it; ``why`` (on
    request) what each part of its score contributed."""

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


@driver.timeouts_surface_as_project_errors
class MemoryRecall:
    """Recall over the index :class:`~.indexer.RecallIndexer` builds.

    ``tz``: the zone "yesterday" and "X月X日" are read in (default UTC); ``clock``: what "now" is;
    ``tokenizer`` and ``embedder`` must be the indexer's. ``search``: None probes the server once for MongoDB
    Search indexes (:mod:`.search`), False never uses them."""

    def __init__(
        self,
        database: Any,
        *,
        weights: RecallWeights | None = None,
        tokenizer: Tokenizer = terms,
        tz: ZoneInfo | str = "UTC",
        clock: Callable[[], datetime] = utc_now,
        embedder: Embedder | None = None,
        search: bool | None = None,
    ) -> None:
        if embedder is not None and not callable(embedder):
            raise InvalidInput(f"embedder must be callable, got {type(embedder).__name__}")
        self._database = database
        self._embedder = embedder
        self._support: SearchSupport | None = None if search is None else SearchSupport()
        self._store = RecallStore(database)
        self._weights = weights or RecallWeights()
        self._tokenizer = tokenizer
        self._tz = _zone(tz)
        self._clock = clock

    async def recall(
        self,
        core_id: str,
        query: str,
        *,
        limit: int = 10,
        max_messages: int = 40,
        since: datetime | None = None,
        until: datetime | None = None,
        cues: Sequence[Cue] | None = None,
        now: datetime | None = None,
        tz: ZoneInfo | str | None = None,
        explain: bool = False,
    ) -> list[ActivatedSlice]:
        """The slices of ``core_id`` that ``query`` is about, best first, with their raw messages.

        ``cues``: date and topic cues from the caller (they replace the ones read from the query by rules);
        ``since``/``until``: only slices whose conversation overlaps ``[since, until)``; ``now``/``tz``: what
        relative dates are relative to (``since``, ``until`` and ``now`` are aware datetimes: a naive one is
        refused); ``explain``: fill each slice's ``why``. Bad input raises :class:`InvalidInput`."""
        core_id = require_id(core_id, "core_id")
        if not isinstance(query, str):
            raise InvalidInput(f"query must be a string, got {type(query).__name__}")
        limit = _bounded(limit, "limit", MAX_LIMIT)
        max_messages = _bounded(max_messages, "max_messages", MAX_MESSAGES)
        since, until = _aware(since, "since"), _aware(until, "until")
        if since is not None and until is not None and since >= until:
            raise InvalidInput(f"since ({since.isoformat()}) must be before until ({until.isoformat()})")
        now = _aware(now, "now") or to_utc_ms(self._clock())
        zone = self._tz if tz is None else _zone(tz)
        given = _checked_cues(cues)
        query_terms = list(dict.fromkeys(self._tokenizer(query)))
        support = await self._search_support()
        vector = (await embed(self._embedder, [query]))[0] if self._embedder and query.strip() else None
        plan = Plan(
            idf={term: 0.0 for term in query_terms},
            finding=[],
            topics=[],
            parents=[],
            ranges=[],
            since=since,
            until=until,
            per_channel=max(CHANNEL_LIMIT_FLOOR, 2 * limit),
            vectors=vector is not None and not support.vector,
            newest=not query_terms and not given,
        )
        extra = self._search_channels(core_id, query, vector, support, plan)
        words = query_terms if given is None else []
        lookup, *searched = await asyncio.gather(
            self._store.lookup(core_id, query_terms, words), *extra.values()
        )
        present = {term: count for term, count in lookup.frequencies.items() if count > 0}
        weights_idf = {term: idf(count, lookup.slices) for term, count in present.items()}
        dated = (
            date_cues(query, now=now, tz=zone)
            if given is None
            else [c for c in given if isinstance(c, DateCue)]
        )
        topics = _topics(lookup.nodes, query_terms) if given is None else _given_topics(given)
        plan = replace(
            plan,
            idf=weights_idf,
            finding=_finding(present),
            topics=topics,
            parents=sorted({_parent(path) for path in topics if SEPARATOR in path}),
            ranges=[_range(cue, zone) for cue in dated],
        )
        found = await self._store.candidates(core_id, plan)
        found.update(zip(extra, searched, strict=True))
        if plan.vectors and vector is not None:
            found["vector"] = nearest(found, vector, plan.per_channel)
        candidates = _candidates(found)
        ranked = rank(
            candidates, weights_idf, now=now, limit=limit, max_messages=max_messages, weights=self._weights
        )
        wanted: dict[str, list[int]] = {}
        for choice in ranked:
            wanted.setdefault(choice.candidate.unit_id, []).extend(
                choice.candidate.start + offset for offset in choice.offsets
            )
        read = await messages_at(self._database, wanted)
        activated: list[ActivatedSlice] = []
        for choice in ranked:
            picked = read.get(choice.candidate.unit_id)
            if picked is None:
                continue  # the unit is gone or erased
            positions = [choice.candidate.start + offset for offset in choice.offsets]
            kept = [position for position in positions if position in picked]
            if kept:
                activated.append(
                    _activated(
                        core_id, choice.candidate, choice.score, choice.why, kept, picked, explain, zone
                    )
                )
        return activated

    async def _search_support(self) -> SearchSupport:
        """What the server offers, probed on the first recall and remembered."""
        if self._support is None:
            self._support = await self._store.search_support()
        return self._support

    def _search_channels(
        self, core_id: str, query: str, vector: list[float] | None, support: SearchSupport, plan: Plan
    ) -> dict[str, Any]:
        """The MongoDB Search queries to send beside the lookup (none without MongoDB Search)."""
        window: dict[str, Any] = {"since": plan.since, "until": plan.until, "limit": plan.per_channel}
        channels: dict[str, Any] = {}
        if support.vector and vector is not None:
            pipeline = vector_pipeline(core_id, vector, projection=plan.projection(), **window)
            channels["vector"] = self._store.search(pipeline)
        if support.text and query.strip():
            channels["search"] = self._store.search(
                text_pipeline(core_id, query, projection=plan.projection(), **window)
            )
        return channels

    async def topics(self, core_id: str) -> list[TopicNode]:
        """The core's topic tree: every node with slices under it, in path order."""
        core_id = require_id(core_id, "core_id")
        return [TopicNode(path=path, slices=count) for path, count in await self._store.nodes(core_id)]


def _activated(
    core_id: str,
    candidate: Candidate,
    score: float,
    why: dict[str, float],
    kept: list[int],
    picked: dict[int, Message],
    explain: bool,
    zone: ZoneInfo,
) -> ActivatedSlice:
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
        score=score,
        messages=tuple(picked[position] for position in kept),
        positions=tuple(kept),
        why=dict(why) if explain else None,
    )


def _candidates(found: dict[str, list[dict[str, Any]]]) -> list[Candidate]:
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    ranks: dict[tuple[str, str], dict[str, int]] = {}
    for channel, documents in found.items():
        for place, document in enumerate(documents, start=1):
            key = (document["unit_id"], document["slice_id"])
            rows.setdefault(key, document)
            ranks.setdefault(key, {})[channel] = place
    return [_candidate(rows[key], ranks[key]) for key in rows]


def _candidate(document: dict[str, Any], ranks: dict[str, int]) -> Candidate:
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
        topic=document.get("topic") or "",
        profile=TopicProfile(**{key: float(value) for key, value in profile.items() if key in _PROFILE}),
        text=float(document.get("text") or 0.0),
        marks={
            term: [(int(o), float(w)) for o, w in marks]
            for term, marks in (document.get("marks") or {}).items()
        },
        ranks=ranks,
    )


_PROFILE = ("activation", "diffusion", "independence")


def _finding(present: dict[str, int]) -> list[str]:
    """The rarest query terms, those a bounded scan can find candidates with (at least one, if any)."""
    rarest = sorted(present, key=lambda term: (present[term], term))
    usable = [term for term in rarest if present[term] <= COMMON_TERM_SLICES]
    return (usable or rarest[:1])[:MATCH_TERM_LIMIT]


def _topics(nodes: dict[str, int], query_terms: list[str]) -> list[str]:
    """The topic nodes the query names best: most of the node's own name in the query, deepest first."""
    wanted = set(query_terms)

    def named(path: str) -> float:
        last = terms(parts(path)[-1])
        return sum(1 for word in last if word in wanted) / max(len(last), 1)

    scored = [(named(path), path.count(SEPARATOR), path) for path, count in nodes.items() if count > 0]
    scored = [item for item in scored if item[0] >= 1.0]
    scored.sort(key=lambda item: (-item[0], -item[1], item[2]))
    return [path for _, _, path in scored[:TOPIC_CUES]]


def _given_topics(given: Sequence[Cue]) -> list[str]:
    paths = [cue.path for cue in given if isinstance(cue, TopicCue)]  # checked by _checked_cues
    return list(dict.fromkeys(SEPARATOR.join(parts(path)) for path in paths))


def _parent(path: str) -> str:
    return SEPARATOR.join(parts(path)[:-1])


def _range(cue: DateCue, zone: ZoneInfo) -> tuple[datetime, datetime]:
    start = datetime.combine(cue.start, time(), tzinfo=zone).astimezone(UTC)
    end = datetime.combine(cue.end, time(), tzinfo=zone).astimezone(UTC)
    return start, end


def _checked_cues(cues: Sequence[Cue] | None) -> list[Cue] | None:
    if cues is None:
        return None
    if isinstance(cues, str | bytes) or not isinstance(cues, Sequence):
        raise InvalidInput(f"cues must be a list of DateCue and TopicCue, got {type(cues).__name__}")
    for cue in cues:
        if not isinstance(cue, DateCue | TopicCue):
            raise InvalidInput(f"a cue must be a DateCue or a TopicCue, got {type(cue).__name__}")
        if isinstance(cue, TopicCue):
            parts(cue.path)
        elif not all(type(day) is date for day in (cue.start, cue.end)):  # a datetime is a date too
            kinds = f"{type(cue.start).__name__} and {type(cue.end).__name__}"
            raise InvalidInput(f"a date cue's start and end must be dates (not datetimes), got {kinds}")
        elif not cue.start < cue.end:
            raise InvalidInput(f"a date cue's start must be before its end, got {cue.start} to {cue.end}")
    return list(cues)


def _aware(value: object, what: str) -> datetime | None:
    """An aware datetime as UTC, or None: a naive one is refused (recall reads days in a time zone, so a time
    without one would be ambiguous)."""
    if isinstance(value, datetime) and value.utcoffset() is None:
        raise InvalidInput(
            f"{what} must be an aware datetime (with a time zone), got naive {value.isoformat()}"
        )
    return optional_datetime(value, what)


def _bounded(value: object, what: str, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise InvalidInput(f"{what} must be an integer from 1 to {most}, got {value!r}")
    return value


def _zone(value: object) -> ZoneInfo:
    if isinstance(value, ZoneInfo):
        return value
    if isinstance(value, str):
        try:
            return ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise InvalidInput(f"unknown time zone {value!r}") from exc
    raise InvalidInput(f"tz must be a ZoneInfo or a zone name, got {type(value).__name__}")


__all__ = ["ActivatedSlice", "Cue", "MemoryRecall", "TopicCue", "TopicNode"]

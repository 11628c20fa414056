"""MemoryRecall: Partner's recall, from a query to the slices it is about and their raw messages.

A recall is three round trips whatever the history's size (:mod:`.queries`): the counts (each query term's
slice count, the core's counters, the topic nodes the query names; MongoDB Search beside them where the
server has it), the candidates of every channel (core and time filters applied *before* ranking, in each
channel's ``$match``), and the chosen messages of the activated slices. Ranking in between is
:func:`.scoring.rank`, a pure function. A slice whose unit is gone or erased is dropped when its messages
cannot be read, so nothing erased comes back, even before the indexer has been told.

With an embedder it is four: the codes of the core's slices go with the counts (or ``$vectorSearch``, where
the server has it), the nearest by code with the other channels' candidates, then the message vectors of the
best slices (ranked once without them), then the messages. The embedder must be the one the core's vectors
are of (:class:`~partner_repo.errors.EmbedderMismatch` otherwise, before anything is ranked). It embeds the
query twice in one call when the query writes proper names, with and without them; the counts say which
one the core's vectors meet (:meth:`_Query.among`).

What the query's wording says beyond its terms is read by rules, at no round trip: its date cues
(:mod:`.cues`, which find by date), its stressed words (:mod:`.emphasis`, which weigh more) and the times
it names relative to an event (:func:`_around_events`: the event found among the candidates, the slices
around it placed in the date channel).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from partner_repo.clock import to_utc_ms, utc_now
from partner_repo.errors import EmbedderMismatch, InvalidInput
from partner_repo.mongo import RECALL_INDEX, driver
from partner_repo.recall import _arguments as arguments
from partner_repo.recall._answers import (
    ActivatedSlice,
    TopicNode,
    TopicPage,
    activated,
    candidates,
    tree_nodes,
    wanted_positions,
)
from partner_repo.recall._arguments import Asked, Cue, TopicCue
from partner_repo.recall._channels import CHANNEL_LIMIT_FLOOR, MATCH_TERM_LIMIT, TOPIC_CUES, Plan
from partner_repo.recall._cues import BARE_EVENT_DAYS, DateCue, EventCue, date_cues, event_cues
from partner_repo.recall._emphasis import emphasized, unnamed
from partner_repo.recall._queries import COMMON_TERM_SLICES, Lookup, NamedNode, RecallQueries
from partner_repo.recall._scoring import Candidate, Ranked, RecallWeights, best_slices, rank
from partner_repo.recall._search import SearchSupport, probe, text_pipeline, vector_pipeline
from partner_repo.recall._terms import terms
from partner_repo.recall._topics import SEPARATOR, normalized, parts
from partner_repo.recall._vectors import (
    RESCORED,
    CodeScorer,
    Embedder,
    Identity,
    Similarity,
    checked_embedder,
    embed,
    embedder_name,
    read_int8,
)
from partner_repo.recall._weights import Tokenizer, idf
from partner_repo.units import messages_at
from partner_repo.validation import require_id

TOPIC_PAGE_LIMIT = 1000
"""The most topic nodes :meth:`MemoryRecall.topic_page` reads at once."""


SIMILAR_EXTRA = 10
"""With an embedder, the slices whose message vectors are read: the ``limit`` best, and this many more (the
messages within the budget are chosen among theirs)."""


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
        self._database = database
        self._embedder = checked_embedder(embedder)
        self._support: SearchSupport | None = None if search is None else SearchSupport()
        self._queries = RecallQueries(database)
        self._weights = weights or RecallWeights()
        self._tokenizer = tokenizer
        self._tz = arguments.zone(tz)
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
        asked = arguments.checked(
            core_id,
            query,
            limit=limit,
            max_messages=max_messages,
            since=since,
            until=until,
            cues=cues,
            now=arguments.aware(now, "now") or to_utc_ms(self._clock()),
            tz=self._tz if tz is None else tz,
        )
        query_terms = list(dict.fromkeys(self._tokenizer(asked.query)))
        support = await self._search_support()
        embedded = await self._query_vector(asked.query)
        plan, found, embedded = await self._counted(asked, query_terms, embedded, support)
        found.update(await self._queries.candidates(asked.core_id, plan))
        if embedded is not None and plan.nearest is not None:
            found["vector"] = _rescored(found.get("vector", []), embedded.vector, plan.per_channel)
        ranked = await self._ranked(asked, plan, found, embedded)
        read = await messages_at(self._database, wanted_positions(ranked), core_id=asked.core_id)
        return activated(asked.core_id, ranked, read, explain=explain, zone=asked.zone)

    async def topics(self, core_id: str) -> list[TopicNode]:
        """The core's topic tree: every node with slices under it, in path order, each with its readable
        path, its slice count and (when it differs) the path the index matches it by."""
        core_id = require_id(core_id, "core_id")
        return tree_nodes(await self._queries.tree(core_id))

    async def slice_topics(self, core_id: str, slices: Sequence[tuple[str, str]]) -> dict[str, str]:
        """The topic path of each of these slices (``(unit_id, slice_id)``, at most
        :data:`TOPIC_PAGE_LIMIT`) the index holds, by slice id: what labels a page of a core's slices."""
        core_id = require_id(core_id, "core_id")
        if len(slices) > TOPIC_PAGE_LIMIT:
            raise InvalidInput(f"at most {TOPIC_PAGE_LIMIT} slices at once, got {len(slices)}")
        wanted = [
            (require_id(unit_id, "unit_id"), require_id(slice_id, "slice_id")) for unit_id, slice_id in slices
        ]
        return await self._queries.slice_topics(core_id, wanted)

    async def topic_page(self, core_id: str, *, after: str | None = None, limit: int = 100) -> TopicPage:
        """A page of the core's topic tree, as :meth:`topics` has it but at most ``limit`` nodes (in the
        order of their ids, which is path order), after the node whose path (its key) is ``after``: what a
        page showing a core reads, the same ``limit`` nodes however large the tree has grown."""
        core_id = require_id(core_id, "core_id")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= TOPIC_PAGE_LIMIT:
            raise InvalidInput(f"limit must be an integer from 1 to {TOPIC_PAGE_LIMIT}, got {limit!r}")
        if after is not None and not isinstance(after, str):
            raise InvalidInput(f"after must be a topic path, got {type(after).__name__}")
        rows, more = await self._queries.tree_page(core_id, after, limit)
        nodes = tree_nodes([row for row in rows if row["slices"] > 0])
        return TopicPage(nodes=nodes, after=rows[-1]["node"] if more and rows else None)

    async def _counted(
        self, asked: Asked, query_terms: list[str], query: _Query | None, support: SearchSupport
    ) -> tuple[Plan, dict[str, list[dict[str, Any]]], _Query | None]:
        """Round trip 1 (the counts, the named nodes, the core's vector codes or MongoDB Search beside them),
        the plan of round trip 2 it makes, with what MongoDB Search found, and the query's vector: without
        the names it writes when most of the core's slices say each of them (:meth:`_Query.among`)."""
        plan = Plan(
            idf={term: 0.0 for term in query_terms},
            finding=[],
            topics=[],
            parents=[],
            ranges=[],
            since=asked.since,
            until=asked.until,
            per_channel=max(CHANNEL_LIMIT_FLOOR, 2 * asked.limit),
        )
        extra = self._search_channels(asked, query, support, plan)
        if query is not None and not support.vector:
            extra["codes"] = self._queries.codes(asked.core_id, query.identity.tag)
        names = _names(query_terms, asked.cues)
        reads = self._queries.lookup(asked.core_id, query_terms, names)
        answers = await asyncio.gather(*reads, *extra.values())
        lookup = RecallQueries.looked_up(query_terms, answers[: len(reads)])
        found = dict(zip(extra, answers[len(reads) :], strict=True))
        if query is not None and lookup.embedder is not None and lookup.embedder != query.identity:
            raise EmbedderMismatch(asked.core_id, lookup.embedder.describe(), query.identity.describe())
        stressed = emphasized(asked.query, self._tokenizer)
        plan = _planned(plan, asked, query_terms, lookup, stressed, self._weights.emphasis)
        if query is not None:
            query = query.among(lookup, self._tokenizer)
        codes = found.pop("codes", None)
        if codes is not None:
            plan = replace(plan, nearest=CodeScorer(query.vector).best(codes, RESCORED) if query else [])
        return plan, found, query

    async def _ranked(
        self, asked: Asked, plan: Plan, found: dict[str, list[dict[str, Any]]], query: _Query | None
    ) -> list[Ranked]:
        """The candidates ranked; with an embedder, the best slices again with their messages' similarity to
        the query (round trip 3 reads their message vectors)."""
        found_candidates = candidates(found)
        if asked.cues is None:
            events = event_cues(asked.query, now=asked.now, tz=asked.zone)
            found_candidates = _around_events(found_candidates, events, plan.idf, self._tokenizer)
        if query is not None and found_candidates:
            count = asked.limit + SIMILAR_EXTRA
            best = best_slices(found_candidates, now=asked.now, count=count, weights=self._weights)
            keys = [(candidate.unit_id, candidate.slice_id) for candidate in best]
            vectors = await self._queries.message_vectors(asked.core_id, keys, query.identity.dimensions)
            similarity_to = Similarity(query.vector)
            found_candidates = [_similar(candidate, vectors, similarity_to) for candidate in best]
        return rank(
            found_candidates,
            plan.idf,
            now=asked.now,
            limit=asked.limit,
            max_messages=asked.max_messages,
            weights=self._weights,
        )

    async def _query_vector(self, query: str) -> _Query | None:
        """The query's vector, and in the same call its vector without the names it writes (if any)."""
        if self._embedder is None or not query.strip():
            return None
        text, names = unnamed(query)
        texts = [query, text] if names and text else [query]
        vectors = await embed(self._embedder, texts)
        identity = Identity(embedder_name(self._embedder), len(vectors[0]))
        if len(vectors) == 1:
            return _Query(vectors[0], identity)
        return _Query(vectors[0], identity, unnamed=vectors[1], names=tuple(names))

    async def _search_support(self) -> SearchSupport:
        """What the server offers, probed on the first recall and remembered."""
        if self._support is None:
            self._support = await probe(self._database[RECALL_INDEX])
        return self._support

    def _search_channels(
        self, asked: Asked, query: _Query | None, support: SearchSupport, plan: Plan
    ) -> dict[str, Any]:
        """The MongoDB Search queries to send beside the counts (none without MongoDB Search)."""
        window: dict[str, Any] = {"since": plan.since, "until": plan.until, "limit": plan.per_channel}
        channels: dict[str, Any] = {}
        if support.vector and query is not None:
            pipeline = vector_pipeline(
                asked.core_id, query.vector, tag=query.identity.tag, projection=plan.projection(), **window
            )
            channels["vector"] = self._queries.search(pipeline)
        if support.text and asked.query.strip():
            channels["search"] = self._queries.search(
                text_pipeline(asked.core_id, asked.query, projection=plan.projection(), **window)
            )
        return channels


@dataclass(frozen=True)
class _Query:
    """The query's vector, the embedder that made it, and the vector of the query without the proper names
    it writes (``names``), when it writes any."""

    vector: list[float]
    identity: Identity
    unnamed: list[float] | None = None
    names: tuple[str, ...] = ()

    def among(self, lookup: Lookup, tokenizer: Tokenizer) -> _Query:
        """The query as this core's vectors should meet it: without its names when each is said in more
        than half of the core's slices (a speaker's name, in a conversation between two people: it tells
        the vector only who talks, and draws it to every message that greets them, while
        ``RecallWeights.speaker`` already weighs what they said); else as asked."""
        if self.unnamed is None or lookup.slices <= 0:
            return self
        terms = [term for name in self.names for term in tokenizer(name)]
        common = [
            lookup.frequencies.get(term, 0) > min(lookup.slices / 2, COMMON_TERM_SLICES) for term in terms
        ]
        if terms and all(common):
            return _Query(self.unnamed, self.identity)
        return self


def _rescored(rows: list[dict[str, Any]], vector: list[float], limit: int) -> list[dict[str, Any]]:
    """The vector channel's rows (the nearest by code) by the cosine similarity of their vectors, the best
    ``limit``; their vectors are not kept."""
    similarity_to = Similarity(vector)
    scored = []
    for row in rows:
        similarity = similarity_to(read_int8(row.pop("vector", None)))
        if similarity > 0:
            scored.append((similarity, row))
    scored.sort(key=lambda item: (-item[0], item[1]["unit_id"], item[1]["slice_id"]))
    return [row for _, row in scored[:limit]]


def _similar(
    candidate: Candidate, vectors: dict[tuple[str, str], list[Sequence[int]]], query: Similarity
) -> Candidate:
    """``candidate`` with each message's similarity to the query (none when its vectors are missing or of
    another size than its span: a slice indexed without vectors)."""
    found = vectors.get((candidate.unit_id, candidate.slice_id))
    if not found or len(found) != candidate.end - candidate.start:
        return candidate
    return replace(candidate, similarities=[query(vector) for vector in found])


def _around_events(
    found: list[Candidate], cues: list[EventCue], weights: dict[str, float], tokenizer: Tokenizer
) -> list[Candidate]:
    """The candidates, those in the days an event cue names around its event with a place in the date
    channel (nearest the event first). The event is the candidate whose messages say the cue's event words
    most (by their weights); a cue whose event no candidate says narrows nothing, and a slice a date cue
    already placed keeps its place."""
    for cue in cues:
        words = [term for term in dict.fromkeys(tokenizer(cue.event)) if term in weights]
        said = [_says(candidate, words, weights) for candidate in found]
        if max(said, default=0.0) <= 0:
            continue
        event = found[said.index(max(said))]  # the first of equals
        reach = timedelta(days=BARE_EVENT_DAYS if cue.days is None else cue.days)
        start, end = (
            (event.began_at - reach, event.ended_at)
            if cue.before
            else (event.began_at, event.ended_at + reach)
        )
        inside = [
            index
            for index, candidate in enumerate(found)
            if candidate.ended_at >= start and candidate.began_at <= end and "date" not in candidate.ranks
        ]
        inside.sort(key=lambda index: (abs((found[index].began_at - event.began_at).total_seconds()), index))
        for place, index in enumerate(inside, start=1):
            found[index] = replace(found[index], ranks={**found[index].ranks, "date": place})
    return found


def _says(candidate: Candidate, words: list[str], weights: dict[str, float]) -> float:
    """How much the messages of ``candidate`` say ``words``: each word's weight times its best mark."""
    marks = candidate.marks
    return sum(weights[term] * max((mark for _, mark in marks.get(term, ())), default=0.0) for term in words)


def _names(query_terms: list[str], cues: list[Cue] | None) -> list[str]:
    """What round trip 1 looks nodes up by: the query's words, or the caller's topic cues."""
    if cues is None:
        return query_terms
    return [normalized(cue.path) for cue in cues if isinstance(cue, TopicCue)]


def _planned(
    plan: Plan, asked: Asked, query_terms: list[str], lookup: Lookup, stressed: set[str], emphasis: float
) -> Plan:
    """Round trip 2's plan from what round trip 1 counted: each term weighs its inverse document frequency,
    ``emphasis`` times that when the query stresses it (:mod:`.emphasis`)."""
    present = {term: count for term, count in lookup.frequencies.items() if count > 0}
    dated = (
        date_cues(asked.query, now=asked.now, tz=asked.zone)
        if asked.cues is None
        else [cue for cue in asked.cues if isinstance(cue, DateCue)]
    )
    topics = _named(lookup.nodes, query_terms) if asked.cues is None else _cued(asked.cues, lookup.nodes)
    ranges = [arguments.day_range(cue, asked.zone) for cue in dated]
    return replace(
        plan,
        idf={
            term: idf(count, lookup.slices) * (emphasis if term in stressed else 1.0)
            for term, count in present.items()
        },
        finding=_finding(present),
        topics=topics,
        parents=sorted({_parent(path) for path in topics if SEPARATOR in path}),
        ranges=ranges,
        days=_days(ranges),
        last_seq=lookup.last_seq,
        newest=not present and not topics and not ranges,
    )


def _finding(present: dict[str, int]) -> list[str]:
    """The rarest query terms, those a bounded read can find candidates with (at least one, if any)."""
    rarest = sorted(present, key=lambda term: (present[term], term))
    usable = [term for term in rarest if present[term] <= COMMON_TERM_SLICES]
    return (usable or rarest[:1])[:MATCH_TERM_LIMIT]


def _named(nodes: list[NamedNode], query_terms: list[str]) -> list[str]:
    """The topic nodes the query names: every word of the node's own name in the query, deepest first."""
    wanted = set(query_terms)
    named = [node for node in nodes if node.slices > 0 and node.words and set(node.words) <= wanted]
    named.sort(key=lambda node: (-node.depth, node.path))
    return list(dict.fromkeys(node.path for node in named))[:TOPIC_CUES]


def _cued(cues: list[Cue], nodes: list[NamedNode]) -> list[str]:
    """The paths the caller's topic cues name: a node's path, or the path of the node a cue names by its
    readable label."""
    paths = [normalized(cue.path) for cue in cues if isinstance(cue, TopicCue)]
    labelled = {node.label: node.path for node in nodes}
    return list(dict.fromkeys(labelled.get(path, path) for path in paths))


def _parent(path: str) -> str:
    return SEPARATOR.join(parts(path)[:-1])


def _days(ranges: list[tuple[datetime, datetime]]) -> list[int]:
    """The UTC days (ordinals) the ranges touch: what the date channel looks slices up by."""
    days: set[int] = set()
    for start, end in ranges:
        first, last = start.astimezone(UTC).date(), (end - timedelta(microseconds=1)).astimezone(UTC).date()
        days.update(range(first.toordinal(), last.toordinal() + 1))
    return sorted(days)


__all__ = [
    "MemoryRecall",
]

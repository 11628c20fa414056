"""RecallIndexer: the AfterRolling consumer that builds the recall index from the rolls.

Register it with a listener and every roll of every process reaches it (``recall-index``); give it a
listener group of its own started from the beginning and it indexes every slice already stored (backfill is
just a new group: ``partner-repo listen --group recall --start-from beginning --recall``). It indexes a
slice's summary **and** its raw messages, its topic path (from a pluggable :class:`~.topics.TopicExtractor`),
its profile and its time span.

At-least-once delivery is safe: the slice's own document is the fence of every write (:mod:`.store`), a
revision already indexed is not indexed again (its topic extractor is not asked twice) and one older than
it is ignored, so a redelivery, or a delivery after a crash, leaves the index as one delivery leaves it. A
re-summarized slice (a new ``revision``) replaces what was indexed. ``on_erased`` removes every slice of the
erased units and every topic node only they held.

Indexing a slice costs three round trips (its document and its core's, the core's last slices, one ordered
bulk write) plus the topic extractor's call, whatever the core's history.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, get_args

from partner_repo.callables import Progress
from partner_repo.clock import utc_now
from partner_repo.errors import EmbedderMismatch, InvalidInput
from partner_repo.events import Erasure, RollingResult
from partner_repo.models import Message, Role
from partner_repo.recall._keys import SLICE, slice_key
from partner_repo.recall._reindexing import MAX_PAGE, PAGE, ReindexReport, reindex
from partner_repo.recall._store import RecallStore, Stored
from partner_repo.recall._terms import readable_words, terms
from partner_repo.recall._topics import (
    KeywordTopics,
    Topic,
    TopicExtractor,
    TopicRequest,
    ancestors,
    extract,
    keywords,
    normalized,
)
from partner_repo.recall._vectors import Embedder, Identity, checked_embedder, embedder_name, slice_vectors
from partner_repo.recall._weights import (
    Tokenizer,
    idf,
    message_text,
    slice_terms,
    speaker_offsets,
    stored_marks,
)
from partner_repo.units import MemoryUnitRepository
from partner_repo.validation import require_id

ROLES = get_args(Role)
"""The roles a message may have: a summary prefixes sentences with them (``user: ...``), and a speaker's name
labels what they said; neither is what a slice is about, so neither is a topic."""

NAME = "recall-index"
MAX_DAYS = 366
"""The most days a slice's document lists (a conversation spanning more keeps its first and last)."""


class RecallIndexer:
    """An AfterRolling consumer (name ``recall-index``) that indexes each slice for :class:`MemoryRecall`.

    ``topics``: the topic extractor (default :class:`~.topics.KeywordTopics`, offline); ``tokenizer``: the
    same one :class:`MemoryRecall` uses (default :func:`.terms.terms`); ``embedder`` (optional, see
    :mod:`.vectors`): when given, each slice also stores the vector of its summary and messages."""

    def __init__(
        self,
        database: Any,
        *,
        topics: TopicExtractor | None = None,
        tokenizer: Tokenizer = terms,
        embedder: Embedder | None = None,
        name: str = NAME,
    ) -> None:
        self.name = name
        self._database = database
        self._embedder = checked_embedder(embedder)
        self._store = RecallStore(database)
        self._units = MemoryUnitRepository(database)
        self._topics: TopicExtractor = topics or KeywordTopics()
        self._tokenizer = tokenizer

    async def consume(self, result: RollingResult) -> None:
        """Index the slice of ``result`` (again, when it is a newer revision of one already indexed).

        A revision already indexed is not indexed again (its topic would be asked for again, and an extractor
        may answer differently), and an older revision than the one indexed is ignored.

        Fenced against an erasure of the slice's unit that ran meanwhile, whoever calls it (a listener, or a
        service indexing its own rolls in process, as the MCP server does): once written, the unit is looked
        at, and if it holds an erasure's tombstone what was just written is removed again. An erasure
        tombstones a unit before it removes the unit's index entries, so a write that lands after that removal
        always finds the tombstone; a write that lands before it is removed by the erasure itself."""
        stored = await self._store.stored(result.core_id, result.unit_id, result.slice_id)
        if stored.revision is not None and stored.revision >= result.revision:
            return  # delivered again, or a late delivery of an older summary: what is indexed stays
        document, labels, embedder = await self._document(result, stored)
        written = await self._store.put(document, stored, labels, embedder)
        if written and await self._units.erased([result.unit_id]):
            await self._store.remove_units(result.core_id, [result.unit_id])

    async def reindex(
        self,
        core_id: str | None = None,
        *,
        page: int = PAGE,
        progress: Progress | None = None,
        report: ReindexReport | None = None,
    ) -> ReindexReport:
        """Embed again, with this indexer's embedder, every indexed slice of ``core_id`` (of every core when
        None) that has no vectors of it: slices indexed before an embedder was given, or with another one
        (the core's vectors are replaced; :mod:`.reindexing`). ``page`` slices are embedded in one call;
        ``progress`` is called with (slices done, slices in all); ``report``, when given, is kept up to date
        (where an interrupted run stopped: run it again to finish, nothing is embedded twice)."""
        if self._embedder is None:
            raise InvalidInput("reindex needs an embedder: RecallIndexer(database, embedder=...)")
        if isinstance(page, bool) or not isinstance(page, int) or not 1 <= page <= MAX_PAGE:
            raise InvalidInput(f"page must be an integer from 1 to {MAX_PAGE}, got {page!r}")
        cores = None if core_id is None else [require_id(core_id, "core_id")]
        chosen = report if report is not None else ReindexReport()
        return await reindex(
            self._database, self._store, self._embedder, cores, page=page, progress=progress, report=chosen
        )

    async def on_erased(self, erasure: Erasure) -> None:
        """Remove every indexed slice of the erased units."""
        await self._store.remove_units(erasure.core_id, list(erasure.unit_ids))

    async def _document(
        self, result: RollingResult, stored: Stored
    ) -> tuple[dict[str, Any], dict[str, str], Identity | None]:
        """The slice's document, the readable label of each topic node it sits under, and the embedder its
        vectors are of (None without an embedder)."""
        piece = result.memory_slice
        messages = list(result.increment_messages)
        features = slice_terms(result.summary, messages, self._tokenizer)
        topic = await self._topic(result, messages, features.weights, stored)
        path, shown = normalized(topic.path), normalized(topic.shown)
        nodes = ancestors(path)
        labels = dict(zip(nodes, ancestors(shown), strict=True))
        created = piece.created_at or utc_now()
        began, ended = _span(messages, created)
        document: dict[str, Any] = {
            "_id": slice_key(result.unit_id, result.slice_id),
            "kind": SLICE,
            "core_id": result.core_id,
            "unit_id": result.unit_id,
            "slice_id": result.slice_id,
            "revision": result.revision,
            "seq": stored.seq or stored.last_seq + 1,
            "summary": result.summary,
            "start": piece.start_index or 0,
            "end": piece.end_index or 0,
            "first_position": piece.first_position,
            "created_at": created,
            "began_at": began,
            "ended_at": ended,
            "days": covered_days(began, ended),
            "topic": shown,
            "path": path,
            "ancestors": nodes,
            "related": list(dict.fromkeys(normalized(related) for related in topic.related)),
            "profile": {
                "activation": topic.profile.activation,
                "diffusion": topic.profile.diffusion,
                "independence": topic.profile.independence,
            },
            "terms": sorted(features.weights),
            "weights": features.weights,
            "marks": stored_marks(features.marks),
            "speakers": speaker_offsets(messages, self._tokenizer),
            "length": features.length,
            "indexed_at": utc_now(),
        }
        if self._embedder is None:
            return document, labels, None
        self._refuse_another(result.core_id, stored.embedder, None)
        texts = [message_text(message) for message in messages]
        vectors = await slice_vectors(self._embedder, result.summary, texts)
        self._refuse_another(result.core_id, stored.embedder, vectors.identity)
        document.update(vectors.fields(document["seq"]))
        return document, labels, vectors.identity

    def _refuse_another(self, core_id: str, stored: Identity | None, made: Identity | None) -> None:
        """:class:`EmbedderMismatch` when the core's vectors are of another embedder than this indexer's
        (by name before embedding, by name and dimension after): two models' vectors are never mixed."""
        assert self._embedder is not None
        if stored is None:
            return
        if made is None and stored.name == embedder_name(self._embedder):
            return
        if made is not None and made == stored:
            return
        given = made.describe() if made is not None else repr(embedder_name(self._embedder))
        raise EmbedderMismatch(core_id, stored.describe(), given)

    async def _topic(
        self, result: RollingResult, messages: list[Message], weights: dict[str, float], stored: Stored
    ) -> Topic:
        """The extractor's topic for the slice, given its keywords against the core's last slices."""
        window = await self._store.window(result.core_id, stored.last_seq, weights)
        weights_idf = {term: idf(window.frequencies.get(term, 0), window.slices + 1) for term in weights}
        texts = [result.summary, *(message_text(message) for message in messages)]
        speakers = set(self._tokenizer(" ".join([*ROLES, *(m.name for m in messages if m.name)])))
        topical = {term: weight for term, weight in weights.items() if term not in speakers}
        request = TopicRequest(
            core_id=result.core_id,
            summary=result.summary,
            messages=messages,
            keywords=keywords(topical, weights_idf),
            roots=window.roots,
            words=readable_words(*texts) if self._tokenizer is terms else {},
        )
        return await extract(self._topics, request)


def covered_days(began: datetime, ended: datetime) -> list[int]:
    """The UTC days (ordinals) a conversation from ``began`` to ``ended`` touches: what date cues find it
    by. A conversation longer than :data:`MAX_DAYS` keeps its first and last days (a bounded document)."""
    first, last = began.astimezone(UTC).date().toordinal(), ended.astimezone(UTC).date().toordinal()
    days = list(range(first, max(first, last) + 1))
    if len(days) > MAX_DAYS:
        days = days[: MAX_DAYS // 2] + days[-(MAX_DAYS // 2) :]
    return days


def _span(messages: Sequence[Message], created: datetime) -> tuple[datetime, datetime]:
    """When a slice's conversation happened: its messages' first and last ``at`` (the slice's creation time
    for messages recorded without one)."""
    times = [message.at for message in messages if message.at is not None]
    if not times:
        return created, created
    return min(times), max(times)


__all__ = ["MAX_DAYS", "NAME", "RecallIndexer", "covered_days"]

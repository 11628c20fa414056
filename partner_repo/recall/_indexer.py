"""RecallIndexer: the AfterRolling consumer that builds the recall index from the rolls.

Register it with a listener and every roll of every process reaches it (``recall-index``); give it a
listener group of its own started from the beginning and it indexes every slice already stored (backfill is
just a new group: ``partner-repo listen --group recall --start-from beginning --recall``). It indexes a
slice's summary **and** its raw messages, its topic path (from a pluggable :class:`~.topics.TopicExtractor`),
its profile and its time span.

At-least-once delivery is safe: the index's writes are set additions keyed by the slice (:mod:`.store`), a
revision already indexed is not indexed again and one older than it is ignored, and a delivery after a crash
finishes the document the crashed one was writing, so the index ends as one delivery leaves it. A
re-summarized slice (a new ``revision``) replaces what was indexed. ``on_erased`` removes every slice of the
erased units and every vocabulary entry only they held.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from partner_repo.clock import utc_now
from partner_repo.errors import InvalidInput
from partner_repo.events import Erasure, RollingResult
from partner_repo.models import Message
from partner_repo.recall._store import PENDING, RecallStore
from partner_repo.recall._terms import terms
from partner_repo.recall._topics import (
    KeywordTopics,
    TopicExtractor,
    TopicRequest,
    ancestors,
    extract,
    keywords,
)
from partner_repo.recall._vectors import Embedder, embed
from partner_repo.recall._weights import Tokenizer, idf, message_text, slice_terms

NAME = "recall-index"


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
        if embedder is not None and not callable(embedder):
            raise InvalidInput(f"embedder must be callable, got {type(embedder).__name__}")
        self.name = name
        self._embedder = embedder
        self._store = RecallStore(database)
        self._topics: TopicExtractor = topics or KeywordTopics()
        self._tokenizer = tokenizer

    async def consume(self, result: RollingResult) -> None:
        """Index the slice of ``result`` (again, when it is a newer revision of one already indexed).

        A revision already indexed is not indexed again (its topic would be asked for again, and an extractor
        may answer differently); after a crash half-way, the document that delivery was writing is finished
        as it was. An older revision than the one indexed, or than the one being written, is ignored."""
        previous = await self._store.stored(result.unit_id, result.slice_id)
        pending = (previous or {}).get(PENDING)
        if pending is not None and pending.get("revision") == result.revision:
            await self._store.put(pending, previous)
            return
        indexed = (previous or {}).get("revision")
        if isinstance(indexed, int) and indexed >= result.revision:
            return  # delivered again, or a late delivery of an older summary: what is indexed stays
        if pending is not None and int(pending.get("revision") or 0) > result.revision:
            return  # a newer summary is being written; its own redelivery finishes it
        await self._store.put(await self._document(result), previous)

    async def on_erased(self, erasure: Erasure) -> None:
        """Remove every indexed slice of the erased units."""
        await self._store.remove_units(list(erasure.unit_ids))

    async def _document(self, result: RollingResult) -> dict[str, Any]:
        piece = result.memory_slice
        messages = list(result.increment_messages)
        features = slice_terms(result.summary, messages, self._tokenizer)
        lookup = await self._store.lookup(result.core_id, features.weights)
        weights_idf = {
            term: idf(lookup.frequencies.get(term, 0), lookup.slices + 1) for term in features.weights
        }
        request = TopicRequest(
            core_id=result.core_id,
            summary=result.summary,
            messages=messages,
            keywords=keywords(features.weights, weights_idf),
            roots=await self._store.roots(result.core_id),
        )
        topic = await extract(self._topics, request)
        created = piece.created_at or utc_now()
        began, ended = _span(messages, created)
        document: dict[str, Any] = {
            "_id": {"u": result.unit_id, "s": result.slice_id},
            "core_id": result.core_id,
            "unit_id": result.unit_id,
            "slice_id": result.slice_id,
            "revision": result.revision,
            "summary": result.summary,
            "start": piece.start_index or 0,
            "end": piece.end_index or 0,
            "first_position": piece.first_position,
            "created_at": created,
            "began_at": began,
            "ended_at": ended,
            "topic": topic.path,
            "ancestors": ancestors(topic.path),
            "related": list(dict.fromkeys(topic.related)),
            "profile": {
                "activation": topic.profile.activation,
                "diffusion": topic.profile.diffusion,
                "independence": topic.profile.independence,
            },
            "terms": sorted(features.weights),
            "weights": features.weights,
            "marks": features.marks,
            "length": features.length,
            "indexed_at": utc_now(),
        }
        if self._embedder is not None:
            text = "\n".join([result.summary, *(message_text(message) for message in messages)])
            document["vector"] = (await embed(self._embedder, [text]))[0]
        return document


def _span(messages: Sequence[Message], created: datetime) -> tuple[datetime, datetime]:
    """When a slice's conversation happened: its messages' first and last ``at`` (the slice's creation time
    for messages recorded without one)."""
    times = [message.at for message in messages if message.at is not None]
    if not times:
        return created, created
    return min(times), max(times)


__all__ = ["NAME", "RecallIndexer"]

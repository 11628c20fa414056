"""Recall: finding the slices a query is about, and the raw messages they came from.

:class:`RecallIndexer` (an AfterRolling consumer, ``recall-index``) builds the index from the rolls;
:class:`MemoryRecall` answers queries over it. ``docs/recall.md`` has the model, the API and the LoCoMo
measurements.
"""

from partner_repo.recall._cues import DateCue, date_cues
from partner_repo.recall._indexer import NAME, RecallIndexer
from partner_repo.recall._scoring import RecallWeights
from partner_repo.recall._search import TEXT_INDEX, VECTOR_INDEX, SearchSupport
from partner_repo.recall._service import (
    MAX_LIMIT,
    MAX_MESSAGES,
    ActivatedSlice,
    Cue,
    MemoryRecall,
    TopicCue,
    TopicNode,
)
from partner_repo.recall._store import RecallStore
from partner_repo.recall._terms import terms
from partner_repo.recall._topics import KeywordTopics, Topic, TopicExtractor, TopicProfile, TopicRequest
from partner_repo.recall._vectors import Embedder

__all__ = [
    "ActivatedSlice",
    "Cue",
    "DateCue",
    "Embedder",
    "KeywordTopics",
    "MAX_LIMIT",
    "MAX_MESSAGES",
    "MemoryRecall",
    "NAME",
    "RecallIndexer",
    "RecallStore",
    "RecallWeights",
    "SearchSupport",
    "TEXT_INDEX",
    "Topic",
    "TopicCue",
    "TopicExtractor",
    "TopicNode",
    "TopicProfile",
    "TopicRequest",
    "VECTOR_INDEX",
    "date_cues",
    "terms",
]

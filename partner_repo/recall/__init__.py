"""Recall: finding the slices a query is about, and the raw messages they came from.

:class:`RecallIndexer` (an AfterRolling consumer, ``recall-index``) builds the index from the rolls;
:class:`MemoryRecall` answers queries over it; :class:`RecallIndexCheck` verifies (and sets again) the index's
counters. ``docs/recall.md`` has the model, the API, its costs and limits, and the LoCoMo measurements.
"""

from partner_repo.recall._answers import ActivatedSlice, TopicNode, TopicPage
from partner_repo.recall._arguments import MAX_LIMIT, MAX_MESSAGES, Cue, TopicCue
from partner_repo.recall._checking import CoreIndexCheck, CounterOff, RecallIndexCheck
from partner_repo.recall._cues import DateCue, EventCue, date_cues, event_cues
from partner_repo.recall._indexer import NAME, RecallIndexer
from partner_repo.recall._reindexing import ReindexReport
from partner_repo.recall._scoring import RecallWeights
from partner_repo.recall._search import TEXT_INDEX, VECTOR_INDEX, SearchSupport
from partner_repo.recall._service import MemoryRecall
from partner_repo.recall._store import RecallStore
from partner_repo.recall._terms import terms
from partner_repo.recall._topics import KeywordTopics, Topic, TopicExtractor, TopicProfile, TopicRequest
from partner_repo.recall._vectors import Embedder, Identity

__all__ = [
    "MAX_LIMIT",
    "MAX_MESSAGES",
    "NAME",
    "TEXT_INDEX",
    "VECTOR_INDEX",
    "ActivatedSlice",
    "CoreIndexCheck",
    "CounterOff",
    "Cue",
    "DateCue",
    "Embedder",
    "EventCue",
    "Identity",
    "KeywordTopics",
    "MemoryRecall",
    "RecallIndexCheck",
    "RecallIndexer",
    "RecallStore",
    "RecallWeights",
    "ReindexReport",
    "SearchSupport",
    "Topic",
    "TopicCue",
    "TopicExtractor",
    "TopicNode",
    "TopicPage",
    "TopicProfile",
    "TopicRequest",
    "date_cues",
    "event_cues",
    "terms",
]

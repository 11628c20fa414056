"""Recall: finding the slices a query is about, and the raw messages they came from.

:class:`RecallIndexer` (an AfterRolling consumer, ``recall-index``) builds the index from the rolls;
:class:`MemoryRecall` answers queries over it. ``docs/recall.md`` has the model, the API and the LoCoMo
measurements.
"""

from partner_repo.recall.answers import ActivatedSlice, TopicNode
from partner_repo.recall.arguments import Cue, TopicCue
from partner_repo.recall.cues import DateCue, date_cues
from partner_repo.recall.indexer import RecallIndexer
from partner_repo.recall.scoring import RecallWeights
from partner_repo.recall.search import TEXT_INDEX, VECTOR_INDEX, SearchSupport
from partner_repo.recall.service import MemoryRecall
from partner_repo.recall.terms import terms
from partner_repo.recall.topics import KeywordTopics, Topic, TopicExtractor, TopicProfile, TopicRequest
from partner_repo.recall.vectors import Embedder

__all__ = [
    "TEXT_INDEX",
    "VECTOR_INDEX",
    "ActivatedSlice",
    "Cue",
    "DateCue",
    "Embedder",
    "KeywordTopics",
    "MemoryRecall",
    "RecallIndexer",
    "RecallWeights",
    "SearchSupport",
    "Topic",
    "TopicCue",
    "TopicExtractor",
    "TopicNode",
    "TopicProfile",
    "TopicRequest",
    "date_cues",
    "terms",
]

"""Recall: finding the slices (and their raw messages) a query is about.

Groundwork of issue 23 so far: :mod:`.terms` (the tokenizer for Latin and Chinese text) and :mod:`.cues`
(date cues read from a query by rules). Both are pure; the index and ``MemoryRecall`` are still to come.
"""

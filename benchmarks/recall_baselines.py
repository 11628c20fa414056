"""The baselines recall is compared with on LoCoMo, over the same turn texts and the same tokenizer.

Each baseline returns the ``dia_id`` of at most ``budget`` turns for a question:

- **recency**: the conversation's last ``budget`` turns (what a context window keeps);
- **BM25, single turns**: the turns ranked by Okapi BM25 (``k1`` 1.2, ``b`` 0.75, the ``+1`` idf);
- **BM25, 12-turn windows**: the conversation cut into consecutive windows of 12 turns, ranked by BM25, each
  window's turns taken whole, best window first, until the budget is spent.

A turn's text is what the recall index reads of a message (:func:`partner_repo.recall._weights.message_text`:
the speaker's name and the content, a shared photo's caption included), tokenized by
:func:`partner_repo.recall._terms.terms`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

from benchmarks.locomo_data import Conversation
from partner_repo.recall import terms
from partner_repo.recall._weights import message_text

K1 = 1.2
B = 0.75
WINDOW = 12


class BM25:
    """Okapi BM25 over a fixed list of documents (lists of terms)."""

    def __init__(self, documents: Sequence[Sequence[str]], k1: float = K1, b: float = B) -> None:
        self._counts = [Counter(document) for document in documents]
        self._lengths = [len(document) for document in documents]
        self._average = sum(self._lengths) / max(1, len(documents))
        self._frequency: Counter[str] = Counter(term for counts in self._counts for term in counts)
        self._k1 = k1
        self._b = b

    def idf(self, term: str) -> float:
        count = self._frequency.get(term, 0)
        return math.log(1 + (len(self._counts) - count + 0.5) / (count + 0.5))

    def score(self, query: Sequence[str], index: int) -> float:
        counts = self._counts[index]
        norm = self._k1 * (1 - self._b + self._b * self._lengths[index] / max(self._average, 1e-9))
        total = 0.0
        for term in set(query):
            frequency = counts.get(term, 0)
            if frequency:
                total += self.idf(term) * frequency * (self._k1 + 1) / (frequency + norm)
        return total

    def ranked(self, query: Sequence[str]) -> list[int]:
        """Document indexes, best first (a stable sort: ties keep document order)."""
        scores = [self.score(query, index) for index in range(len(self._counts))]
        return sorted(range(len(scores)), key=lambda index: -scores[index])


Baseline = Callable[[str, int], list[str]]
"""``(question, budget)`` to the ``dia_id`` of at most ``budget`` turns."""


def baselines(conversation: Conversation) -> dict[str, Baseline]:
    """The three baselines over one conversation (indexes built once)."""
    turns = conversation.turns
    ids = [turn.dia_id for turn in turns]
    texts = [terms(message_text(turn.message)) for turn in turns]
    singles = BM25(texts)
    windows = [list(range(start, min(start + WINDOW, len(turns)))) for start in range(0, len(turns), WINDOW)]
    grouped = BM25([[term for index in window for term in texts[index]] for window in windows])

    def recency(question: str, budget: int) -> list[str]:
        return ids[-budget:]

    def single_turns(question: str, budget: int) -> list[str]:
        return [ids[index] for index in singles.ranked(terms(question))[:budget]]

    def twelve_turn_windows(question: str, budget: int) -> list[str]:
        chosen: list[str] = []
        for window in grouped.ranked(terms(question)):
            chosen.extend(ids[index] for index in windows[window])
            if len(chosen) >= budget:
                break
        return chosen[:budget]

    return {
        "recency (last N turns)": recency,
        "BM25, single turns": single_turns,
        f"BM25, {WINDOW}-turn windows": twelve_turn_windows,
    }


__all__ = ["BM25", "WINDOW", "Baseline", "baselines"]

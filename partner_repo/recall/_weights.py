"""What the recall index stores of a slice's text: term weights for the slice and for each of its messages.

Ranking is BM25 at two levels, a slice (its summary and every message of its span) and a message. The part
of BM25 that depends on one text (term frequency, saturated by ``k1``, normalized by length through ``b``)
is computed here, once, when the slice is indexed; the part that depends on the core (a term's inverse
document frequency) is applied at query time from the index's vocabulary. Length is normalized against a
fixed reference length rather than the core's running average, so a stored weight never has to change when
other slices arrive (and redelivering a slice writes the same weights). The constants were chosen on LoCoMo
(``docs/recall.md``): messages barely need length normalization, slices need the usual amount.

A message's terms include its speaker's ``name`` when it has one: "What did Caroline paint?" is about what
Caroline said.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from partner_repo.models import Message

Tokenizer = Callable[[str], list[str]]
"""Text to terms, the same on the indexing side and the query side (default: :func:`.terms.terms`)."""

K1 = 1.2
SLICE_B = 0.75
MESSAGE_B = 0.4
SLICE_REFERENCE_LENGTH = 250
"""Terms in a typical slice (a LoCoMo session of about 20 turns with its summary)."""
MESSAGE_REFERENCE_LENGTH = 14
"""Terms in a typical message."""


@dataclass(frozen=True)
class SliceTerms:
    """The stored text features of one slice.

    ``weights``: term → saturated, length-normalized frequency in the whole slice. ``marks``: term → the
    ``(offset, weight)`` pairs of the messages that hold it (offset from the slice's first message), so the
    messages that matter can be chosen without reading the others; stored as one string per term
    (:func:`stored_marks`). ``length``: the slice's term count.
    """

    weights: dict[str, float]
    marks: dict[str, list[tuple[int, float]]]
    length: int


def saturated(frequency: int, length: int, reference: int, b: float) -> float:
    """BM25's term-frequency part: ``f·(k1+1) / (f + k1·(1 - b + b·length/reference))``."""
    if frequency <= 0:
        return 0.0
    norm = K1 * (1 - b + b * length / reference)
    return frequency * (K1 + 1) / (frequency + norm)


def idf(document_frequency: int, documents: int) -> float:
    """BM25's inverse document frequency (the ``+1`` form: never negative, 0 only for no documents)."""
    documents = max(documents, document_frequency, 1)
    return math.log(1 + (documents - document_frequency + 0.5) / (document_frequency + 0.5))


def message_text(message: Message) -> str:
    """What of a message is indexed: its speaker's name and its content."""
    return f"{message.name}: {message.content}" if message.name else message.content


def slice_terms(summary: str, messages: Sequence[Message], tokenizer: Tokenizer) -> SliceTerms:
    """The weights and marks of a slice whose summary is ``summary`` over ``messages``."""
    whole: Counter[str] = Counter(tokenizer(summary))
    marks: dict[str, list[tuple[int, float]]] = {}
    for offset, message in enumerate(messages):
        counts = Counter(tokenizer(message_text(message)))
        whole.update(counts)
        length = sum(counts.values())
        for term, frequency in counts.items():
            weight = saturated(frequency, length, MESSAGE_REFERENCE_LENGTH, MESSAGE_B)
            marks.setdefault(term, []).append((offset, round(weight, 4)))
    length = sum(whole.values())
    weights = {
        term: round(saturated(frequency, length, SLICE_REFERENCE_LENGTH, SLICE_B), 4)
        for term, frequency in whole.items()
    }
    return SliceTerms(weights=weights, marks=marks, length=length)


def stored_marks(marks: Mapping[str, Sequence[tuple[int, float]]]) -> dict[str, str]:
    """Marks as the index stores them: per term one string of ``offset:weight`` pairs (``"0:1.1538 3:0.8"``).
    A server never looks inside (a recall projects ``marks.<term>``); a string is under half the BSON of an
    array of pairs, and one object instead of a list per message for the in-memory backend to copy."""
    return {
        term: " ".join(f"{offset}:{weight!r}" for offset, weight in pairs) for term, pairs in marks.items()
    }


def speaker_offsets(messages: Sequence[Message], tokenizer: Tokenizer) -> dict[str, str]:
    """Which messages each speaker's name said, as the index stores it: per term of a speaker's ``name``,
    one string of offsets (``"0 2 5"``). A query naming the speaker weighs their messages more."""
    said: dict[str, list[int]] = {}
    for offset, message in enumerate(messages):
        for term in dict.fromkeys(tokenizer(message.name)) if message.name else ():
            said.setdefault(term, []).append(offset)
    return {term: " ".join(map(str, offsets)) for term, offsets in said.items()}


def read_speakers(stored: Mapping[str, object]) -> dict[str, list[int]]:
    """The offsets :func:`speaker_offsets` stored (anything unreadable left out)."""
    read: dict[str, list[int]] = {}
    for term, text in stored.items():
        if isinstance(text, str):
            read[term] = [int(part) for part in text.split() if part.isdigit()]
    return read


def read_marks(stored: Mapping[str, str]) -> dict[str, list[tuple[int, float]]]:
    """The marks :func:`stored_marks` stored."""
    read: dict[str, list[tuple[int, float]]] = {}
    for term, text in stored.items():
        pairs = (pair.partition(":") for pair in str(text).split())
        read[term] = [(int(offset), float(weight)) for offset, _, weight in pairs]
    return read


__all__ = [
    "SliceTerms",
    "Tokenizer",
    "idf",
    "message_text",
    "read_marks",
    "read_speakers",
    "saturated",
    "speaker_offsets",
    "slice_terms",
    "stored_marks",
]

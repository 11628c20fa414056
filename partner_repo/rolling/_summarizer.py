"""Summarizer: what turns a rolled increment into a slice summary.

Any callable ``(messages) -> str`` will do, async or not; in production it calls an LLM (see
``docs/rolling.md``). :func:`as_async_summarizer` decides once, when a service is built, how it is called:
a coroutine function (or an object whose ``__call__`` is one) is awaited on the event loop; any other
callable runs in a worker thread (:mod:`partner_repo.callables`) so a blocking call never stalls the loop (nor
the lease renewal that runs there while it summarizes), and an awaitable it returns (a ``lambda`` around an
async function) is awaited on the loop.
The shipped :class:`ExtractiveSummarizer` is a deterministic, offline stand-in: it picks the most
representative sentences of the increment by word frequency. It needs no network and gives the same summary
for the same messages, which is what tests, demos and simulations want; it does not paraphrase or infer.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, cast

from partner_repo.callables import as_async
from partner_repo.errors import InvalidInput
from partner_repo.models import Message

SUMMARY_ON_EXCEPTION = "no summary, due to exception"
"""The summary stored when the summarizer raised (Partner's text); the error is logged with the core id."""

SUMMARY_ON_EMPTY = "no summary, due to empty summarize result"
"""The summary stored when the summarizer returned a blank string (Partner's text)."""


class Summarizer(Protocol):
    """A callable that summarizes the messages of one roll increment: async, or a plain function (run in a
    worker thread; see :func:`as_async_summarizer`)."""

    def __call__(self, messages: list[Message], /) -> Awaitable[str] | str: ...


AsyncSummarize = Callable[[list[Message]], Awaitable[object]]
"""How a service calls its summarizer: always awaited, whatever form it was given in."""


def as_async_summarizer(summarizer: object) -> AsyncSummarize:
    """``summarizer`` in the one form a service awaits, decided once (not at every roll): an async one is
    awaited on the event loop, any other callable runs in a worker thread (:mod:`partner_repo.callables`).

    Anything not callable is refused with :class:`InvalidInput` at once, instead of every roll storing the
    exception summary. What the summarizer returns is checked by the service, at each roll.
    """
    if not callable(summarizer):
        raise InvalidInput(
            f"summarizer must be callable (an async or a plain function), got {type(summarizer).__name__}"
        )
    return as_async(cast(Callable[[list[Message]], object], summarizer))


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)
_STOPWORD_TEXT = """a an and are as at be but by can do for from had has have he her him his how i i'm if in
into is it it's its just me my no not of on or our she so than that the their them then there they this to
too us was we were what when where which who why will with would you your yes ok okay"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


@dataclass(frozen=True)
class ExtractiveSummarizer:
    """Deterministic extractive summary: the ``max_sentences`` highest-scoring sentences, in dialogue order.

    A sentence scores the mean corpus frequency of its content words, so sentences about what the
    conversation keeps returning to win. Each chosen sentence is prefixed with its speaker's role; the whole
    summary is cut to ``max_chars``. A stand-in for an LLM, not a replacement.
    """

    max_sentences: int = 5
    max_chars: int = 1000

    def __post_init__(self) -> None:
        for name in ("max_sentences", "max_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInput(f"{name} must be a positive integer, got {value!r}")

    async def __call__(self, messages: list[Message], /) -> str:
        return self.summarize(messages)

    def summarize(self, messages: list[Message]) -> str:
        """The summary, computed synchronously (the async call only wraps this)."""
        sentences: list[tuple[int, str, str]] = []
        for message in messages:
            for text in _sentences(message.content):
                sentences.append((len(sentences), message.role, text))
        if not sentences:
            return ""
        frequency = Counter(word for _, _, text in sentences for word in _content_words(text))
        best = sorted(sentences, key=lambda item: (-_score(item[2], frequency), item[0]))
        chosen = sorted(best[: self.max_sentences], key=lambda item: item[0])
        summary = " ".join(f"{role}: {text}" for _, role, text in chosen)
        return _truncate(summary, self.max_chars)


def _sentences(content: str) -> list[str]:
    return [" ".join(part.split()) for part in _SENTENCE_END.split(content) if part.strip()]


def _content_words(text: str) -> list[str]:
    return [word for word in (w.lower() for w in _WORD.findall(text)) if word not in _STOPWORDS]


def _score(text: str, frequency: Counter[str]) -> float:
    words = _content_words(text)
    if not words:
        return 0.0
    return sum(frequency[word] for word in words) / len(words)


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 1, 0)].rstrip()
    return f"{cut}…"


extractive_summarizer: Summarizer = ExtractiveSummarizer()
"""The default summarizer instance (see :class:`ExtractiveSummarizer`)."""


__all__ = [
    "SUMMARY_ON_EMPTY",
    "SUMMARY_ON_EXCEPTION",
    "AsyncSummarize",
    "ExtractiveSummarizer",
    "Summarizer",
    "as_async_summarizer",
    "extractive_summarizer",
]

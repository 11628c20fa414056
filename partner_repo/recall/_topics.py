"""Topic paths of a slice: Partner's ``project->partner->memory`` tree, and the extractor that builds it.

Partner's retrieval design files every slice under a primary **topic path** (its position in a tree of
topics), a few related paths, and an activation profile (how strongly the slice should activate, how far it
diffuses to related topics, how well it stands on its own). Partner derives these with an LLM; that is a
:class:`TopicExtractor` it plugs into the :class:`~partner_repo.recall._indexer.RecallIndexer`.

The offline default, :class:`KeywordTopics`, needs no model: a slice's keywords are its terms ranked by
``tf·idf`` against the core's recent slices, and its path starts at an existing root of the tree when one of
the top keywords already is one (so a core's tree grows around what it keeps talking about), else at its
best keyword; the second keyword is the child. The next keywords become related paths. Its profile is the
neutral one: the default cannot judge activation, and a neutral profile leaves ranking to the text.

A path is the key the tree is matched by; a topic may also carry a ``label``, the same path as a person
reads it. :class:`KeywordTopics` names nodes by index terms, which are stems (``beagl->adopt``), so its label
spells them as the slice wrote them (``beagle->adopted``); a path an extractor of your own gives is usually
readable already, and its label is the path itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from partner_repo.callables import call
from partner_repo.errors import InvalidInput
from partner_repo.models import Message

SEPARATOR = "->"
MAX_DEPTH = 8
MAX_RELATED = 8


@dataclass(frozen=True)
class TopicProfile:
    """Partner's activation profile of a slice, each weight in ``[0, 1]``.

    ``activation``: how readily the slice comes to mind; ``diffusion``: how much it is worth recalling
    through a related topic; ``independence``: how well it reads without its neighbours.
    """

    activation: float = 0.5
    diffusion: float = 0.5
    independence: float = 0.5

    def __post_init__(self) -> None:
        for name in ("activation", "diffusion", "independence"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise InvalidInput(f"topic profile {name} must be a number from 0 to 1, got {value!r}")


@dataclass(frozen=True)
class Topic:
    """Where a slice sits in the topic tree: its primary path, related paths, and its profile.

    ``label``: the path as a person reads it (as many names as ``path``), when the path itself is not
    readable (the offline extractor's stems); None shows the path."""

    path: str
    related: tuple[str, ...] = ()
    profile: TopicProfile = field(default_factory=TopicProfile)
    label: str | None = None

    @property
    def shown(self) -> str:
        """What a person sees: the label, or the path."""
        return self.label if self.label is not None else self.path


@dataclass(frozen=True)
class TopicRequest:
    """What an extractor is given: the slice's summary and messages, its keywords (index terms, best first),
    the roots of the core's topic tree (those its most recent slices were filed under, the most used first)
    and ``words``, how the slice writes each of its terms (``{"adopt": "adopted"}``; empty with a tokenizer
    of your own)."""

    core_id: str
    summary: str
    messages: Sequence[Message]
    keywords: Sequence[str]
    roots: Sequence[str]
    words: Mapping[str, str] = field(default_factory=dict)


@runtime_checkable
class TopicExtractor(Protocol):
    """Gives a slice its :class:`Topic`: a coroutine function, or a plain one (run in a worker thread)."""

    def __call__(self, request: TopicRequest, /) -> Topic | Awaitable[Topic]: ...


@dataclass(frozen=True)
class KeywordTopics:
    """The offline default extractor (see the module docstring). A coroutine function with no await in it:
    it computes on the event loop (a few dozen terms sorted), where a plain function would be handed to a
    worker thread (as a blocking model client must be) only to come back."""

    depth: int = 2

    async def __call__(self, request: TopicRequest, /) -> Topic:
        keywords = list(dict.fromkeys(request.keywords))
        if not keywords:
            return Topic(path="misc")
        roots = set(request.roots)
        head = next((word for word in keywords[:8] if word in roots), keywords[0])
        rest = [word for word in keywords if word != head and not _overlapping(word, head)]
        names = [head, *rest[: self.depth - 1]]
        related = tuple(f"{head}{SEPARATOR}{word}" for word in rest[self.depth - 1 : self.depth + 2])
        label = SEPARATOR.join(request.words.get(name, name) for name in names)
        path = SEPARATOR.join(names)
        return Topic(path=path, related=related, label=None if label == path else label)


def _overlapping(word: str, head: str) -> bool:
    """Whether two CJK bigrams share a character (``记忆`` and ``忆系`` are one word's halves, not topics)."""
    return not word.isascii() and not head.isascii() and bool(set(word) & set(head))


def checked_topic(topic: object, extractor: object) -> Topic:
    """``topic`` if it is a valid :class:`Topic`, else :class:`InvalidInput` naming the extractor."""
    if not isinstance(topic, Topic):
        raise InvalidInput(f"topic extractor {extractor!r} returned {type(topic).__name__}, not a Topic")
    for path in (topic.path, *topic.related):
        parts(path)
    if topic.label is not None and len(parts(topic.label)) != len(parts(topic.path)):
        raise InvalidInput(f"topic label {topic.label!r} must name as many nodes as its path {topic.path!r}")
    if len(topic.related) > MAX_RELATED:
        raise InvalidInput(f"a topic has at most {MAX_RELATED} related paths, got {len(topic.related)}")
    return topic


async def extract(extractor: TopicExtractor, request: TopicRequest) -> Topic:
    """Run ``extractor`` (a plain function in a worker thread) and check what it gives."""
    outcome = await call(extractor, request)  # a plain function in a worker thread (partner_repo.callables)
    return checked_topic(outcome, extractor)


def parts(path: str) -> list[str]:
    """The components of a path, checked: 1 to :data:`MAX_DEPTH` non-blank names."""
    if not isinstance(path, str):
        raise InvalidInput(f"a topic path must be a string, got {type(path).__name__}")
    names = [name.strip() for name in path.split(SEPARATOR)]
    if not path.strip() or any(not name for name in names) or len(names) > MAX_DEPTH:
        raise InvalidInput(f"invalid topic path {path!r}: 1 to {MAX_DEPTH} non-blank names joined by '->'")
    return names


def ancestors(path: str) -> list[str]:
    """``a->b->c`` → ``["a", "a->b", "a->b->c"]``: every node the path goes through, itself included."""
    names = parts(path)
    return [SEPARATOR.join(names[: depth + 1]) for depth in range(len(names))]


def normalized(path: str) -> str:
    """``path`` with each name stripped (how the index stores and matches it)."""
    return SEPARATOR.join(parts(path))


def keywords(weights: Mapping[str, float], idf: Mapping[str, float], *, count: int = 12) -> list[str]:
    """A slice's terms by ``weight·idf``, best first, ``count`` of them; a tie goes to the term the text
    names first (``weights`` is in text order), so Chinese gets ``记忆`` rather than its neighbour
    ``忆系``."""
    order = {term: index for index, term in enumerate(weights)}
    ranked = sorted(weights, key=lambda term: (-round(weights[term] * idf.get(term, 0.0), 9), order[term]))
    return ranked[:count]


__all__ = [
    "KeywordTopics",
    "Topic",
    "TopicExtractor",
    "TopicProfile",
    "TopicRequest",
    "ancestors",
    "extract",
    "keywords",
    "normalized",
]

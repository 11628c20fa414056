"""The words a query stresses: proper names and quoted phrases, read by rules, weigh more in recall.

"What did Caroline take away from the book "Becoming Nicole"?" is about *Becoming Nicole*; a slice that says
"book" and "take away" a dozen times is not. BM25 alone weighs a term by how rare it is in the core, and a
title made of ordinary words ("The Four Seasons", "Little Women") is not rare. So the terms a query writes as
a name or quotes have their weight multiplied by :attr:`~.scoring.RecallWeights.emphasis` (chosen on
LoCoMo's shared half, ``docs/recall.md``), with no model and whatever the tokenizer:

- a quoted phrase: text between ``"…"``, ``“…”``, ``「…」``, ``『…』`` or ``《…》`` (a title in Chinese);
- a proper name: a word written with a capital letter that does not begin a sentence (``When`` in "When did
  Jon…" is not a name, ``Jon`` is), or an acronym of two or more capitals anywhere (``NYC``).

The phrase's words are read with the recall's tokenizer, so an emphasized term is exactly a term the index
has (stemmed as it stems, a stopword left out as it leaves it out).
"""

from __future__ import annotations

import re
import unicodedata

from partner_repo.recall._weights import Tokenizer

_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”|「([^」]+)」|『([^』]+)』|《([^》]+)》')
_WORD = re.compile(r"[^\W\d_][^\W_]*(?:'[^\W_]+)*")
_SENTENCE_END = re.compile(r"[.!?。]\s*$")  # the query is NFKC-normalized: no full-width "!" or "?"


def emphasized(query: str, tokenizer: Tokenizer) -> set[str]:
    """The terms of ``query`` it writes as a proper name or inside quotes (see the module)."""
    text = _normalized(query)
    stressed = [next(group for group in match.groups() if group) for match in _QUOTED.finditer(text)]
    stressed += [match.group() for match in _names(text)]
    return {term for phrase in stressed for term in tokenizer(phrase)}


def unnamed(query: str) -> tuple[str, list[str]]:
    """``query`` without the proper names it writes outside quotes, and those names: what an embedder is
    given when the names are the speakers' (:class:`~.service.MemoryRecall`: a name most of the core's
    slices say tells a vector only who is talking, and pulls it towards every message that greets them)."""
    text = _normalized(query)
    quoted = [match.span() for match in _QUOTED.finditer(text)]
    kept: list[str] = []
    names: list[str] = []
    last = 0
    for match in _names(text):
        if any(begin <= match.start() < end for begin, end in quoted):
            continue
        kept.append(text[last : match.start()])
        names.append(match.group())
        last = match.end()
    kept.append(text[last:])
    return " ".join("".join(kept).split()), names


def _normalized(query: str) -> str:
    return unicodedata.normalize("NFKC", query).replace("\u2019", "'")


def _names(text: str) -> list[re.Match[str]]:
    """The words of ``text`` written as a proper name: capitalized and not beginning a sentence, or an
    acronym."""
    return [
        match
        for match in _WORD.finditer(text)
        if _named(match.group()) and (_acronym(match.group()) or not _begins_sentence(text, match.start()))
    ]


def _named(word: str) -> bool:
    return word[0].isupper()


def _acronym(word: str) -> bool:
    letters = word.split("'")[0]
    return len(letters) >= 2 and letters.isupper()


def _begins_sentence(text: str, start: int) -> bool:
    before = text[:start].rstrip(" \t\"'“「『《(")
    return not before or bool(_SENTENCE_END.search(before)) or before.endswith("\n")


__all__ = ["emphasized", "unnamed"]

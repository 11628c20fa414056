"""The shipped extractive summarizer: deterministic, offline, a stand-in for an LLM."""

from __future__ import annotations

import pytest

from partner_repo import ExtractiveSummarizer, InvalidInput, Message, extractive_summarizer

DIALOGUE = [
    Message(role="user", content="I want to visit Kyoto in autumn. The maple leaves in Kyoto are famous."),
    Message(role="assistant", content="Kyoto in autumn is busy, so book early. Hi there!"),
    Message(role="user", content="Thanks."),
]


async def test_the_same_messages_give_the_same_summary() -> None:
    assert await extractive_summarizer(DIALOGUE) == await extractive_summarizer(list(DIALOGUE))


async def test_the_sentences_about_the_recurring_subject_are_chosen_in_dialogue_order() -> None:
    summary = await ExtractiveSummarizer(max_sentences=2)(DIALOGUE)
    assert (
        summary == "user: I want to visit Kyoto in autumn. assistant: Kyoto in autumn is busy, so book early."
    )


async def test_each_sentence_is_attributed_to_its_speaker() -> None:
    summary = await ExtractiveSummarizer(max_sentences=10)(DIALOGUE)
    assert summary.startswith("user: ")
    assert "assistant: Hi there!" in summary


async def test_the_summary_is_cut_to_max_chars() -> None:
    summary = await ExtractiveSummarizer(max_chars=20)(DIALOGUE)
    assert len(summary) == 20 and summary.endswith("…")


async def test_messages_without_text_give_an_empty_summary() -> None:
    assert await extractive_summarizer([Message(role="user", content="  \n ")]) == ""
    assert await extractive_summarizer([]) == ""


@pytest.mark.parametrize("changes", [{"max_sentences": 0}, {"max_chars": 0}, {"max_sentences": 2.5}])
def test_limits_must_be_positive_integers(changes: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        ExtractiveSummarizer(**changes)  # type: ignore[arg-type]

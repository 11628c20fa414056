"""The rolling API is public: exported from ``partner_repo``, the database first, errors in the hierarchy."""

from __future__ import annotations

import inspect

import partner_repo

ROLLING_NAMES = {
    "ExtractiveSummarizer",
    "LeaseLost",
    "MemoryUnitRef",
    "RollingConfig",
    "RollingResult",
    "RollingService",
    "SUMMARY_ON_EMPTY",
    "SUMMARY_ON_EXCEPTION",
    "Summarizer",
    "extractive_summarizer",
    "resolve_chat_increment",
    "roll_chat_messages",
}


def test_the_rolling_api_is_exported() -> None:
    assert set(partner_repo.__all__) >= ROLLING_NAMES


def test_the_rolling_service_takes_the_database_first_then_the_summarizer() -> None:
    assert list(inspect.signature(partner_repo.RollingService).parameters)[:3] == [
        "database",
        "summarizer",
        "config",
    ]


def test_a_lost_lease_is_a_conflict() -> None:
    assert issubclass(partner_repo.LeaseLost, partner_repo.ConflictError)
    assert issubclass(partner_repo.LeaseLost, partner_repo.PartnerRepoError)


def test_the_default_summarizer_is_an_extractive_summarizer() -> None:
    assert isinstance(partner_repo.extractive_summarizer, partner_repo.ExtractiveSummarizer)

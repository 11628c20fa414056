"""Dialog rolling: turning the live chat window into memory units and slices.

The front door is :class:`RollingService` (``_service``: ``record_and_roll``, ``maybe_roll``, ``roll``, the
idle scheduler, ``resummarize``); beside it one roll under the lease (``_leased_roll``), the increment by
position, and by Partner's content overlap (``_positions``), the plan of a roll (``_plan``),
its triggers (``_triggers``), the summarizer and its attempts (``_summarizer``, ``_summarizing``), placeholder
summaries replaced (``_resummarize``), background rolls (``_background``) and the config (``_config``). What
a roll produced, :class:`~partner_repo.events.RollingResult`, is in the ground (``partner_repo.events``).
"""

from partner_repo.rolling._config import DEFAULT_TRIGGER_BYTES, DEFAULT_UNIT_SOFT_LIMIT_BYTES, RollingConfig
from partner_repo.rolling._positions import resolve_chat_increment
from partner_repo.rolling._resummarize import DEFAULT_RESUMMARIZE_LIMIT, ResummarizedSlice, ResummarizeReport
from partner_repo.rolling._service import RollingService
from partner_repo.rolling._summarizer import (
    SUMMARY_ON_EMPTY,
    SUMMARY_ON_EXCEPTION,
    ExtractiveSummarizer,
    Summarizer,
    extractive_summarizer,
)

__all__ = [
    "DEFAULT_RESUMMARIZE_LIMIT",
    "DEFAULT_TRIGGER_BYTES",
    "DEFAULT_UNIT_SOFT_LIMIT_BYTES",
    "ExtractiveSummarizer",
    "ResummarizeReport",
    "ResummarizedSlice",
    "RollingConfig",
    "RollingService",
    "SUMMARY_ON_EMPTY",
    "SUMMARY_ON_EXCEPTION",
    "Summarizer",
    "extractive_summarizer",
    "resolve_chat_increment",
]

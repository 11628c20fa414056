"""The command line's logging: every command logs to stderr, as text lines for people or JSON lines for log
shippers, at ``--log-level`` (``PARTNER_REPO_LOG_LEVEL``, INFO by default).

The root logger gets one handler, so the library's records (the listener's "standing by", its fallback to
polling, each roll a ``LoggingConsumer`` logs) and those of the consumers and summarizers a command loads are
shown alike. Every record is masked before it is formatted
(:class:`~partner_repo.mongo._masking.SecretsFilter`), whichever logger made it, so neither format can show a
password. The command's own logging is undone when it ends, so running commands in-process (tests, an
application embedding the CLI) leaves logging as it was.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TextIO

import click

from partner_repo.mongo import SecretsFilter, scrub

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def timestamp(record: logging.LogRecord) -> str:
    """When the record was made, in ISO 8601 UTC with milliseconds (``2026-12-01T09:30:00.123Z``)."""
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class TextLines(logging.Formatter):
    """``<time> <LEVEL> <logger>: <message>``, then the traceback, if any, on the lines below."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return timestamp(record)


class JsonLines(logging.Formatter):
    """One JSON object per record, on one line: ``time``, ``level``, ``logger``, ``message``, and ``exc`` (the
    traceback) when the record carries one."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": scrub(record.getMessage()),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exc"] = scrub(record.exc_text)
        if record.stack_info:
            entry["stack"] = scrub(self.formatStack(record.stack_info))
        return json.dumps(entry, ensure_ascii=False)


CLI_LOGGER = "partner_repo.cli"
"""The logger a command's own failure line is attributed to in JSON (``--log-format json``)."""


def json_line(level: int, message: str) -> str:
    """``message`` as a JSON log line of :data:`CLI_LOGGER`, as :class:`JsonLines` formats every record: a
    command's failure line in a JSON log, printed whatever ``--log-level`` hides."""
    record = logging.LogRecord(CLI_LOGGER, level, __file__, 0, message, None, None)
    return JsonLines().format(record)


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to ``sys.stderr`` as it is when a record comes: a progress bar redirects it, so that log lines
    are printed above the bar instead of through it."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        """The stream is always the current stderr; what ``StreamHandler`` sets is ignored."""


def configure_logging(level: str, log_format: str, stream: TextIO | None = None) -> Callable[[], None]:
    """Log every record at ``level`` or above to ``stream`` (stderr) in ``log_format``; returns the function
    that undoes it."""
    root = logging.getLogger()
    handler = logging.StreamHandler(stream) if stream is not None else _Stderr()
    handler.setFormatter(JsonLines() if log_format == "json" else TextLines())
    handler.addFilter(SecretsFilter())
    previous = root.level
    root.addHandler(handler)
    root.setLevel(level.upper())

    def restore() -> None:
        root.removeHandler(handler)
        root.setLevel(previous)

    return restore


level_option = click.option(
    "--log-level",
    type=click.Choice(LEVELS, case_sensitive=False),
    default="INFO",
    envvar="PARTNER_REPO_LOG_LEVEL",
    help="Least severe log records shown on stderr [env: PARTNER_REPO_LOG_LEVEL; default: INFO].",
)
format_option = click.option(
    "--log-format",
    type=click.Choice(FORMATS, case_sensitive=False),
    default="text",
    envvar="PARTNER_REPO_LOG_FORMAT",
    help="text: lines for people; json: one JSON object per line for log shippers "
    "[env: PARTNER_REPO_LOG_FORMAT; default: text].",
)

"""What every command shares, below the root group and every subcommand: where to connect, running a command's
coroutine, and turning library errors into one line on stderr and an exit code.

Exit codes: 0 ok, 1 not found or invariant failures found, 2 usage (click's own, an unusable option value or
setting, a command that writes or runs until stopped with no database named, an argument that is no UTF-8)
and an unreachable server; 130 interrupted (Ctrl-C). Every error but click's own usage errors is one line on
stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, TypeVar

import click

from partner_repo.cli._logs import json_line
from partner_repo.errors import ConnectionFailed, InvalidInput, PartnerRepoError
from partner_repo.mongo import (
    DEFAULT_DATABASE,
    MongoDatabase,
    connect,
    database_name_problem,
    scrub,
    uri_database,
)
from partner_repo.settings import connect_from_settings, settings_for, uri_problem

T = TypeVar("T")

EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
"""128 + SIGTERM, as a shell reports a process that SIGTERM ended."""
"""Ctrl-C (SIGINT), as a shell reports a process it ended: 128 + 2."""
INTERRUPTION_NOTE = "partner_repo.interruption_note"
LOG_FORMAT = "partner_repo.log_format"
"""``ctx.meta`` key: the log format the command runs with (``text`` or ``json``)."""


Use = Literal["read", "write", "daemon"]
"""What a command does with its database: only reads it, writes to it, or runs on it until stopped."""

IMPLICIT_MEMORY = "neither --uri nor MONGODB_URI is set"
REFUSALS: dict[Use, str] = {
    "write": "writes to the database, but {why}: it would write to an empty in-memory database that is gone "
    "when the command exits",
    "daemon": "runs until stopped, but {why}: it would wait on an empty in-memory database that no other "
    "process can write to",
}
WHAT_TO_DO = "pass --uri mongodb://HOST/ or set MONGODB_URI (or --in-memory to run it there anyway)"
READ_NOTE = (
    "note: {why}: reading the embedded in-memory database, which is empty (nothing persists between commands)"
)


@dataclass
class Connection:
    """Where commands connect: ``--uri``/``--db``, else ``MONGODB_URI``/``PARTNER_REPO_DB``, else memory; the
    database, when neither ``--db`` nor ``PARTNER_REPO_DB`` names one, is the one the URI names in its path,
    else ``partner``.

    ``uri_from`` names where the URI came from (``--uri`` or ``MONGODB_URI``), for errors about it;
    ``db_from_uri`` says the database is the one the URI's path names; ``in_memory`` says the in-memory
    backend was asked for (``--in-memory``) rather than fallen back to.
    """

    uri: str | None
    db_name: str
    uri_from: str = "--uri"
    in_memory: bool = False
    db_from_uri: bool = False

    async def open(self, *, create_indexes: bool | None = None) -> MongoDatabase:
        """Connect with the production options of :mod:`partner_repo.settings` (``PARTNER_REPO_*``).

        ``create_indexes`` overrides ``PARTNER_REPO_CREATE_INDEXES`` (``migrate`` leaves them to migrations).
        Without a URI this is the in-memory backend, chosen on purpose: the command decided that
        (:func:`connection`), so the library's warning about falling back to it does not apply.
        """
        settings = settings_for(self.uri, self.db_name)
        if settings.uri is None:
            indexes = settings.create_indexes if create_indexes is None else create_indexes
            return await connect(None, settings.db, create_indexes=indexes)
        return await connect_from_settings(settings, create_indexes=create_indexes)


def resolve_connection(
    uri: str | None, db_name: str | None, environ: Mapping[str, str], *, in_memory: bool = False
) -> Connection:
    """Where to connect from ``--uri``/``--db``/``--in-memory`` and the environment; an empty or blank value
    counts as not given, for options as for variables. An option that can never work is refused at once
    (:func:`fail`); a URI from the environment is checked by :func:`connection`, when a command needs it.
    ``--in-memory`` ignores ``MONGODB_URI`` (as ``demo`` does), and cannot be combined with ``--uri``."""
    given_uri = (uri or "").strip() or None
    if given_uri is not None and (problem := uri_problem(given_uri)) is not None:
        fail(f"--uri: {problem}")
    if given_uri is not None and in_memory:
        fail("--in-memory and --uri exclude each other: give one of them")
    if db_name and (problem := database_name_problem(db_name)) is not None:
        fail(f"--db: {problem}")
    from_environment = None if in_memory else (environ.get("MONGODB_URI") or "").strip() or None
    uri = given_uri or from_environment
    named = db_name or environ.get("PARTNER_REPO_DB")
    in_uri = None if named or uri is None else uri_database(uri)
    return Connection(
        uri=uri,
        db_name=named or in_uri or DEFAULT_DATABASE,
        uri_from="--uri" if given_uri else "MONGODB_URI",
        in_memory=in_memory,
        db_from_uri=in_uri is not None,
    )


def connection(ctx: click.Context, use: Use) -> Connection:
    """The connection the root command resolved, for a command that will ``use`` it as it says.

    Its URI and the settings are checked first (a bad one is one line, exit 2). Then, when nothing named a
    database (no ``--uri``, no ``MONGODB_URI``, no ``--in-memory``), a command that writes or runs until
    stopped is refused, as its work would vanish unseen; one that reads says on stderr that it reads the
    empty in-memory database.
    """
    obj: Any = ctx.find_root().obj
    assert isinstance(obj, Connection)
    if obj.uri is not None and (problem := uri_problem(obj.uri)) is not None:
        fail(f"{obj.uri_from}: {problem}")
    if obj.db_from_uri and (problem := database_name_problem(obj.db_name)) is not None:
        fail(f"{obj.uri_from}: the database its path names: {problem}")
    settings_for(obj.uri, obj.db_name)
    if obj.uri is None and not obj.in_memory:
        if use == "read":
            click.echo(READ_NOTE.format(why=IMPLICIT_MEMORY), err=True)
        else:
            fail(f"{ctx.command_path} {REFUSALS[use].format(why=IMPLICIT_MEMORY)}; {WHAT_TO_DO}")
    return obj


def fail(message: str) -> NoReturn:
    """End the command with ``error: message`` on stderr (one line) and the usage exit code."""
    say_error(message)
    raise SystemExit(EXIT_USAGE)


def say_error(message: str) -> None:
    """``error: message``, one line on stderr; with ``--log-format json`` a JSON log line (level ERROR, logger
    ``partner_repo.cli``) like every other line there, so a log shipper reads it too."""
    _say(logging.ERROR, message, f"error: {message}")


def _say(level: int, message: str, plain: str) -> None:
    """``plain`` on stderr, or with ``--log-format json`` ``message`` as a JSON log line at ``level``."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.find_root().meta.get(LOG_FORMAT) == "json":
        click.echo(json_line(level, message), err=True)
    else:
        click.echo(plain, err=True)


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Library errors become one line on stderr and an exit code, not a traceback: 2 for what the operator
    must change (an unreachable server, a bad setting or value), 1 for the rest (not found, conflicts)."""
    try:
        yield
    except (ConnectionFailed, InvalidInput) as exc:
        fail(scrub(str(exc)))  # may quote the driver, hence the URI: scrubbed like every shown error
    except PartnerRepoError as exc:
        say_error(scrub(str(exc)))
        raise SystemExit(EXIT_NOT_FOUND) from None


def undecodable_argument(arguments: list[str]) -> str | None:
    """Why one of the command line's ``arguments`` cannot be used (bytes that are no UTF-8, which Python
    holds as lone surrogates), or ``None``. An argument naming an existing file is left to the command (the
    file system takes any bytes)."""
    for position, argument in enumerate(arguments, 1):
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            if os.path.lexists(argument.encode("utf-8", "surrogateescape")):
                continue
            shown = argument.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")
            return f"argument {position} ('{shown}') is not valid UTF-8: pass it as UTF-8 text"
    return None


def note_interruption(note: Callable[[], str | None]) -> None:
    """What a Ctrl-C of the running command should say: how far it got and whether running it again
    continues (``note`` is asked when the interruption comes; ``None`` says nothing more)."""
    click.get_current_context().meta[INTERRUPTION_NOTE] = note


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: the command stops as it does on Ctrl-C (a ``KeyboardInterrupt``, so every cleanup that
    Ctrl-C runs runs), and exits 143 instead of 130."""


@contextlib.contextmanager
def interruptions(ctx: click.Context) -> Iterator[None]:
    """Ctrl-C (``KeyboardInterrupt``, or click's ``Abort`` at a prompt) ends the command with one line on
    stderr, saying how far it got when the command noted it (:func:`note_interruption`), and exit 130;
    SIGTERM the same way, with exit 143 (commands that run until stopped answer it themselves: ``listen``
    and ``roll-idle`` stop cleanly, ``mcp`` over stdio ends at once; see ``cli/_signals.py``)."""
    try:
        with _terminating():
            yield
    except (KeyboardInterrupt, click.Abort) as exc:
        note = ctx.meta.get(INTERRUPTION_NOTE)
        said = note() if note is not None else None
        line = f"interrupted: {said}" if said else "interrupted"
        _say(logging.WARNING, line, line)  # with --log-format json, a JSON line like the rest of stderr
        raise SystemExit(EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED) from None


@contextlib.contextmanager
def _terminating() -> Iterator[None]:
    """Turn SIGTERM into :class:`Terminated` while the command runs (in the main thread, where Python runs
    signal handlers; elsewhere, as in an application that runs a command in a thread, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_async(work: Callable[[], Awaitable[T]]) -> T:
    """Run a command's coroutine; library errors become one clear line and an exit code, not a traceback."""
    with one_line_errors():
        return asyncio.run(_call(work))


async def _call(work: Callable[[], Awaitable[T]]) -> T:
    return await work()

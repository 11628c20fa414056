"""Connection strings on the wire (the installed stack's driver against a scripted mockupdb that answers
everything): an option the driver ignores costs one log line and nothing else (the command still exits 0),
and the database the URI names in its path is the one used."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from mockupdb import MockupDB, Request

from partner_repo import close_database, connect
from partner_repo.cli import main
from tests.wire.wire_support import HELLO, scripted_server


def _answer_everything(request: Request) -> bool:
    """Every read finds nothing, every other command succeeds; ``hello`` is a replica set member's."""
    name = str(next(iter(request.doc)))
    if name.lower() in ("hello", "ismaster"):
        return bool(request.replies(HELLO))
    if name in ("find", "aggregate", "listCollections", "listIndexes"):
        namespace = f"{request.doc['$db']}.{request.doc.get(name) if name == 'find' else '$cmd'}"
        return bool(request.replies({"cursor": {"id": 0, "ns": namespace, "firstBatch": []}}))
    if name == "buildInfo":
        return bool(request.replies({"version": "7.0.12", "versionArray": [7, 0, 12, 0]}))
    return bool(request.replies({"ok": 1}))


@pytest.fixture(scope="module")
def server() -> Iterator[MockupDB]:
    with scripted_server(autoresponder=_answer_everything) as mock:
        yield mock


async def test_an_ignored_option_is_one_warning_line_and_the_connection_works(
    server: MockupDB, caplog: pytest.LogCaptureFixture
) -> None:
    with warnings.catch_warnings(record=True) as shown, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        database = await connect(f"{server.uri}/?bogusOption=1", create_indexes=False)
    await close_database(database)

    # what the URI's option could warn of; a ResourceWarning is the garbage collector meeting a socket some
    # earlier test left, which it may do at any moment, this block included
    assert [str(w.message) for w in shown if not issubclass(w.category, ResourceWarning)] == []
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "MongoDB URI option 'bogusOption' is ignored"
    ]


async def test_the_database_named_in_the_uri_is_used_unless_another_is_given(server: MockupDB) -> None:
    from_uri = await connect(f"{server.uri}/agents", create_indexes=False)
    given = await connect(f"{server.uri}/agents", "chosen", create_indexes=False)
    try:
        assert (from_uri.name, given.name) == ("agents", "chosen")
    finally:
        await close_database(from_uri)
        await close_database(given)


def test_a_command_given_an_ignored_option_says_so_once_and_exits_0(server: MockupDB) -> None:
    result = CliRunner().invoke(main, ["--uri", f"{server.uri}/?bogusOption=1", "dead-letters", "list"])

    assert result.exit_code == 0, result.output
    assert result.stdout == "no dead letters\n"
    (line,) = result.stderr.splitlines()
    assert (
        "WARNING partner_repo.database: MongoDB URI option 'bogusOption' is ignored: no such option" in line
    )
    assert "UserWarning" not in result.stderr

"""Connection strings as an operator writes them: a malformed one is refused saying what is wrong with it
(credentials still masked), an option the driver cannot use is ignored with one log line naming it (as
MongoDB's drivers do) while the library's defaults still apply, and a database named in the URI's path is
the database unless ``--db``/``PARTNER_REPO_DB``/``db_name`` names another."""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any

import pytest
from click.testing import CliRunner

from partner_repo import ConnectionFailed, connect, load_settings
from partner_repo.cli import main
from partner_repo.cli._runtime import resolve_connection
from partner_repo.mongo import driver
from partner_repo.mongo._connection import DEFAULTS, client_options, ignored_uri_options, uri_database

SECRET = "s3cr3t-Pa55"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees only the variables it sets (a developer's own MONGODB_URI must not leak in)."""
    for name in list(os.environ):
        if name == "MONGODB_URI" or name.startswith("PARTNER_REPO_"):
            monkeypatch.delenv(name)


# -- a malformed URI: the reason, never the secret -----------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "shown", "reason"),
    [
        (f"mongodb://app:{SECRET}@db:notaport/", "mongodb://app:***@db:notaport/", "Port contains non-digit"),
        ("mongodb://db.example:99999/", "mongodb://db.example:99999/", "Port must be an integer between 0"),
        (f"mongodb://app:{SECRET}:x@db/", "mongodb://app:***@db/", "must be escaped according to RFC 3986"),
        ("mongodb://db/?tlsInsecure=true&tlsAllowInvalidCertificates=true", "tlsInsecure=true", "cannot be"),
    ],
    ids=["bad port", "port out of range", "unescaped colon in the password", "conflicting tls options"],
)
async def test_a_malformed_uri_is_refused_saying_what_is_wrong_with_it(
    uri: str, shown: str, reason: str
) -> None:
    with pytest.raises(ConnectionFailed) as refused:
        await connect(uri)

    message = str(refused.value)
    assert shown in message and reason in message, message
    assert SECRET not in message


async def test_a_uri_whose_host_was_forgotten_keeps_what_may_be_the_password_masked() -> None:
    with pytest.raises(ConnectionFailed) as refused:
        await connect(f"mongodb://app:{SECRET}")

    message = str(refused.value)
    assert SECRET not in message and "Port contains non-digit characters" in message
    assert "may be a password" in message


def test_the_cli_refuses_a_malformed_uri_in_one_line_with_its_reason() -> None:
    result = CliRunner().invoke(main, ["--uri", f"mongodb://app:{SECRET}@db:notaport/", "slices", "list"])

    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        "error: unusable MongoDB URI mongodb://app:***@db:notaport/: Port contains non-digit"
    )
    assert SECRET not in result.output


# -- options the driver ignores ----------------------------------------------------------------------------


def test_the_options_a_driver_ignores_are_named_with_the_reason() -> None:
    ignored = ignored_uri_options("mongodb://db/?bogusOption=1&retryWrites=flase&w=majority&appname=a")

    assert list(ignored) == ["bogusOption", "retryWrites"]
    assert ignored["bogusOption"].startswith("no such option; did you mean one of (")
    assert ignored["retryWrites"] == "the value of retrywrites must be 'true' or 'false'"


def test_an_option_the_driver_ignores_leaves_the_library_default_in_place() -> None:
    options = client_options("mongodb://db/?timeoutMS=soon&maxPoolSize=7")

    assert (
        options["timeoutMS"] == DEFAULTS["timeoutMS"]
    )  # the URI's timeoutMS is ignored: not "set by the URI"
    assert "maxPoolSize" not in options  # a usable option of the URI wins


async def test_an_ignored_option_is_one_log_line_naming_it_never_a_python_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    uri = f"mongodb://app:{SECRET}@127.0.0.1:1/?bogusOption=1&serverSelectionTimeoutMS=100"

    with warnings.catch_warnings(record=True) as shown, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        with pytest.raises(ConnectionFailed, match="cannot reach MongoDB"):
            await connect(uri)

    assert [str(w.message) for w in shown] == []
    (record,) = [r for r in caplog.records if r.name.startswith("partner_repo")]
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith("MongoDB URI option 'bogusOption' is ignored: no such option")
    assert SECRET not in caplog.text


async def test_a_warning_of_another_raised_while_the_client_is_made_is_not_logged_as_the_uris(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full ``pytest`` run meets this: the garbage collector closes another test's socket while a client is
    made, and its ``ResourceWarning`` was logged as ``MongoDB URI: unclosed <socket...>``."""
    made = driver.new_client

    def collected_meanwhile(uri: str, **options: Any) -> Any:
        warnings.warn("unclosed <socket.socket fd=9>", ResourceWarning, stacklevel=1)
        return made(uri, **options)

    monkeypatch.setattr(driver, "new_client", collected_meanwhile)

    with warnings.catch_warnings(record=True) as shown, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        with pytest.raises(ConnectionFailed, match="cannot reach MongoDB"):
            await connect("mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100")

    assert [r.getMessage() for r in caplog.records if r.name.startswith("partner_repo")] == []
    # still the warning it was, where it was raised (a real socket collected meanwhile may add its own)
    ours = [w for w in shown if str(w.message) == "unclosed <socket.socket fd=9>"]
    assert [w.category for w in ours] == [ResourceWarning]


# -- the database named in the URI -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "name"),
    [
        ("mongodb://db.example:27017/agents?w=1", "agents"),
        (f"mongodb://app:{SECRET}@h1,h2/agents", "agents"),
        ("mongodb+srv://cluster0.example.net/agents.units", "agents"),
        ("mongodb://db/my%20db", "my db"),
        ("mongodb://db/", None),
        ("mongodb://db/?w=1", None),
        ("mongodb://db", None),
    ],
)
def test_the_database_of_a_uri_is_its_path(uri: str, name: str | None) -> None:
    assert uri_database(uri) == name


@pytest.mark.parametrize(
    ("db_option", "environment", "expected"),
    [
        (None, {"MONGODB_URI": "mongodb://db/agents"}, "agents"),
        (None, {"MONGODB_URI": "mongodb://db/agents", "PARTNER_REPO_DB": "configured"}, "configured"),
        ("chosen", {"MONGODB_URI": "mongodb://db/agents", "PARTNER_REPO_DB": "configured"}, "chosen"),
        (None, {"MONGODB_URI": "mongodb://db/"}, "partner"),
        (None, {}, "partner"),
    ],
    ids=["the URI's", "PARTNER_REPO_DB over the URI's", "--db over both", "none in the URI", "in memory"],
)
def test_the_cli_uses_the_uri_s_database_unless_db_or_partner_repo_db_names_one(
    db_option: str | None, environment: dict[str, str], expected: str
) -> None:
    assert resolve_connection(None, db_option, environment).db_name == expected


def test_the_settings_use_the_uri_s_database_unless_partner_repo_db_names_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MONGODB_URI", "mongodb://db.example/agents")
    from_uri = load_settings()
    monkeypatch.setenv("PARTNER_REPO_DB", "configured")

    assert (from_uri.db, from_uri.database_name) == (None, "agents")
    assert load_settings().database_name == "configured"


def test_a_uri_naming_a_database_mongodb_refuses_is_one_line_naming_where_it_came_from() -> None:
    result = CliRunner(env={"MONGODB_URI": "mongodb://db.example/bad\\name"}).invoke(main, ["slices", "list"])

    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: MONGODB_URI: the database its path names: not a usable database name: "
        "it must not contain '\\\\'"
    ]

"""Connection strings in logs and errors: the password (and other secrets) masked everywhere they appear."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from partner_repo import ConnectionFailed, connect, mask_uri
from partner_repo.cli import main

SECRET = "pa55w0rd"


@pytest.mark.parametrize(
    ("uri", "masked"),
    [
        ("mongodb://app:pa55w0rd@db:27017/partner?w=1", "mongodb://app:***@db:27017/partner?w=1"),
        ("mongodb+srv://app:pa55w0rd@cluster0.example.net/", "mongodb+srv://app:***@cluster0.example.net/"),
        ("mongodb://app:pa%40ss@h1:1,h2:2/?replicaSet=rs0", "mongodb://app:***@h1:1,h2:2/?replicaSet=rs0"),
        ("mongodb://app:pa55/w0rd@db/", "mongodb://app:***@db/"),
        ("mongodb://app:pa55@w0rd@db/", "mongodb://app:***@db/"),
        ("mongodb://app:pa55?w0rd@db/?w=1", "mongodb://app:***@db/?w=1"),
        ("mongodb://db:27017/?directConnection=true", "mongodb://db:27017/?directConnection=true"),
        (
            "mongodb://CN%3Dclient@db/?authMechanism=MONGODB-X509",
            "mongodb://CN%3Dclient@db/?authMechanism=MONGODB-X509",
        ),
        (
            "mongodb://db/?tls=true&tlsCertificateKeyFilePassword=pa55w0rd",
            "mongodb://db/?tls=true&tlsCertificateKeyFilePassword=***",
        ),
        (
            "mongodb://db/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:pa55w0rd",
            "mongodb://db/?authMechanism=MONGODB-AWS&authMechanismProperties=***",
        ),
    ],
)
def test_mask_uri_hides_every_secret_and_keeps_the_rest(uri: str, masked: str) -> None:
    assert mask_uri(uri) == masked


def test_mask_uri_leaves_text_that_is_not_a_uri_alone() -> None:
    assert mask_uri("in-memory") == "in-memory"


async def test_an_unreachable_server_names_the_host_but_not_the_password() -> None:
    uri = f"mongodb://app:{SECRET}@127.0.0.1:9/?directConnection=true"

    with pytest.raises(ConnectionFailed) as caught:
        await connect(uri, server_selection_timeout_ms=100)

    assert "127.0.0.1:9" in str(caught.value) and "app:***@" in str(caught.value)
    assert SECRET not in str(caught.value)


async def test_a_malformed_uri_is_connection_failed_without_the_password() -> None:
    with pytest.raises(ConnectionFailed) as caught:
        await connect(f"mongodb://app:{SECRET}@db:notaport/")

    assert SECRET not in str(caught.value)
    assert (
        caught.value.__cause__ is None and caught.value.__context__ is not None
    )  # the driver's exception is not chained: its reason is in the message, scrubbed


def test_the_cli_prints_one_masked_line_for_an_unreachable_server() -> None:
    uri = f"mongodb://app:{SECRET}@127.0.0.1:9/?directConnection=true&serverSelectionTimeoutMS=100"

    result = CliRunner().invoke(main, ["--uri", uri, "migrate", "--status"])

    assert result.exit_code == 2
    assert "app:***@127.0.0.1:9" in result.output and SECRET not in result.output
    assert "Traceback" not in result.output


MALFORMED = [
    f"mongodb:/app:{SECRET}@db/",
    f"mongodb//app:{SECRET}@db",
    f"app:{SECRET}@db",
    f"mongodb://app:{SECRET}@",
    f"mongodb://app:{SECRET}",
    f"mongodb://app:{SECRET}?x@db/",
    f"mongodb://app:x@?{SECRET}@db/",
    f"mongodb://app:{SECRET}@db:notaport/",
    f"mongodb+srv://app:{SECRET}@db:27017/",
    f"mongodb://app@127.0.0.1:9/?password={SECRET}",
]
UNREACHABLE = [
    f"mongodb://app:{SECRET}@127.0.0.1:9/?directConnection=true",
    f"mongodb://127.0.0.1:9/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:{SECRET}",
    f"mongodb://127.0.0.1:9/?tls=true&tlsCertificateKeyFilePassword={SECRET}",
]


@pytest.mark.parametrize("uri", MALFORMED + UNREACHABLE)
def test_the_cli_shows_one_line_without_the_password_whatever_the_uri(uri: str) -> None:
    environment = {"MONGODB_URI": None, "PARTNER_REPO_SERVER_SELECTION_TIMEOUT_MS": "200"}

    result = CliRunner(env=environment).invoke(main, ["--uri", uri, "slices", "list"])

    assert result.exit_code == 2
    assert SECRET not in result.stderr and SECRET not in result.stdout
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")


@pytest.mark.parametrize("uri", MALFORMED)
async def test_a_uri_the_driver_refuses_is_connection_failed_without_the_password(uri: str) -> None:
    with pytest.raises(ConnectionFailed, match="unusable MongoDB URI") as caught:
        await connect(uri)

    assert SECRET not in str(caught.value)


def test_the_cli_reads_a_malformed_uri_from_the_environment_without_showing_it() -> None:
    environment = {"MONGODB_URI": f"mongodb:/app:{SECRET}@db/"}

    result = CliRunner(env=environment).invoke(main, ["slices", "list"])

    assert result.exit_code == 2 and SECRET not in result.output

"""Credentials the server or the driver refuses: one clear error, the password masked and nothing more."""

from __future__ import annotations

import pytest
from bson import Timestamp
from mockupdb import MockupDB, Request

from partner_repo import ConnectionFailed, connect
from partner_repo.mongo import _masking as masking
from tests.wire.wire_support import HELLO, server_fixture

AUTH_FAILED = {
    "ok": 0,
    "errmsg": "Authentication failed.",
    "code": 18,
    "codeName": "AuthenticationFailed",
    "operationTime": Timestamp(1_700_000_000, 1),  # a server adds it: it used to be shown, every "p" masked
}


def refuse_authentication(request: Request) -> bool:
    if request.command_name == "saslStart":
        return bool(request.reply(AUTH_FAILED))
    return False


@pytest.fixture(autouse=True)
def forgotten_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The passwords connected with here are remembered for masking by this module's tests only."""
    monkeypatch.setattr(masking, "_known_secrets", set())


server = server_fixture(
    autoresponder=refuse_authentication, hello={**HELLO, "saslSupportedMechs": ["SCRAM-SHA-256"]}
)


def uri(server: MockupDB, password: str) -> str:
    return f"mongodb://partner:{password}@{server.address_string}/?serverSelectionTimeoutMS=2000"


async def connect_error(target: str) -> str:
    with pytest.raises(ConnectionFailed) as caught:
        await connect(target)
    return str(caught.value)


@pytest.mark.parametrize("password", ["p%07ss", "p\udcffss"], ids=["control character", "not UTF-8"])
async def test_a_password_the_driver_cannot_prepare_is_connection_failed_naming_it(
    server: MockupDB, password: str
) -> None:
    message = await connect_error(uri(server, password))

    assert message == (
        f"cannot authenticate to MongoDB at {uri(server, '***')}: the user name or password is unusable "
        "(SASLprep: failed prohibited character check); check that it is UTF-8 text without control "
        "characters"
    )


async def test_a_wrong_password_says_authentication_failed_with_the_servers_message_once(
    server: MockupDB,
) -> None:
    message = await connect_error(uri(server, "p"))

    assert message == (
        f"authentication failed at MongoDB {uri(server, '***')}: the server says 'Authentication failed.' "
        "(AuthenticationFailed); check the user name, the password and authSource"
    )

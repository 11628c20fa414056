"""mask_uri hides whatever could be a credential, whatever the URI's shape (malformed ones included), and
scrub does the same for text that may quote a URI or its password (driver messages, log records)."""

from __future__ import annotations

import ast
import importlib
import inspect
import logging
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import partner_repo
from partner_repo import mask_uri
from partner_repo.mongo import SECRETS, SecretsFilter, remember_secrets, scrub
from partner_repo.mongo import _masking as masking

SECRET = "pa55w0rd"


@pytest.mark.parametrize(
    ("uri", "masked"),
    [
        ("mongodb:/app:pa55w0rd@db/", "mongodb:***@db/"),  # or user "mongodb:", password "/app:...": both
        ("mongodb//app:pa55w0rd@db", "mongodb//app:***@db"),
        ("app:pa55w0rd@db", "app:***@db"),
        ("app:/pa55w0rd@db", "app:***@db"),
        ("mongodb:/pa55w0rd@db/", "mongodb:***@db/"),
        ("mongodb://app:pa55w0rd@", "mongodb://app:***@"),
        ("mongodb://app:pa55w0rd", "mongodb://app:***"),
        ("mongodb://app:pa55w0rd/partner", "mongodb://app:***"),
        ("mongodb://app:pa55w0rd@db:notaport/", "mongodb://app:***@db:notaport/"),  # a port: after the @
        ("mongodb://app:pa?55w0rd@db/?w=1", "mongodb://app:***@db/?w=1"),
        ("mongodb://app:pa@55?w0rd@db/", "mongodb://app:***@db/"),
        ("mongodb://app:pa55w0rd@db/?appname=a@b", "mongodb://app:***@b"),
        ("mongodb://app@db/?password=pa55w0rd&w=1", "mongodb://app@db/?password=***&w=1"),
        (
            "mongodb://db/?tlsCertificateKeyFilePassword=pa55&w0rd&w=1",
            "mongodb://db/?tlsCertificateKeyFilePassword=***&***&w=1",
        ),
        (
            "mongodb://app:x@db/?authMechanismProperties=AWS_SESSION_TOKEN:pa55@w0rd",
            "mongodb://app:***",
        ),
        ("mongodb://db/?authSource=admin;secret=pa55w0rd", "mongodb://db/?authSource=admin;secret=***"),
        ("mongodb+srv://app:pa55w0rd@db:27017/", "mongodb+srv://app:***@db:27017/"),
        ("mongodb://[::1]:27017,h2:27018/?replicaSet=rs0", "mongodb://[::1]:27017,h2:27018/?replicaSet=rs0"),
        ("mongodb://app@db/?authMechanism=SCRAM-SHA-256", "mongodb://app@db/?authMechanism=SCRAM-SHA-256"),
    ],
)
def test_every_shape_of_uri_has_its_secrets_masked(uri: str, masked: str) -> None:
    assert mask_uri(uri) == masked


USERINFO_SHAPES = [
    "mongodb://app:{}@db.example:27017/partner?w=majority",
    "mongodb+srv://app:{}@cluster0.example.net/",
    "mongodb://:{}@db/",
    "mongodb://app:{}@h1:1,h2:2/?replicaset=rs0&appname=a@b",
    "mongodb://app:{}@",
    "mongodb:/app:{}@db/",
    "mongodb//app:{}@db",
    "mongodb:app:{}@db",
    "app:{}@db",
    "app:{}@db:27017/?w=1",
]
OPTION_SHAPES = [
    "mongodb://app@db/?password={}",
    "mongodb://db/?tls=true&tlscertificatekeyfilepassword={}&w=1",
    "mongodb://db/?authmechanism=mongodb-aws&authmechanismproperties=aws_session_token:{}",
    "mongodb://app:x@db/?w=1;authmechanismproperties=aws_session_token:{}",
]
# Secrets hold upper-case letters, which no shape does: any upper-case letter shown is part of a secret.
SECRET_TEXT = st.text(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZ0@?/:&=#%;,!$+~[] "), min_size=1).filter(
    lambda text: any(c.isupper() for c in text)
)


@settings(max_examples=300)
@given(shape=st.sampled_from(USERINFO_SHAPES), secret=SECRET_TEXT)
def test_no_part_of_a_password_is_ever_shown(shape: str, secret: str) -> None:
    masked = mask_uri(shape.format(secret))

    assert secret not in masked and not any(c.isupper() for c in masked)


@settings(max_examples=300)
@given(
    shape=st.sampled_from(OPTION_SHAPES), secret=SECRET_TEXT.filter(lambda text: not set(text) & set("&;"))
)
def test_no_part_of_a_secret_option_is_ever_shown(shape: str, secret: str) -> None:
    masked = mask_uri(shape.format(secret))

    assert secret not in masked and not any(c.isupper() for c in masked)


def test_uris_without_secrets_and_plain_text_are_left_alone() -> None:
    for text in ("in-memory", "mongodb://db:27017/?directConnection=true", "localhost:27017"):
        assert mask_uri(text) == text


def test_scrub_masks_uris_quoted_in_text_and_keeps_the_sentence() -> None:
    text = f"failed: mongodb://app:{SECRET}@db/?w=1, then app:{SECRET}@other: gave up"

    assert scrub(text) == "failed: mongodb://app:***@db/?w=1, then app:***@other: gave up"


def test_scrub_masks_the_secrets_of_a_uri_the_process_connected_with() -> None:
    remember_secrets("mongodb://app:Qu0ted%40Secret@db/")

    assert scrub("auth failed for password 'Qu0ted@Secret' (Qu0ted%40Secret)") == (
        "auth failed for password '***' (***)"
    )


def test_a_short_password_is_masked_where_it_stands_never_inside_other_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(masking, "_known_secrets", set())  # "p" is remembered for this test only
    remember_secrets("mongodb://app:p@db/")

    assert scrub("{'operationTime': Timestamp(1, 1)} for password 'p' (p)") == (
        "{'operationTime': Timestamp(1, 1)} for password '***' (***)"
    )


def library_modules() -> list[ModuleType]:
    """Every module of the library, loaded."""
    package = Path(partner_repo.__file__).parent
    names = [
        ".".join(path.relative_to(package.parent).with_suffix("").parts) for path in package.rglob("*.py")
    ]
    return [
        importlib.import_module(name.removesuffix(".__init__"))
        for name in sorted(names)
        if name != "partner_repo.__main__"
    ]


def test_every_logger_a_module_of_the_library_holds_scrubs_its_records_before_any_handler() -> None:
    loggers = {
        value.name: value
        for module in library_modules()
        for value in vars(module).values()
        if isinstance(value, logging.Logger)
    }

    assert {"partner_repo.listener", "partner_repo.database", "partner_repo.mcp"} <= set(loggers)
    assert [name for name, logger in loggers.items() if SECRETS not in logger.filters] == []


def test_the_library_makes_its_loggers_only_through_library_logger() -> None:
    """A logger made with ``logging.getLogger`` would not carry the filter (a migration's is the runner's to
    mask: tests/unit/migrating/test_runner.py)."""
    made_plainly = [
        f"{module.__name__}:{node.lineno}"
        for module in library_modules()
        if module.__name__ != "partner_repo.mongo._masking"
        for node in ast.walk(ast.parse(inspect.getsource(module)))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "getLogger"
        and node.args  # the root logger (the CLI's handlers) is not the library's
    ]

    assert made_plainly == []


@pytest.mark.parametrize("name", ["partner_repo.listener", "partner_repo.rolling.service"])
def test_library_log_records_are_scrubbed_before_any_handler(
    caplog: pytest.LogCaptureFixture, name: str
) -> None:
    library_modules()
    remember_secrets("mongodb://app:L0gged-Secret@db/")
    logger = logging.getLogger(name)

    with caplog.at_level(logging.WARNING, logger=name):
        try:
            raise RuntimeError("driver said: L0gged-Secret was refused by mongodb://u:L0gged-Secret@db")
        except RuntimeError as exc:
            logger.warning("polling failed (%s)", exc, exc_info=True)

    assert "L0gged-Secret" not in caplog.text
    assert "polling failed (driver said: *** was refused by mongodb://u:***@db)" in caplog.text


def test_other_loggers_records_are_left_to_the_application(caplog: pytest.LogCaptureFixture) -> None:
    remember_secrets("mongodb://app:N0t-Ours@db/")

    with caplog.at_level(logging.WARNING, logger="someone.else"):
        logging.getLogger("someone.else").warning("N0t-Ours")

    assert "N0t-Ours" in caplog.text


def test_the_secrets_filter_scrubs_a_handler_s_records() -> None:
    remember_secrets("mongodb://app:H4ndled@db/")
    record = logging.LogRecord("pymongo.command", logging.INFO, __file__, 1, "sent %s", ("H4ndled",), None)

    assert SecretsFilter().filter(record) and record.getMessage() == "sent ***"


def test_a_uri_of_another_scheme_is_read_both_ways() -> None:
    """``app://A@db`` may be user ``A`` at a host of scheme ``app``, or user ``app`` with the password ``//A``
    (a malformed URI): only MongoDB's schemes are read strictly, so both readings are masked. Hypothesis found
    it in ``test_no_part_of_a_password_is_ever_shown`` (shape ``app:{}@db``, secret ``//A``)."""
    assert mask_uri("app://A@db") == "app:***@db"

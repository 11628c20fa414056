"""Settings from the environment: production defaults, the URI's own options winning, no secret shown."""

from __future__ import annotations

from datetime import timedelta

import pytest

from partner_repo import (
    InvalidInput,
    InvalidSettings,
    PartnerRepoSettings,
    RollingConfig,
    connect_from_settings,
    load_settings,
    settings_for,
)
from partner_repo.mongo import UNITS
from partner_repo.mongo._connection import DEFAULTS, client_options

SECRET = "s3cr3t-Pa55"
URI = f"mongodb://app:{SECRET}@db1.example.net:27017,db2.example.net:27017/?replicaSet=rs0"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees only the variables it sets (a developer's own MONGODB_URI must not leak in)."""
    for name in ("MONGODB_URI", "PARTNER_REPO_DB"):
        monkeypatch.delenv(name, raising=False)
    for name in list(__import__("os").environ):
        if name.startswith("PARTNER_REPO_"):
            monkeypatch.delenv(name)


def test_the_defaults_are_the_production_ones() -> None:
    settings = load_settings()

    assert settings.uri is None and settings.database_name == "partner"
    assert settings.write_concern == "majority" and settings.write_timeout_ms == 10_000
    assert settings.retry_writes is True and settings.retry_reads is True
    assert settings.admin_read_preference == "secondaryPreferred"
    assert settings.create_indexes is True


def test_the_connection_and_database_come_from_mongodb_uri_and_partner_repo_db(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MONGODB_URI", URI)
    monkeypatch.setenv("PARTNER_REPO_DB", "agents")

    settings = load_settings()

    assert settings.uri == URI and settings.db == "agents"


def test_every_other_setting_is_a_partner_repo_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARTNER_REPO_WRITE_CONCERN", "2")
    monkeypatch.setenv("PARTNER_REPO_ADMIN_READ_PREFERENCE", "primary")
    monkeypatch.setenv("PARTNER_REPO_OPERATION_TIMEOUT_MS", "2500")
    monkeypatch.setenv("PARTNER_REPO_CREATE_INDEXES", "false")
    monkeypatch.setenv("PARTNER_REPO_ROLLING_IDLE_AFTER", "PT30M")
    monkeypatch.setenv("PARTNER_REPO_ROLLING_CHECK_INTERVAL", "5")

    settings = load_settings()

    assert settings.client_options()["w"] == 2 and settings.client_options()["timeoutMS"] == 2500
    assert settings.admin_read_preference == "primary" and settings.create_indexes is False
    assert settings.rolling_idle_after == timedelta(minutes=30)
    assert settings.rolling_check_interval == timedelta(seconds=5)


def test_an_empty_variable_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONGODB_URI", "")
    monkeypatch.setenv("PARTNER_REPO_DB", "")

    settings = load_settings()

    assert settings.uri is None and settings.database_name == "partner"


def test_client_options_carry_the_production_defaults() -> None:
    options = client_options(URI, PartnerRepoSettings(mongodb_uri=URI).client_options())

    assert options["w"] == "majority" and options["wTimeoutMS"] == 10_000
    assert options["retryWrites"] is True and options["retryReads"] is True
    assert options["serverSelectionTimeoutMS"] == 5_000 and options["appname"] == "partner-repo"
    assert options["timeoutMS"] == 60_000 and options["tz_aware"] is True
    assert "socketTimeoutMS" not in options  # unset: the driver's default


def test_the_settings_defaults_are_the_connection_policys_defaults() -> None:
    assert PartnerRepoSettings(mongodb_uri=URI).client_options() == DEFAULTS


def test_options_written_in_the_uri_are_left_to_the_uri() -> None:
    uri = f"{URI}&w=1&RetryWrites=false&appName=billing"
    options = client_options(uri, PartnerRepoSettings(mongodb_uri=uri).client_options())

    assert "w" not in options and "retryWrites" not in options and "appname" not in options
    assert options["wTimeoutMS"] == 10_000


def test_the_rolling_settings_default_to_rolling_configs_defaults() -> None:
    assert load_settings().rolling_config() == RollingConfig()


def test_rolling_settings_become_a_rolling_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARTNER_REPO_ROLLING_TRIGGER_LIMIT", "12")
    monkeypatch.setenv("PARTNER_REPO_ROLLING_RETAIN_DIVISOR", "3")

    config = load_settings().rolling_config()

    assert (config.trigger_limit, config.retain_divisor) == (12, 3)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("PARTNER_REPO_ADMIN_READ_PREFERENCE", "anywhere"),
        ("PARTNER_REPO_WRITE_TIMEOUT_MS", "-1"),
        ("PARTNER_REPO_SERVER_SELECTION_TIMEOUT_MS", "soon"),
        ("PARTNER_REPO_CREATE_INDEXES", "perhaps"),
        # refused as RollingConfig refuses them, when loaded rather than when first used
        ("PARTNER_REPO_ROLLING_TRIGGER_LIMIT", "-5"),
        ("PARTNER_REPO_ROLLING_RETAIN_DIVISOR", "-1"),
        ("PARTNER_REPO_ROLLING_CHECK_INTERVAL", "0"),
        ("PARTNER_REPO_ROLLING_IDLE_AFTER", "-PT1M"),
        ("PARTNER_REPO_ROLLING_UNIT_SOFT_LIMIT_BYTES", "0"),
    ],
)
def test_a_bad_value_is_invalid_input_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)

    with pytest.raises(InvalidSettings, match=f"invalid settings: {variable}: "):
        load_settings()


def test_a_uri_that_is_not_a_mongodb_uri_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MONGODB_URI", "db.example.net")

    with pytest.raises(InvalidSettings, match=r"MONGODB_URI: 'db\.example\.net' is not a mongodb://"):
        load_settings()


def test_settings_for_refuses_a_uri_that_is_not_a_mongodb_uri() -> None:
    with pytest.raises(InvalidSettings, match=r"is not a mongodb:// or mongodb\+srv:// URI"):
        settings_for("notauri", "partner")


@pytest.mark.parametrize("name", ["bad.db$", "with space", "a/b", "x" * 64])
def test_a_database_name_mongodb_would_refuse_is_refused(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("PARTNER_REPO_DB", name)

    with pytest.raises(InvalidSettings, match="PARTNER_REPO_DB: "):
        load_settings()


def test_durations_take_the_forms_of_parse_duration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARTNER_REPO_ROLLING_IDLE_AFTER", "pt30m")
    monkeypatch.setenv("PARTNER_REPO_ROLLING_CHECK_INTERVAL", "0:00:05")
    monkeypatch.setenv("PARTNER_REPO_ROLLING_LEASE_DURATION", "90")

    settings = load_settings()

    assert settings.rolling_idle_after == timedelta(minutes=30)
    assert settings.rolling_check_interval == timedelta(seconds=5)
    assert settings.rolling_lease_duration == timedelta(seconds=90)


def test_a_bad_uri_value_never_echoes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidInput) as caught:
        load_settings(mongodb_uri=12345, write_timeout_ms=f"{SECRET}")

    assert SECRET not in str(caught.value)


def test_printing_the_settings_never_shows_the_password() -> None:
    settings = PartnerRepoSettings(mongodb_uri=URI)

    for text in (repr(settings), str(settings), str(settings.model_dump()), settings.masked_uri):
        assert SECRET not in text
    assert (
        settings.masked_uri == "mongodb://app:***@db1.example.net:27017,db2.example.net:27017/?replicaSet=rs0"
    )


def test_settings_for_connects_exactly_where_it_is_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command that chose the in-memory backend must not pick MONGODB_URI up behind its back."""
    monkeypatch.setenv("MONGODB_URI", URI)
    monkeypatch.setenv("PARTNER_REPO_WRITE_CONCERN", "3")

    settings = settings_for(None, "scratch")

    assert settings.uri is None and settings.db == "scratch" and settings.write_concern == "3"


async def test_without_a_uri_the_settings_open_the_in_memory_backend() -> None:
    database = await connect_from_settings(load_settings(db="scratch"))

    assert database.name == "scratch"
    assert "core_updated" in await database[UNITS].index_information()


async def test_connecting_can_leave_the_indexes_to_migrations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARTNER_REPO_CREATE_INDEXES", "false")

    database = await connect_from_settings()
    await database[UNITS].insert_one({"_id": "x", "core_id": "c"})

    assert set(await database[UNITS].index_information()) == {"_id_"}

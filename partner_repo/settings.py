"""Settings from the environment (pydantic-settings) with production defaults, and the connection they make.

Every variable is documented in one table in ``docs/operations.md`` (and the README). Defaults are what a
replica-set deployment wants: retryable writes and reads, ``w="majority"`` with a timeout for every write (so
appends and listener checkpoints survive a failover), the hot path reading from the primary (read-your-writes
for append and rolling), and admin queries allowed on secondaries. Options written into ``MONGODB_URI`` win
over these defaults, so an operator's connection string is never second-guessed.

The URI is a :class:`pydantic.SecretStr`: printing or logging the settings never shows it, and
:attr:`PartnerRepoSettings.masked_uri` is the form to log (password replaced by ``***``).
"""

from __future__ import annotations

from dataclasses import fields
from datetime import timedelta
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from partner_repo.durations import parse_duration
from partner_repo.errors import InvalidInput, InvalidSettings
from partner_repo.mongo import (
    DEFAULT_DATABASE,
    DEFAULTS,
    URI_SCHEMES,
    MongoDatabase,
    ReadPreference,
    connect,
    database_name_problem,
    library_logger,
    mask_uri,
    uri_database,
)
from partner_repo.rolling import DEFAULT_TRIGGER_BYTES, DEFAULT_UNIT_SOFT_LIMIT_BYTES, RollingConfig

ROLLING_FIELDS = tuple(field.name for field in fields(RollingConfig))
"""Each ``RollingConfig`` field is the setting ``rolling_<field>``."""

IN_MEMORY_FALLBACK = (
    "MONGODB_URI is not set: using the embedded in-memory database, which starts empty and is gone when the "
    "process exits; set MONGODB_URI, or call connect() for the in-memory database on purpose"
)

log = library_logger(__name__)

ReadPreferenceName = Literal["primary", "primaryPreferred", "secondary", "secondaryPreferred", "nearest"]

_READ_PREFERENCES: dict[str, Any] = {
    "primary": ReadPreference.PRIMARY,
    "primaryPreferred": ReadPreference.PRIMARY_PREFERRED,
    "secondary": ReadPreference.SECONDARY,
    "secondaryPreferred": ReadPreference.SECONDARY_PREFERRED,
    "nearest": ReadPreference.NEAREST,
}


class PartnerRepoSettings(BaseSettings):
    """Everything a deployment configures, read from ``PARTNER_REPO_*`` variables (plus ``MONGODB_URI``)."""

    model_config = SettingsConfigDict(
        env_prefix="PARTNER_REPO_", env_ignore_empty=True, extra="ignore", frozen=True
    )

    mongodb_uri: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("MONGODB_URI", "mongodb_uri"),
        description="MongoDB connection string (mongodb:// or mongodb+srv://); unset: the embedded in-memory "
        "backend, with a warning (the CLI's writing commands refuse it).",
    )
    db: str | None = Field(
        default=None,
        min_length=1,
        description="Database name; unset: the one `MONGODB_URI` names in its path (`mongodb://host/NAME`), "
        "else `partner` (`database_name` is the one used).",
    )

    write_concern: str = Field(
        default=DEFAULTS["w"],
        min_length=1,
        description='`w` of every write (appends, checkpoints): "majority", a number or a tag.',
    )
    write_timeout_ms: int = Field(
        default=DEFAULTS["wTimeoutMS"],
        ge=0,
        description="`wtimeout`: how long a write waits for its write concern (0: none).",
    )
    retry_writes: bool = Field(
        default=DEFAULTS["retryWrites"], description="Retry a write once after a failover or network error."
    )
    retry_reads: bool = Field(
        default=DEFAULTS["retryReads"], description="Retry a read once after a failover or network error."
    )
    admin_read_preference: ReadPreferenceName = Field(
        default="secondaryPreferred",
        description="Where admin queries (slices, stats, check) read; the hot path reads the primary.",
    )
    server_selection_timeout_ms: int = Field(
        default=DEFAULTS["serverSelectionTimeoutMS"],
        gt=0,
        description="How long to wait for a usable server before failing.",
    )
    connect_timeout_ms: int = Field(
        default=DEFAULTS["connectTimeoutMS"], gt=0, description="TCP connect timeout."
    )
    socket_timeout_ms: int | None = Field(
        default=None, gt=0, description="Network read timeout per operation (unset: none)."
    )
    operation_timeout_ms: int = Field(
        default=DEFAULTS["timeoutMS"],
        ge=0,
        description="Client-side limit for a whole operation, retries included (`timeoutMS`; 0: none).",
    )
    max_pool_size: int = Field(
        default=DEFAULTS["maxPoolSize"], gt=0, description="Connections per server in the driver's pool."
    )
    app_name: str = Field(
        default=DEFAULTS["appname"], description="Shown in the server's logs and `currentOp`."
    )
    create_indexes: bool = Field(
        default=True, description="Create the indexes at startup; false when migrations own them."
    )

    rolling_trigger_limit: int = Field(
        default=36, description="Roll when the window holds this many messages."
    )
    rolling_trigger_bytes: int = Field(
        default=DEFAULT_TRIGGER_BYTES, description="Roll when the window's messages take this many bytes."
    )
    rolling_idle_after: timedelta = Field(
        default=timedelta(hours=1),
        description="Roll, then start a new session, after this idle time (seconds, PT30M or HH:MM:SS).",
    )
    rolling_retain_divisor: int = Field(
        default=6, description="After a roll the window keeps 1/divisor of it."
    )
    rolling_check_interval: timedelta = Field(
        default=timedelta(seconds=10),
        description="How often the idle scheduler looks for idle cores (a duration, as above).",
    )
    rolling_unit_soft_limit_bytes: int = Field(
        default=DEFAULT_UNIT_SOFT_LIMIT_BYTES, description="A unit past this size continues in a new unit."
    )
    rolling_lease_duration: timedelta = Field(
        default=timedelta(seconds=60), description="How long a crashed roller can block a core (a duration)."
    )
    rolling_summarize_timeout: timedelta = Field(
        default=timedelta(minutes=2), description="How long one summarizer call may take (a duration)."
    )
    rolling_summarize_attempts: int = Field(
        default=3, description="Summarizer calls per roll before the placeholder is stored (1 to 10)."
    )
    rolling_summarize_backoff: timedelta = Field(
        default=timedelta(seconds=1),
        description="The wait before the 2nd summarizer attempt; doubles after each (a duration).",
    )
    listener_concurrency: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="Slices of different units `listen` hands a consumer at once (its `concurrency` wins).",
    )

    @field_validator("mongodb_uri", mode="before")
    @classmethod
    def _blank_uri_is_unset(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            return None
        if isinstance(value, str) and (problem := uri_problem(value)) is not None:
            raise ValueError(problem)
        return value

    @field_validator("db")
    @classmethod
    def _usable_database_name(cls, value: str | None) -> str | None:
        problem = None if value is None else database_name_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator(
        "rolling_idle_after",
        "rolling_check_interval",
        "rolling_lease_duration",
        "rolling_summarize_timeout",
        "rolling_summarize_backoff",
        mode="before",
    )
    @classmethod
    def _duration(cls, value: object) -> timedelta:
        """Durations are seconds (``90``, ``2.5``), ISO 8601 (``PT30M``) or ``HH:MM:SS``."""
        return parse_duration(value)

    @property
    def uri(self) -> str | None:
        """The connection string (a secret: log :attr:`masked_uri` instead)."""
        return None if self.mongodb_uri is None else self.mongodb_uri.get_secret_value()

    @property
    def database_name(self) -> str:
        """The database these settings connect to: ``PARTNER_REPO_DB``, else the one the URI names in its
        path, else ``partner``."""
        return self.db or (uri_database(self.uri) if self.uri else None) or DEFAULT_DATABASE

    @property
    def masked_uri(self) -> str:
        """The connection string with its password masked, or ``in-memory``."""
        return "in-memory" if self.uri is None else mask_uri(self.uri)

    def rolling_config(self) -> RollingConfig:
        """The :class:`RollingConfig` these settings describe."""
        return RollingConfig(**{field: getattr(self, f"rolling_{field}") for field in ROLLING_FIELDS})

    def client_options(self) -> dict[str, Any]:
        """The client options these settings give (:mod:`partner_repo.mongo._connection` puts them over its
        defaults and under whatever the URI sets)."""
        options: dict[str, Any] = {
            "w": int(self.write_concern) if self.write_concern.isdigit() else self.write_concern,
            "wTimeoutMS": self.write_timeout_ms,
            "retryWrites": self.retry_writes,
            "retryReads": self.retry_reads,
            "serverSelectionTimeoutMS": self.server_selection_timeout_ms,
            "connectTimeoutMS": self.connect_timeout_ms,
            "socketTimeoutMS": self.socket_timeout_ms,
            "timeoutMS": self.operation_timeout_ms,
            "maxPoolSize": self.max_pool_size,
            "appname": self.app_name,
        }
        return {name: value for name, value in options.items() if value is not None}


def load_settings(**overrides: Any) -> PartnerRepoSettings:
    """Settings from the environment, with the given non-None values on top.

    A bad value (in the environment or given) is an :class:`InvalidSettings` naming the variable; the value
    itself is not echoed, as it may be a secret. The rolling settings are checked as
    :class:`RollingConfig` checks them, so a bad one is refused here rather than when it is first used.
    """
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        settings = PartnerRepoSettings(**given)
    except ValidationError as exc:
        problems = "; ".join(
            f"{_variable(error['loc'])}: {error['msg'].removeprefix('Value error, ')}"
            for error in exc.errors()
        )
        raise InvalidSettings(f"invalid settings: {problems}") from None
    _check_rolling(settings)
    return settings


def settings_for(uri: str | None, db: str) -> PartnerRepoSettings:
    """Environment settings for everything but where to connect: exactly ``uri`` (None: in-memory) and ``db``.

    The CLI uses it after resolving ``--uri``/``--db``, so ``MONGODB_URI`` is never picked up behind the back
    of a command that chose the in-memory backend.
    """
    if uri is not None and (problem := uri_problem(uri)) is not None:
        raise InvalidSettings(f"invalid uri: {problem}")
    settings = load_settings(db=db)
    return settings.model_copy(update={"mongodb_uri": None if uri is None else SecretStr(uri)})


def uri_problem(uri: str) -> str | None:
    """Why ``uri`` is no MongoDB connection string, or None. A bare host name is refused: the driver would
    take it for one and fail only once server selection timed out."""
    if uri.startswith(URI_SCHEMES):
        return None
    return f"{mask_uri(uri)!r} is not a mongodb:// or mongodb+srv:// URI"


def _check_rolling(settings: PartnerRepoSettings) -> None:
    """Each rolling setting on its own against :class:`RollingConfig`'s rules, so the error names it."""
    for field in ROLLING_FIELDS:
        name = f"rolling_{field}"
        try:
            RollingConfig(**{field: getattr(settings, name)})
        except InvalidInput as exc:
            raise InvalidSettings(f"invalid settings: {_variable((name,))}: {exc}") from None


def _variable(location: tuple[int | str, ...]) -> str:
    name = str(location[0]) if location else "settings"
    return "MONGODB_URI" if name.lower() == "mongodb_uri" else f"PARTNER_REPO_{name.upper()}"


async def connect_from_settings(
    settings: PartnerRepoSettings | None = None, *, create_indexes: bool | None = None
) -> MongoDatabase:
    """A ready database as the settings describe it (in-memory without a URI), production options applied.

    ``create_indexes`` overrides ``settings.create_indexes`` (``partner-repo migrate`` connects without them).
    Falling back to the in-memory backend because ``MONGODB_URI`` is unset logs a WARNING (nothing written
    there persists); ask for it on purpose with :func:`~partner_repo.connect` ``(None)`` instead.
    """
    settings = settings if settings is not None else load_settings()
    indexes = settings.create_indexes if create_indexes is None else create_indexes
    if settings.uri is None:
        log.warning(IN_MEMORY_FALLBACK)
        return await connect(None, settings.db, create_indexes=indexes)
    return await connect(settings.uri, settings.db, create_indexes=indexes, **settings.client_options())


def admin_database(database: MongoDatabase, settings: PartnerRepoSettings | None = None) -> MongoDatabase:
    """The same database with the admin read preference (secondaries allowed by default), for admin queries.

    Admin reads (slice listings, stats, invariant checks) may lag the primary by a replication delay; hot-path
    repositories keep the database they were given, which reads from the primary.
    """
    settings = settings if settings is not None else load_settings()
    preference = _READ_PREFERENCES[settings.admin_read_preference]
    return database.client.get_database(database.name, read_preference=preference)


__all__ = [
    "PartnerRepoSettings",
    "admin_database",
    "connect_from_settings",
    "load_settings",
    "settings_for",
]

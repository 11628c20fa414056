"""The stored model: Partner's MemoryCore, MemoryUnit and MemorySlice as Beanie documents.

The model deliberately accepts incomplete slices (missing ids, indexes, times, even ``None`` entries): data
written by Partner or other tools arrives that way, and :func:`partner_repo.normalize_unit` completes it on
every save. After a save every optional slice field is filled.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import field
from typing import Annotated, Any, Literal

from beanie import Document
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictStr,
    TypeAdapter,
    model_serializer,
)
from pydantic.dataclasses import dataclass

from partner_repo.clock import UtcDatetime
from partner_repo.encoding import require_encodable, storable_json_object

UNITS = "memory_units"
"""The collection of :class:`MemoryUnit` documents (Beanie needs it on the document; its indexes, and every
other collection's, are :mod:`partner_repo.mongo`'s)."""
CORES = "memory_cores"
"""The collection of :class:`MemoryCore` documents."""

Role = Literal["user", "assistant", "system", "tool"]
"""Partner's three message roles and ``tool`` (a tool's answer to a call); anything else is rejected."""


MAX_ID_LENGTH = 256
"""The longest id the library accepts (unit, core, slice, session, lease owner, listener group), in
characters.

Ids travel inside page cursors, index keys and log lines, so they are bounded: a page cursor holding two ids
of this length, in any script, always fits within the length a cursor may have (``admin.cursor``).
"""

_READING_STORED: ContextVar[bool] = ContextVar("partner_repo_reading_stored", default=False)


@contextmanager
def reading_stored() -> Iterator[None]:
    """Validate documents read back from the database (``storage.unit_from_document``): an id longer than
    :data:`MAX_ID_LENGTH` that another tool wrote is read as it is (``check`` reports it) instead of making
    the unit unreadable. Everything the library writes is validated outside it. A context variable rather
    than pydantic's validation context, which Beanie documents (a custom ``__init__``) do not pass on."""
    token = _READING_STORED.set(True)
    try:
        yield
    finally:
        _READING_STORED.reset(token)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or blank")
    return value


def _bounded(value: str) -> str:
    """At most :data:`MAX_ID_LENGTH` characters, and storable (no lone surrogate), unless read back."""
    if _READING_STORED.get():
        return value
    if len(value) > MAX_ID_LENGTH:
        raise ValueError(f"must be at most {MAX_ID_LENGTH} characters, got {len(value)}")
    if not value.isascii():
        require_encodable(value, "the id")
    return value


Identifier = Annotated[StrictStr, AfterValidator(_not_blank), AfterValidator(_bounded)]
"""A unit, core or session id: a non-blank string of at most :data:`MAX_ID_LENGTH` characters."""

BoundedId = Annotated[StrictStr, AfterValidator(_bounded)]
"""An id that may be blank (a slice id normalization replaces, a reference), but not longer than the limit."""


def _metadata(value: object) -> object:
    """A message's metadata checked and copied (:func:`~partner_repo.encoding.storable_json_object`); read
    back from the database, any object is taken as it is (another tool's stays readable)."""
    if value is None or (_READING_STORED.get() and isinstance(value, dict)):
        return value
    return storable_json_object(value, "metadata")


Metadata = Annotated[dict[str, Any] | None, BeforeValidator(_metadata)]
"""A small JSON object: at most :data:`~partner_repo.encoding.MAX_METADATA_BYTES` of compact JSON."""


@dataclass(frozen=True, slots=True, kw_only=True, config=ConfigDict(extra="forbid"))
class Message:
    """One raw conversation message: Partner's ``role`` and ``content``, and what a tool-using agent adds.

    - ``name``: the speaker, or the tool a ``tool`` message answers for (at most 256 characters);
    - ``tool_call_id``: the call a ``tool`` message answers (at most 256 characters);
    - ``metadata``: a small JSON object (at most :data:`~partner_repo.encoding.MAX_METADATA_BYTES` of compact
      JSON: an assistant message's tool calls, token counts...); anything else is refused;
    - ``at``: when the message was recorded. ``MemoryCoreRepository.record`` sets it (to the turn's time)
      when the caller gives none, keeps one the caller gives, and a roll stores it in the unit.

    The optional fields are left out of the stored form while unset, so a plain message is stored as
    ``{"role", "content"}`` (and the ``at`` that ``record`` gives it), and messages stored before 0.4 read as
    before (every new field None).

    Equal when everything but ``at`` is equal: ``at`` says when a message was recorded, not what it says, so
    a message equals itself before and after ``record``. Immutable and hashable (the hash covers what
    equality does; treat ``metadata`` as read-only, it is the message's own copy).

    A slotted pydantic dataclass rather than a model: units hold thousands of messages, and this form is
    validated just as strictly (roles, strict strings, no unknown keys) while building in about half the time
    and a fraction of the memory of a ``BaseModel`` (no per-instance ``__dict__`` or fields-set).
    ``model_validate`` and ``model_dump`` keep the model spelling for callers.
    """

    role: Role
    content: StrictStr
    name: Identifier | None = None
    tool_call_id: Identifier | None = None
    metadata: Metadata = None
    at: UtcDatetime | None = field(default=None, compare=False)

    @classmethod
    def model_validate(cls, value: Any) -> Message:
        """A message from its stored form (a ``{"role", "content", ...}`` mapping) or a message; pydantic's
        ``ValidationError`` if it is not one."""
        return _MESSAGE.validate_python(value)

    def model_dump(self) -> dict[str, Any]:
        """The stored form: ``{"role": ..., "content": ...}`` and each optional field that is set."""
        document: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name is not None:
            document["name"] = self.name
        if self.tool_call_id is not None:
            document["tool_call_id"] = self.tool_call_id
        if self.metadata is not None:
            document["metadata"] = self.metadata
        if self.at is not None:
            document["at"] = self.at
        return document

    @model_serializer(mode="plain")
    def _serialized(self) -> Any:
        """Inside models (a unit's ``model_dump``, JSON views) a message takes its stored form too. Tolerant
        of what validation refuses next (``None`` put into a unit's list, a message built around validation):
        ``save`` dumps a unit to validate it again."""
        if not isinstance(self, Message):
            return self
        document = {"role": getattr(self, "role", None), "content": getattr(self, "content", None)}
        for key in _OPTIONAL_FIELDS:
            value = getattr(self, key, None)
            if value is not None:
                document[key] = value
        return document

    def __hash__(self) -> int:
        metadata = None if self.metadata is None else json.dumps(self.metadata, sort_keys=True, default=repr)
        return hash((self.role, self.content, self.name, self.tool_call_id, metadata))

    def __repr__(self) -> str:
        shown = ", ".join(f"{key}={value!r}" for key, value in self.model_dump().items())
        return f"Message({shown})"


_OPTIONAL_FIELDS = ("name", "tool_call_id", "metadata", "at")
_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)
MESSAGE_ENCODERS = {Message: Message.model_dump}
"""Beanie's own writes (``insert``, ``save``) store a message in the stored form, as the repositories do."""


class MemorySlice(BaseModel):
    """Summary of the half-open interval ``[start_index, end_index)`` of its unit's messages.

    ``rolling_size`` and ``retain_divisor`` are the parameters of the roll that produced the slice, and
    ``first_position`` the position in its core of the slice's first message (``docs/rolling.md``,
    "Positions"), so any process can rebuild the roll's ``RollingResult`` from the database; they are ``None``
    for slices that did not come from a roll (imports, direct appends without a position, rolls before 0.4).
    ``unsummarized``: every summarizer attempt of the roll failed, so ``summary`` is Partner's placeholder
    (``RollingService.resummarize`` replaces it). ``revision`` counts the times the summary was replaced after
    the slice was stored (0: as rolled); the listener delivers each revision again. Both are stored only when
    set, so a plain slice is stored as before; read leniently (another tool's value counts as unset).
    """

    model_config = ConfigDict(extra="ignore")

    id: BoundedId | None = None
    start_index: int | None = None
    end_index: int | None = None
    summary: StrictStr = ""
    created_at: UtcDatetime | None = None
    rolling_size: int | None = None
    retain_divisor: int | None = None
    first_position: int | None = None
    unsummarized: Annotated[bool, BeforeValidator(lambda value: value is True)] = False
    revision: Annotated[int, BeforeValidator(lambda value: _count_or_zero(value))] = 0

    @model_serializer(mode="wrap")
    def _unset_fields_omitted(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Unset fields are left out: a slice not from a roll, never re-summarized, is stored as before."""
        data: dict[str, Any] = handler(self)
        if self.first_position is None:
            data.pop("first_position", None)
        if not self.unsummarized:
            data.pop("unsummarized", None)
        if not self.revision:
            data.pop("revision", None)
        return data

    @property
    def message_count(self) -> int:
        """Length of the interval (0 while the indexes are not normalized yet)."""
        if self.start_index is None or self.end_index is None:
            return 0
        return max(self.end_index - self.start_index, 0)


def _count_or_zero(value: object) -> object:
    """A stored position as the library writes it; missing or another tool's value reads as 0."""
    if value is None or isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return value


class _PlainConstruction(Document):
    """Beanie refuses to build a document before ``init_beanie``; our documents are also plain values.

    Normalization, imports and tests build units without a database, and the repositories are handed the
    database they use, so the construction-time binding check is skipped here (database access still
    requires ``init_repository``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        BaseModel.__init__(self, *args, **kwargs)


class MemoryUnit(_PlainConstruction):
    """One memory session: its raw messages and the slices summarising them.

    ``version`` is the optimistic-concurrency counter: every write increments it, and ``save`` of a copy whose
    version is no longer the stored one raises :class:`partner_repo.ConflictError`.
    """

    id: Identifier  # type: ignore[assignment]
    core_id: Identifier
    conversation_messages: list[Message] = Field(default_factory=list)
    slices: list[MemorySlice | None] = Field(default_factory=list)
    updated_at: UtcDatetime | None = None
    previous_unit_id: BoundedId | None = None
    version: int = 0

    class Settings:
        name = UNITS
        validate_on_save = True
        bson_encoders = MESSAGE_ENCODERS

    def complete_slices(self) -> list[MemorySlice]:
        """The non-``None`` slices (all of them after normalization)."""
        return [s for s in self.slices if s is not None]


class MemoryCore(_PlainConstruction):
    """Per agent: the current memory session and the live chat window shared by every service process.

    ``lease_owner``/``lease_beat``/``lease_ttl_ms`` make rolling single-flight across processes without
    comparing clocks (see :mod:`partner_repo.cores._lease`). ``session_continues`` names the unit the current
    session's unit continues when a roll opened it because the previous one was full (None after an idle
    refresh: a new conversation session starts afresh).
    ``idle_rolled`` is set once an idle roll has covered the window's last interaction and cleared by the next
    ``record``, so an idle window is rolled once, not again at every scheduler pass.
    ``last_unit_id``/``last_unit_version`` say which unit head the last trimming roll left (a cache check).
    ``window_size`` counts ``chat_messages`` (kept by every write of the window, so ``record`` can answer
    without it). ``window_start`` is the position of the window's first message: positions count every
    message ever recorded into the core, so message ``i`` of the window is at ``window_start + i``; only a
    roll's trim and a clear move it (``docs/rolling.md``, "Positions"). Both are the repository's, read
    leniently (a core written before 0.4 has no ``window_start``: its window starts at position 0).
    """

    id: Identifier = "default"  # type: ignore[assignment]
    memory_session_id: Identifier
    session_started_at: UtcDatetime
    chat_messages: list[Message] = Field(default_factory=list)
    last_interaction_at: UtcDatetime | None = None
    session_continues: BoundedId | None = None
    lease_owner: BoundedId | None = None
    lease_beat: int = 0
    lease_ttl_ms: int | None = None
    window_start: Annotated[int, BeforeValidator(_count_or_zero)] = 0
    idle_rolled: bool = False
    version: int = 0
    last_unit_id: BoundedId | None = None
    """The unit the last roll that trimmed the window appended to, and its ``version`` after that append
    (``last_unit_version``): a roller that remembers exactly that head may resolve without reading it."""
    last_unit_version: int | None = None

    class Settings:
        name = CORES
        bson_encoders = MESSAGE_ENCODERS

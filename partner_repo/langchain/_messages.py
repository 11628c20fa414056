"""Conversions between :class:`~partner_repo.models.Message` and LangChain's messages, both ways.

- ``HumanMessage`` is ``user``, ``SystemMessage`` is ``system``, both with their ``name``;
- ``AIMessage`` (and its chunks) is ``assistant``, with ``name``, ``tool_calls``, ``invalid_tool_calls`` and
  ``usage_metadata``;
- ``ToolMessage`` is ``tool``, with ``tool_call_id`` and ``name``, its ``status`` when not ``"success"`` and
  its ``artifact`` when set; a legacy ``FunctionMessage`` is ``tool`` with the function's ``name``;
- ``ChatMessage`` takes its role (``human`` and ``ai`` read as ``user`` and ``assistant``).

Every message also keeps its ``id``, ``additional_kwargs`` and ``response_metadata`` when set. What has no
field of :class:`Message` is kept in ``Message.metadata`` under the LangChain field's own name
(``tool_calls``, ``id``...), so converting back gives the same LangChain message. Content given as a list
of blocks (multimodal) is stored as its text (the text blocks joined) with the blocks themselves in
``metadata["content"]``. Metadata is bounded (:data:`~partner_repo.encoding.MAX_METADATA_BYTES`): a message
whose ``response_metadata`` takes it past the bound is stored without it (logged); one still too large, or
holding values that are not JSON (an artifact that is an object, say), is refused with
:class:`~partner_repo.errors.InvalidInput`.

The other way, metadata keys that are no LangChain field (metadata written by other code) are handed to
LangChain in ``additional_kwargs``, and so are ``tool_calls`` in a provider's shape (OpenAI's ``function``
objects), which LangChain parses into its own. ``Message.at`` stays on the Partner side.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    BaseMessageChunk,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_chunk_to_message,
)
from pydantic import ValidationError

from partner_repo.encoding import storable_json_object
from partner_repo.errors import InvalidInput
from partner_repo.models import Message
from partner_repo.mongo import library_logger
from partner_repo.validation import first_error

logger = library_logger("partner_repo.langchain.messages")

COMMON_FIELDS = ("id", "additional_kwargs", "response_metadata")
"""LangChain fields every message kind has, kept in metadata when set."""

AI_FIELDS = ("tool_calls", "invalid_tool_calls", "usage_metadata")
TOOL_FIELDS = ("status", "artifact")
LANGCHAIN_KEYS = frozenset((*COMMON_FIELDS, *AI_FIELDS, *TOOL_FIELDS, "content"))
"""Metadata keys that map back to a LangChain field; any other key goes to ``additional_kwargs``."""

CHAT_ROLES = {"human": "user", "ai": "assistant", **{r: r for r in ("user", "assistant", "system", "tool")}}


def from_langchain(message: BaseMessage) -> Message:
    """The :class:`Message` for a LangChain message (see the module docstring); :class:`InvalidInput` for a
    kind without a role here (``RemoveMessage``, a ``ChatMessage`` of another role) or values that cannot
    be stored."""
    if isinstance(message, BaseMessageChunk):
        message = message_chunk_to_message(message)
    role = _role_of(message)
    metadata: dict[str, Any] = {}
    text = message.content
    if not isinstance(text, str):
        metadata["content"] = list(text)
        text = _joined_text(text)
    for field in COMMON_FIELDS:
        value = getattr(message, field, None)
        if value:
            metadata[field] = value
    tool_call_id: str | None = None
    if isinstance(message, AIMessage):
        for field in AI_FIELDS:
            value = getattr(message, field, None)
            if value:
                metadata[field] = value
    elif isinstance(message, ToolMessage):
        tool_call_id = message.tool_call_id or None
        if message.status != "success":
            metadata["status"] = message.status
        if message.artifact is not None:
            metadata["artifact"] = message.artifact
    try:
        return Message(
            role=role,
            content=text,
            name=message.name or None,
            tool_call_id=tool_call_id,
            metadata=_storable(metadata, role) or None,
        )
    except ValidationError as exc:
        raise InvalidInput(
            f"a LangChain {message.type} message cannot be stored: {first_error(exc)}"
        ) from exc


def to_langchain(message: Message) -> BaseMessage:
    """The LangChain message for a :class:`Message` (see the module docstring)."""
    metadata = dict(message.metadata or {})
    content: Any = metadata.pop("content", None)
    if not isinstance(content, list):
        content = message.content
    fields: dict[str, Any] = {key: metadata.pop(key) for key in COMMON_FIELDS if key in metadata}
    role_fields = AI_FIELDS if message.role == "assistant" else TOOL_FIELDS if message.role == "tool" else ()
    fields.update({key: metadata.pop(key) for key in role_fields if key in metadata})
    if not _langchain_calls(
        fields.get("tool_calls", [])
    ):  # a provider's (OpenAI's) shape: LangChain parses it
        metadata["tool_calls"] = fields.pop("tool_calls")
    if metadata:  # metadata of other code: no LangChain field of its own
        fields["additional_kwargs"] = {**metadata, **fields.get("additional_kwargs", {})}
    if message.name is not None:
        fields["name"] = message.name
    if message.role == "user":
        return HumanMessage(content=content, **fields)
    if message.role == "assistant":
        return AIMessage(content=content, **fields)
    if message.role == "system":
        return SystemMessage(content=content, **fields)
    return ToolMessage(content=content, tool_call_id=message.tool_call_id or "", **fields)


def messages_from_langchain(messages: Iterable[BaseMessage]) -> list[Message]:
    """:func:`from_langchain` for each message: all of them converted (or refused) before any is used."""
    return [from_langchain(message) for message in messages]


def messages_to_langchain(messages: Iterable[Message]) -> list[BaseMessage]:
    """:func:`to_langchain` for each message."""
    return [to_langchain(message) for message in messages]


def _role_of(message: BaseMessage) -> Any:
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, ToolMessage | FunctionMessage):
        return "tool"
    if isinstance(message, ChatMessage) and message.role in CHAT_ROLES:
        return CHAT_ROLES[message.role]
    kind = f"ChatMessage of role {message.role!r}" if isinstance(message, ChatMessage) else message.type
    raise InvalidInput(f"a LangChain {kind} message has no role in memory (user, assistant, system, tool)")


def _langchain_calls(calls: object) -> bool:
    """Whether ``calls`` are tool calls in LangChain's shape (``name`` and ``args``), not a provider's."""
    return isinstance(calls, list) and all(
        isinstance(c, dict) and {"name", "args"} <= c.keys() for c in calls
    )


def _joined_text(blocks: Iterable[Any]) -> str:
    """The text of content blocks: plain strings and ``{"type": "text", "text": ...}`` blocks, joined."""
    parts = []
    for block in blocks:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "".join(parts)


def _storable(metadata: dict[str, Any], role: str) -> dict[str, Any]:
    """``metadata`` as stored; ``response_metadata`` is dropped (logged) when it alone takes it past the
    bound."""
    if not metadata:
        return metadata
    try:
        return storable_json_object(metadata, "metadata")
    except InvalidInput as exc:
        if "response_metadata" not in metadata:
            raise
        rest = {key: value for key, value in metadata.items() if key != "response_metadata"}
        try:
            kept = storable_json_object(rest, "metadata")
        except InvalidInput:
            raise exc from None
        logger.warning("a LangChain %s message is stored without its response_metadata: %s", role, exc)
        return kept


__all__ = ["from_langchain", "messages_from_langchain", "messages_to_langchain", "to_langchain"]

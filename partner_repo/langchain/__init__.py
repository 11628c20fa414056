"""The LangChain fit: conversions between ``Message`` and LangChain's messages, and a chat message history
backed by a memory core (``docs/langchain.md``).

Needs ``langchain-core`` (``pip install 'partner-repo[langchain]'``); nothing else in the library imports it.
"""

from __future__ import annotations

try:
    import langchain_core  # noqa: F401
except ImportError as exc:  # pragma: no cover - the test extra installs it
    raise ImportError(
        "partner_repo.langchain needs langchain-core: pip install 'partner-repo[langchain]'"
    ) from exc

from partner_repo.langchain._history import PartnerChatMessageHistory
from partner_repo.langchain._messages import (
    from_langchain,
    messages_from_langchain,
    messages_to_langchain,
    to_langchain,
)

__all__ = [
    "PartnerChatMessageHistory",
    "from_langchain",
    "messages_from_langchain",
    "messages_to_langchain",
    "to_langchain",
]

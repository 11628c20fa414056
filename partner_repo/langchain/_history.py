"""PartnerChatMessageHistory: LangChain's chat message history, backed by a memory core.

A LangChain app that keeps its history with ``MongoDBChatMessageHistory`` swaps this in with one line and
gains summarized memory: each turn it adds is recorded into the core's window and rolled into a unit when a
trigger holds (``RollingService.record_and_roll``), so the window it reads back stays short while everything
said is kept, summarized, in the units (and, with ``summaries=N``, the latest summaries come first).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, SystemMessage

from partner_repo.admin import SliceQueries
from partner_repo.cores import MemoryCoreRepository
from partner_repo.erasure import MemoryEraser
from partner_repo.errors import InvalidInput
from partner_repo.langchain._messages import messages_from_langchain, messages_to_langchain
from partner_repo.mongo import MongoDatabase
from partner_repo.rolling import RollingService
from partner_repo.validation import require_count, require_id

T = TypeVar("T")

SUMMARIES_HEADER = "Summaries of the earlier conversation, oldest first:"
"""How the system message that ``summaries=N`` puts first begins."""

MAX_SUMMARIES = 100
"""The most summaries ``summaries=N`` may ask for (one page of slices)."""


class PartnerChatMessageHistory(BaseChatMessageHistory):
    """The chat history of one memory core (LangChain's ``session_id`` is the core id).

    - ``aadd_messages`` converts the messages (:func:`~partner_repo.langchain.from_langchain`; all of them
      before anything is written) and records them as one turn with ``rolling.record_and_roll``: a roll runs
      when a trigger holds, and waits for the summarizer;
    - ``aget_messages`` reads the window (the messages not rolled yet and the context a roll keeps),
      converted back; with ``summaries=N`` the N latest slice summaries of the core come first, as one
      ``SystemMessage``;
    - ``aclear`` clears the window (``MemoryEraser.clear_window``); the summarized memory stays (erase it
      with ``MemoryEraser.forget``).

    ``rolling`` is the service's ``RollingService`` (one per process, shared by every history: it remembers
    the units it rolled into, so a roll costs fewer commands). The history is async; its sync methods
    (``messages``, ``add_messages``, ``clear``) work from another thread while the event loop the history
    last ran on is running (LangChain's sync calls made from a worker thread of an async app), and raise
    :class:`RuntimeError` on the event loop's own thread, where they would block it.
    """

    def __init__(
        self, database: MongoDatabase, session_id: str, *, rolling: RollingService, summaries: int = 0
    ) -> None:
        super().__init__()
        if not isinstance(rolling, RollingService):
            raise InvalidInput(f"rolling must be a RollingService, got {type(rolling).__name__}")
        if require_count(summaries, "summaries") > MAX_SUMMARIES:
            raise InvalidInput(f"summaries must be at most {MAX_SUMMARIES}, got {summaries}")
        self._core_id = require_id(session_id, "session_id")
        self._database = database
        self._rolling = rolling
        self._cores = MemoryCoreRepository(database)
        self._summaries = summaries
        self._loop: asyncio.AbstractEventLoop | None = _running_loop()

    @property
    def core_id(self) -> str:
        """The memory core this history reads and records (LangChain's ``session_id``)."""
        return self._core_id

    async def aget_messages(self) -> list[BaseMessage]:
        """The window as LangChain messages (after the latest summaries, with ``summaries=N``)."""
        self._loop = asyncio.get_running_loop()
        window = messages_to_langchain(await self._cores.snapshot(self._core_id))
        if not self._summaries:
            return window
        page = await SliceQueries(self._database).find(core_id=self._core_id, limit=self._summaries)
        summaries = [view.summary for view in reversed(page.items)]
        if not summaries:
            return window
        lines = "\n".join(f"- {summary}" for summary in summaries)
        return [SystemMessage(content=f"{SUMMARIES_HEADER}\n{lines}"), *window]

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Record ``messages`` as one turn and roll when a trigger holds; nothing is written when one of
        them cannot be stored (:class:`~partner_repo.errors.InvalidInput`)."""
        self._loop = asyncio.get_running_loop()
        converted = messages_from_langchain(messages)
        if converted:
            await self._rolling.record_and_roll(self._core_id, converted)

    async def aclear(self) -> None:
        """Clear the window (the summarized memory stays)."""
        self._loop = asyncio.get_running_loop()
        await MemoryEraser(self._database).clear_window(self._core_id)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """:meth:`aget_messages` for sync callers (see the class docstring)."""
        return self._blocking(self.aget_messages(), "aget_messages")

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """:meth:`aadd_messages` for sync callers (see the class docstring)."""
        self._blocking(self.aadd_messages(messages), "aadd_messages")

    def clear(self) -> None:
        """:meth:`aclear` for sync callers (see the class docstring)."""
        self._blocking(self.aclear(), "aclear")

    def _blocking(self, coroutine: Coroutine[Any, Any, T], method: str) -> T:
        """Run ``coroutine`` on the loop the history runs on, from another thread, and wait for it."""
        loop = self._loop
        if _running_loop() is not None:
            coroutine.close()
            raise RuntimeError(
                f"PartnerChatMessageHistory is async: on the event loop, await {method}() (LangChain's "
                "ainvoke and astream do)"
            )
        if loop is None or not loop.is_running():
            coroutine.close()
            raise RuntimeError(
                f"PartnerChatMessageHistory is async: await {method}() on the event loop its database runs "
                "on (sync calls work only from another thread while that loop runs)"
            )
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


__all__ = ["MAX_SUMMARIES", "SUMMARIES_HEADER", "PartnerChatMessageHistory"]

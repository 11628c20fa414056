"""What each MCP tool does, on the library's services, arguments validated: no protocol here.

``record_turn`` is ``RollingService.record_and_roll`` (the turn is recorded, and rolled within the call when
the core's triggers say so) followed by indexing the roll for recall in this process, so ``recall`` finds it
at once, on any backend; ``recall`` is ``MemoryRecall.recall``; ``context`` the latest slices' summaries
(``SliceQueries``) and the live window; ``topics`` the core's topic tree; ``forget`` ``MemoryEraser``'s
preview, or with ``confirm`` the erasure itself.

Served cores: given a set of core ids (``--core``), every other id is refused before anything is read or
written. A refusal, like every failure the library names, is a :class:`~partner_repo.errors.PartnerRepoError`
the server turns into a tool error.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from partner_repo.admin import SliceQueries
from partner_repo.cores import MemoryCoreRepository
from partner_repo.erasure import MemoryEraser
from partner_repo.errors import InvalidInput
from partner_repo.events import RollingResult
from partner_repo.mcp._arguments import (
    ContextArguments,
    ForgetArguments,
    RecallArguments,
    RecordTurnArguments,
    TopicsArguments,
)
from partner_repo.mcp._policy import DEFAULT_MAX_TURN_BYTES
from partner_repo.mcp._results import (
    ContextResult,
    Erased,
    ForgetResult,
    MessageView,
    RecalledSlice,
    RecallResult,
    RecordTurnResult,
    SummaryView,
    TopicsResult,
    TopicView,
    WouldErase,
)
from partner_repo.mongo import MAX_MESSAGE_BYTES, library_logger, messages_bytes
from partner_repo.recall import Embedder, MemoryRecall, RecallIndexer, TopicNode
from partner_repo.rolling import RollingService
from partner_repo.validation import parse_messages

logger = library_logger("partner_repo.mcp")


async def topic_nodes(recall: MemoryRecall, core_id: str) -> list[TopicNode]:
    """The core's topic tree, as the recall index holds it: the one place ``topics`` reads it.

    :meth:`MemoryRecall.topics` (what ``partner-repo recall topics`` prints): each node's path in readable
    words (``beagle->adopted``, where the index matches ``beagl->adopt``) and its slice count.
    """
    return await recall.topics(core_id)


class MemoryTools:
    """The five tools on one database. ``rolling`` carries the summarizer and the rolling config; ``cores``,
    when given, is the only set of core ids served; ``max_turn_bytes`` bounds one ``record_turn``;
    ``embedder`` (optional) embeds each roll's slice as it is indexed and each ``recall`` query."""

    def __init__(
        self,
        database: Any,
        rolling: RollingService,
        *,
        cores: Collection[str] | None = None,
        max_turn_bytes: int = DEFAULT_MAX_TURN_BYTES,
        embedder: Embedder | None = None,
    ) -> None:
        if isinstance(max_turn_bytes, bool) or not 1 <= max_turn_bytes <= MAX_MESSAGE_BYTES:
            raise InvalidInput(
                f"max_turn_bytes must be from 1 to {MAX_MESSAGE_BYTES}, got {max_turn_bytes!r}"
            )
        self._served = None if cores is None else frozenset(cores)
        self._max_turn_bytes = max_turn_bytes
        self._rolling = rolling
        self._cores = MemoryCoreRepository(database)
        self._slices = SliceQueries(database)
        self._recall = MemoryRecall(database, embedder=embedder)
        self._indexer = RecallIndexer(database, embedder=embedder)
        self._eraser = MemoryEraser(database)

    def _serve(self, core_id: str) -> str:
        """``core_id``, or :class:`InvalidInput` when this server does not serve it (``--core``)."""
        if self._served is not None and core_id not in self._served:
            raise InvalidInput(
                f"core {core_id!r} is not served here: this server serves only the cores it was given"
            )
        return core_id

    async def record_turn(self, arguments: RecordTurnArguments) -> RecordTurnResult:
        """Record the turn and roll when a trigger holds; a roll is indexed for recall before the answer."""
        core_id = self._serve(arguments.core_id)
        messages = parse_messages([m.model_dump(exclude_none=True) for m in arguments.messages])
        size = messages_bytes(message.model_dump() for message in messages)
        if size > self._max_turn_bytes:
            raise InvalidInput(
                f"the turn is {size} bytes; this server records at most {self._max_turn_bytes} bytes a turn"
            )
        rolled = await self._rolling.record_and_roll(core_id, messages, at=arguments.at)
        if rolled is not None:
            await self._index(rolled)
        state = await self._cores.window_state(core_id)
        return RecordTurnResult(
            window_size=0 if state is None else state.window_size,
            slice_id=None if rolled is None else rolled.slice_id,
        )

    async def _index(self, rolled: RollingResult) -> None:
        """Index the roll for recall. The turn is stored whatever happens here: a failure is logged (a
        listener group running ``--recall`` indexes the slice later), never answered as the turn's, which
        an agent would record again."""
        try:
            await self._indexer.consume(rolled)
        except Exception:
            logger.exception(
                "core %r: slice %s is stored but not indexed for recall; index it with "
                "partner-repo listen --group recall --recall",
                rolled.core_id,
                rolled.slice_id,
            )

    async def recall(self, arguments: RecallArguments) -> RecallResult:
        found = await self._recall.recall(
            self._serve(arguments.core_id),
            arguments.query,
            limit=arguments.limit,
            max_messages=arguments.max_messages,
            since=arguments.since,
            until=arguments.until,
        )
        return RecallResult(
            slices=[RecalledSlice.model_validate(piece, from_attributes=True) for piece in found]
        )

    async def context(self, arguments: ContextArguments) -> ContextResult:
        """The latest ``slices`` summaries, newest last, then the window: what goes in an agent's prompt."""
        core_id = self._serve(arguments.core_id)
        summaries: list[SummaryView] = []
        if arguments.slices:
            page = await self._slices.find(core_id=core_id, order="desc", limit=arguments.slices)
            summaries = [
                SummaryView(
                    slice_id=view.id,
                    summary=view.summary,
                    day=None if view.created_at is None else view.created_at.date(),
                )
                for view in reversed(page.items)
            ]
        window = [
            MessageView.model_validate(m, from_attributes=True) for m in await self._cores.snapshot(core_id)
        ]
        return ContextResult(summaries=summaries, window=window)

    async def topics(self, arguments: TopicsArguments) -> TopicsResult:
        nodes = await topic_nodes(self._recall, self._serve(arguments.core_id))
        return TopicsResult(nodes=[TopicView.model_validate(node, from_attributes=True) for node in nodes])

    async def forget(self, arguments: ForgetArguments) -> ForgetResult:
        """Without ``confirm``, what erasing the core would remove; with it, the erasure (as ``partner-repo
        forget CORE --yes``: the window, the units, the recall index's entries, listener progress)."""
        core_id = self._serve(arguments.core_id)
        if not arguments.confirm:
            preview = await self._eraser.preview(core_id)
            return ForgetResult(
                erased=False, would_erase=WouldErase.model_validate(preview, from_attributes=True)
            )
        report = await self._eraser.forget(core_id)
        return ForgetResult(erased=True, removed=Erased.model_validate(report, from_attributes=True))


__all__ = ["MemoryTools", "topic_nodes"]

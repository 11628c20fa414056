"""What each page of the console shows, read through the library's own services and queries.

No page runs a query of its own: cores and slices come from :class:`~partner_repo.admin.SliceQueries`
(keyset pages), topics and recall from :class:`~partner_repo.recall.MemoryRecall`, a core's window from
:class:`~partner_repo.cores.MemoryCoreRepository`, listener groups from ``listener_status`` and the dead
letter repository, the check from :class:`~partner_repo.admin.UnitChecker` and
:class:`~partner_repo.recall.RecallIndexCheck`, an erasure's preview from
:class:`~partner_repo.erasure.MemoryEraser`. Every page but two is a fixed number of index-backed reads,
whatever the history holds: a core's page reads one keyset page of slices, their units' counts (from an index
alone), their topics and one page of the topic tree. The two others cost what their command costs, said on
the page: the listener page what ``partner-repo listener status`` does (a pass over each group's unit
checkpoints), the check what ``partner-repo check`` does (a pass over the units), which is why the check runs
only when asked.

Reads go to the database the console was given for them (the admin read preference, as the CLI's reading
commands use); an erasure's preview reads the primary, as the erasure it precedes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from partner_repo.admin import CheckReport, CorePage, SlicePage, SliceQueries, UnitChecker
from partner_repo.admin import SliceDetail as SliceDetail
from partner_repo.clock import utc_now
from partner_repo.console._history import LagHistory, Sample
from partner_repo.console._timeline import Timeline, timeline
from partner_repo.cores import MemoryCoreRepository, WindowState
from partner_repo.erasure import ErasurePreview, MemoryEraser
from partner_repo.errors import NotFound
from partner_repo.listener import DeadLetter, DeadLetterRepository, GroupStatus, listener_status
from partner_repo.models import MemoryCore
from partner_repo.mongo import MongoDatabase
from partner_repo.recall import (
    ActivatedSlice,
    CoreIndexCheck,
    DateCue,
    MemoryRecall,
    RecallIndexCheck,
    TopicPage,
)
from partner_repo.recall import date_cues as read_date_cues
from partner_repo.validation import require_id

UTC_ZONE = ZoneInfo("UTC")


@dataclass(frozen=True)
class CorePicture:
    """A core's page: the core and its window, one page of its slices drawn as a timeline, a page of its
    topic tree; ``older`` is the cursor of the page of older slices (None: the oldest is shown)."""

    core_id: str
    core: MemoryCore | None
    window: WindowState | None
    slices: SlicePage
    timeline: Timeline
    topics: TopicPage
    newest: bool

    @property
    def unsummarized(self) -> int:
        return sum(1 for piece in self.slices.items if piece.unsummarized)


@dataclass(frozen=True)
class Recalled:
    """A recall as the page shows it: the slices found with why, and the dates the query named."""

    core_id: str
    query: str
    limit: int
    max_messages: int
    slices: list[ActivatedSlice]
    cues: list[DateCue]
    now: datetime


@dataclass(frozen=True)
class GroupPage:
    """A listener group: its status, the letters of each consumer (the oldest first, at most a page)."""

    status: GroupStatus
    letters: dict[str, list[DeadLetter]]
    position_age_s: float | None
    heartbeat_age_s: float | None


@dataclass(frozen=True)
class CheckPage:
    core_id: str | None
    units: CheckReport
    recall: list[CoreIndexCheck]

    @property
    def ok(self) -> bool:
        return self.units.ok and all(found.ok for found in self.recall)


class ConsoleReads:
    """The reads of every page, over ``reads`` (the admin read preference) and ``primary``."""

    def __init__(
        self,
        reads: MongoDatabase,
        primary: MongoDatabase,
        *,
        history: LagHistory,
        page_size: int = 50,
        timeline_slices: int = 40,
        topic_nodes: int = 100,
        letters_shown: int = 50,
    ) -> None:
        self._reads = reads
        self._primary = primary
        self._queries = SliceQueries(reads)
        self._recall = MemoryRecall(reads)
        self._cores = MemoryCoreRepository(reads)
        self.history = history
        self.page_size = page_size
        self.timeline_slices = timeline_slices
        self.topic_nodes = topic_nodes
        self.letters_shown = letters_shown

    async def cores(self, prefix: str | None, after: str | None) -> CorePage:
        return await self._queries.cores(prefix=prefix or None, after=after or None, limit=self.page_size)

    async def core(self, core_id: str, *, before: str | None, topics_after: str | None) -> CorePicture:
        """The core's page: the newest slices, or those before the cursor ``before``."""
        core_id = require_id(core_id, "core id")
        core = await self._cores.get(core_id)
        if before:
            page = await self._queries.find(core_id=core_id, limit=self.timeline_slices, after=before)
        else:  # the page an operator opens: read from where the last roll wrote (admin/_recent.py)
            since = None if core is None else core.last_unit_id or core.memory_session_id
            page = await self._queries.newest(core_id, since_unit=since, limit=self.timeline_slices)
        if core is None and not page.items and before is None:
            raise NotFound(f"no core {core_id!r}: no core document and no slice has that core id")
        units = sorted({piece.unit_id for piece in page.items})
        counts = await self._queries.unit_counts(units)
        topics = await self._recall.slice_topics(core_id, [(piece.unit_id, piece.id) for piece in page.items])
        picture = timeline(
            page.items,
            {unit_id: counted.message_count for unit_id, counted in counts.items()},
            topics,
            newest_page=before is None,
        )
        tree = await self._recall.topic_page(core_id, after=topics_after or None, limit=self.topic_nodes)
        return CorePicture(
            core_id=core_id,
            core=core,
            window=None if core is None else WindowState.of(core),
            slices=page,
            timeline=picture,
            topics=tree,
            newest=before is None,
        )

    async def slice(self, slice_id: str) -> SliceDetail:
        return await self._queries.require(slice_id)

    async def recall(self, core_id: str, query: str, *, limit: int, max_messages: int) -> Recalled:
        now = utc_now()
        found = await self._recall.recall(
            core_id, query, limit=limit, max_messages=max_messages, now=now, explain=True
        )
        cues = read_date_cues(query, now=now, tz=UTC_ZONE)
        return Recalled(core_id, query, limit, max_messages, found, list(cues), now)

    async def groups(self) -> list[GroupStatus]:
        """Every listener group's status, each sampled into the lag history."""
        statuses = await listener_status(self._reads)
        self._sample(statuses)
        return statuses

    async def group(self, name: str) -> GroupPage:
        name = require_id(name, "group")
        statuses = await listener_status(self._reads, name)
        if not statuses:
            raise NotFound(f"no listener group {name!r}")
        self._sample(statuses)
        (status,) = statuses
        letters = DeadLetterRepository(self._reads)
        shown = {
            consumer.name: await letters.list(group=name, consumer=consumer.name, limit=self.letters_shown)
            for consumer in status.consumers
            if consumer.dead_letters
        }
        now = utc_now()
        return GroupPage(
            status, shown, status.age(status.position_at, now), status.age(status.heartbeat_at, now)
        )

    async def check(self, core_id: str | None) -> CheckPage:
        core_id = None if not core_id else require_id(core_id, "core id")
        units = await UnitChecker(self._reads).check(core_id)
        recall = await RecallIndexCheck(self._reads).check(core_id)
        return CheckPage(core_id, units, recall)

    async def forget_preview(self, core_id: str) -> ErasurePreview:
        return await MemoryEraser(self._primary).preview(require_id(core_id, "core id"))

    def _sample(self, statuses: list[GroupStatus]) -> None:
        now = utc_now()
        for status in statuses:
            sample = Sample(
                at=now, pending=status.pending, position_age_s=status.age(status.position_at, now)
            )
            self.history.record(status.group, sample)


__all__ = ["CheckPage", "ConsoleReads", "CorePicture", "GroupPage", "Recalled"]

"""Embedding a core's indexed slices again: vectors for slices indexed without them, or of a new embedder.

``RecallIndexer.reindex`` (``partner-repo recall reindex``) walks each core's slices by sequence number, a
page at a time: it reads the page's messages from their units, embeds the page in one call, and sets each
slice's vectors with one update fenced by the slice's revision and tag
(:meth:`.store.RecallStore.put_vectors`):

- a slice that already has vectors of this embedder is skipped, so a run that stopped (Ctrl-C, a crash, an
  embedder's outage) is finished by running it again, and nothing is embedded twice;
- a slice re-summarized meanwhile (a newer revision, which its delivery indexes with its own vectors) is left
  to that delivery: the update matches nothing;
- an update never creates a document, so a slice erased meanwhile stays erased, vectors included; a slice
  whose messages cannot be read (its unit erased or gone) is not embedded.

The core's document names the new embedder first (before any slice of it is written), so a recall with the
old one is refused from then on, and a recall with the new one finds the slices done so far. Indexers that
still embed with the old one are refused too (:class:`~partner_repo.errors.EmbedderMismatch`: their
deliveries become dead letters, replayed once they run the new one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from partner_repo.callables import Progress
from partner_repo.errors import InvalidInput
from partner_repo.mongo import library_logger
from partner_repo.recall._keys import stored_count
from partner_repo.recall._queries import RecallQueries
from partner_repo.recall._store import RecallStore
from partner_repo.recall._vectors import Embedder, Identity, embed, embedder_name, slices_vectors
from partner_repo.recall._weights import message_text
from partner_repo.units import messages_at

logger = library_logger("partner_repo.recall.reindex")

PAGE = 32
"""Slices embedded in one call by default."""
MAX_PAGE = 1000


@dataclass
class ReindexReport:
    """What a re-embedding run did, kept up to date as it goes: pass one in to know where a run that was
    interrupted stopped (``core_id`` and ``last_seq``, the last slice number it finished)."""

    cores: int = 0
    slices: int = 0
    embedded: int = 0
    skipped: int = 0
    """Slices that already had vectors of this embedder (a run before this one embedded them)."""
    unreadable: int = 0
    """Slices whose messages could not be read (their unit erased or gone): not embedded."""
    changed: int = 0
    """Slices changed or erased between the read and the write: left to the write that changed them."""
    core_id: str | None = None
    last_seq: int = 0
    replaced: dict[str, str] = field(default_factory=dict)
    """Per core, the embedder whose vectors this run replaces (``name (N dimensions)``)."""

    def where(self) -> str:
        """Where the run is (or stopped): the core and the last slice number finished."""
        if self.core_id is None:
            return "before the first core"
        return f"core {self.core_id!r} after slice number {self.last_seq}"


async def reindex(
    database: Any,
    store: RecallStore,
    embedder: Embedder,
    core_ids: Sequence[str] | None,
    *,
    page: int,
    progress: Progress | None,
    report: ReindexReport,
) -> ReindexReport:
    """Embed again every slice of ``core_ids`` (every core when None) that has no vectors of ``embedder``."""
    identity = Identity(embedder_name(embedder), len((await embed(embedder, ["partner-repo"]))[0]))
    cores = list(core_ids) if core_ids is not None else await store.cores()
    queries = RecallQueries(database)
    totals = {core_id: await queries.count(core_id) for core_id in cores}
    total, done = sum(totals.values()), 0
    for core_id in cores:
        report.core_id, report.last_seq = core_id, 0
        report.cores += 1
        before = await store.name_embedder(core_id, identity) if totals[core_id] else None
        if before is not None and before != identity:
            report.replaced[core_id] = before.describe()
            replaced = (core_id, before.describe(), identity.describe())
            logger.info("core %r: replacing vectors of %s with %s", *replaced)
        while rows := await store.slices_after(core_id, report.last_seq, page):
            await _embedded(database, store, embedder, identity, core_id, rows, report)
            report.last_seq = stored_count(rows[-1].get("seq")) or report.last_seq
            done += len(rows)
            if progress is not None:
                progress(min(done, total), max(total, done))
        reached = (core_id, identity.describe(), report.last_seq)
        logger.info("core %r: vectors of %s up to slice number %d", *reached)
    return report


async def _embedded(
    database: Any,
    store: RecallStore,
    embedder: Embedder,
    identity: Identity,
    core_id: str,
    rows: list[dict[str, Any]],
    report: ReindexReport,
) -> None:
    """One page: its slices without this embedder's vectors embedded in one call, each written fenced."""
    report.slices += len(rows)
    todo = [row for row in rows if row.get("vtag") != identity.tag]
    report.skipped += len(rows) - len(todo)
    spans = {
        id(row): range(stored_count(row.get("start")) or 0, stored_count(row.get("end")) or 0) for row in todo
    }
    wanted: dict[str, list[int]] = {}
    for row in todo:
        wanted.setdefault(str(row.get("unit_id")), []).extend(spans[id(row)])
    read = await messages_at(database, wanted, core_id=core_id)
    ready: list[tuple[dict[str, Any], list[str]]] = []
    for row in todo:
        picked = read.get(str(row.get("unit_id")), {})
        if not all(position in picked for position in spans[id(row)]):
            report.unreadable += 1
            continue
        ready.append((row, [message_text(picked[position]) for position in spans[id(row)]]))
    if not ready:
        return
    made = await slices_vectors(embedder, [(str(row.get("summary") or ""), texts) for row, texts in ready])
    for (row, _), vectors in zip(ready, made, strict=True):
        if vectors.identity != identity:  # an embedder whose dimension changed within one run
            raise InvalidInput(f"embedder {identity.name!r} returned vectors of another dimension mid-run")
        seq = stored_count(row.get("seq")) or 0
        revision = row.get("revision")
        written = isinstance(revision, int) and await store.put_vectors(
            core_id, row["unit_id"], row["slice_id"], revision, vectors.fields(seq)
        )
        if written:
            report.embedded += 1
        else:
            report.changed += 1


__all__ = ["MAX_PAGE", "PAGE", "ReindexReport", "reindex"]

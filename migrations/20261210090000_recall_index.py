"""0.4's recall index in 0.5's shape: ``recall_slices`` and ``recall_vocabulary`` become ``recall_index``.

0.4 kept a document per slice in ``recall_slices`` (``_id: {u, s}``) and, in ``recall_vocabulary``, a
document per term, topic node and core listing the key of every slice that held it: documents that grow
with the history. 0.5 keeps one collection, ``recall_index``, with a document per slice (string ``_id``
``["s", unit, slice]``, a sequence number per core, the UTC days its conversation touches, its topic path as
``path`` and as ``topic``), one per topic node (``["n", core, path]``, a counter of its slices) and one per
core (``["c", core]``, a counter of its slices and its last sequence number); a term's document frequency is
counted on the ``core_terms`` index instead of stored.

Everything 0.5 needs is in 0.4's slice documents, so the data moves (no topic extractor is asked again, which
matters when it is an LLM); a slice's marks (term -> ``[[offset, weight], ...]``) become one
``"offset:weight ..."`` string per term:

Forward creates ``recall_index``'s indexes, then moves the slices in ``_id`` batches: each is inserted under
its new id (an id already there, from a run that stopped, is kept) and its old document deleted; sequence
numbers continue each core's highest. A slice whose write 0.4 left unfinished (a ``pending`` document on an
entry without terms) is dropped: its listener group delivers it again. The node and core documents are then
counted from the moved slices (a node's label is its path: 0.4 stored no readable words), and the two old
collections are dropped once empty. Every step is idempotent: a rerun continues where a stopped run ended.

Backward rebuilds 0.4's two collections from ``recall_index`` (the slice documents under their old ids, the
vocabulary's lists from the slices' terms and nodes), creates 0.4's indexes on them, and drops
``recall_index``. Stop the recall listener group while either direction runs (its writes would go to the
shape the other version reads).

Frozen on purpose: the shapes, keys and index definitions are copies, not imports of ``partner_repo``.
"""

# No `from __future__ import annotations`: Beanie loads this file outside sys.modules, where pydantic could
# not resolve string annotations.
import json
import logging
from datetime import UTC, datetime
from typing import Any

from beanie import Document, free_fall_migration
from pymongo import ASCENDING, DESCENDING, IndexModel, UpdateOne
from pymongo.errors import BulkWriteError

from partner_repo.mongo import driver

OLD_SLICES = "recall_slices"
OLD_VOCABULARY = "recall_vocabulary"
INDEX = "recall_index"
BATCH = 500
DUPLICATE_KEY = 11000
MAX_DAYS = 366


def _newest(field: str, name: str) -> IndexModel:
    keys = [("core_id", ASCENDING), (field, ASCENDING), ("ended_at", DESCENDING), ("_id", ASCENDING)]
    return IndexModel(keys, name=name)


INDEXES: dict[str, list[IndexModel]] = {
    INDEX: [
        IndexModel([("core_id", ASCENDING), ("_id", ASCENDING)], name="core_id_1__id_1"),
        IndexModel([("core_id", ASCENDING), ("terms", ASCENDING)], name="core_terms"),
        IndexModel([("core_id", ASCENDING), ("seq", ASCENDING)], name="core_seq"),
        _newest("path", "core_path"),
        _newest("ancestors", "core_ancestors"),
        _newest("related", "core_related"),
        _newest("days", "core_days"),
        IndexModel([("core_id", ASCENDING), ("unit_id", ASCENDING)], name="core_unit"),
        IndexModel([("core_id", ASCENDING), ("names", ASCENDING)], name="core_names"),
        IndexModel([("core_id", ASCENDING), ("depth", ASCENDING)], name="core_depth"),
    ]
}
OLD_INDEXES: dict[str, list[IndexModel]] = {
    OLD_SLICES: [
        IndexModel([("core_id", ASCENDING), ("terms", ASCENDING)], name="core_terms"),
        IndexModel([("core_id", ASCENDING), ("ended_at", DESCENDING)], name="core_ended"),
        IndexModel([("core_id", ASCENDING), ("ancestors", ASCENDING)], name="core_ancestors"),
        IndexModel([("core_id", ASCENDING), ("related", ASCENDING)], name="core_related"),
        IndexModel([("unit_id", ASCENDING)], name="unit"),
    ],
    OLD_VOCABULARY: [
        IndexModel(
            [("core_id", ASCENDING), ("kind", ASCENDING), ("words", ASCENDING)], name="core_kind_words"
        ),
        IndexModel(
            [("core_id", ASCENDING), ("kind", ASCENDING), ("depth", ASCENDING)], name="core_kind_depth"
        ),
    ],
}
NEW_FIELDS = ("kind", "seq", "days", "path")

log = logging.getLogger("partner_repo.migrations.recall_index")


class UnitCollection(Document):
    """Gives the migration its database (through the collection binding); no fields are read."""

    class Settings:
        name = "memory_units"


def _key(*parts: str) -> str:
    return json.dumps(list(parts), ensure_ascii=False, separators=(",", ":"))


def _database() -> Any:
    return driver.document_collection(UnitCollection).database


async def create_indexes(database: Any, indexes: dict[str, list[IndexModel]]) -> None:
    for collection, models in indexes.items():
        for model in models:
            options = dict(model.document)
            keys = list(options.pop("key").items())
            await database[collection].create_index(keys, **options)


# -- forward ---------------------------------------------------------------------------------------------


def _days(began: Any, ended: Any) -> list[int]:
    if not isinstance(began, datetime) or not isinstance(ended, datetime):
        return []
    first, last = (_utc(moment).date().toordinal() for moment in (began, ended))
    days = list(range(first, max(first, last) + 1))
    return days[: MAX_DAYS // 2] + days[-(MAX_DAYS // 2) :] if len(days) > MAX_DAYS else days


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def moved(old: dict[str, Any], seq: int) -> dict[str, Any] | None:
    """A 0.4 slice document in 0.5's shape (None for an entry 0.4 never finished writing)."""
    if "terms" not in old or not isinstance(old.get("_id"), dict):
        return None
    document = {name: value for name, value in old.items() if name not in ("_id", "pending")}
    path = "->".join(name.strip() for name in str(old.get("topic") or "").split("->"))
    document.update(
        {
            "_id": _key("s", old["_id"]["u"], old["_id"]["s"]),
            "kind": "slice",
            "seq": seq,
            "days": _days(old.get("began_at"), old.get("ended_at")),
            "path": path,
            "topic": path,
            "marks": _marks_stored(old.get("marks") or {}),
        }
    )
    return document


def _marks_stored(marks: dict[str, Any]) -> dict[str, str]:
    """0.4's marks (term -> ``[[offset, weight], ...]``) as 0.5 stores them: one ``"offset:weight ..."``
    string per term (a mark already a string, moved by a stopped run, stays)."""
    return {
        term: pairs if isinstance(pairs, str) else " ".join(f"{int(o)}:{float(w)!r}" for o, w in pairs)
        for term, pairs in marks.items()
    }


def _marks_listed(marks: dict[str, Any]) -> dict[str, list[list[Any]]]:
    """0.5's marks back in 0.4's shape."""
    listed: dict[str, list[list[Any]]] = {}
    for term, text in marks.items():
        pairs = (pair.partition(":") for pair in str(text).split())
        listed[term] = [[int(offset), float(weight)] for offset, _, weight in pairs]
    return listed


async def move_slices(database: Any) -> int:
    """Insert every 0.4 slice in 0.5's shape, numbered per core in the order their conversations ended (the
    same numbers on a rerun: an id already there is kept); how many there are."""
    order = [("core_id", ASCENDING), ("ended_at", ASCENDING), ("_id", ASCENDING)]
    seqs: dict[str, int] = {}
    batch: list[dict[str, Any]] = []
    count = 0
    async for row in database[OLD_SLICES].find({}).sort(order):
        core = str(row.get("core_id"))
        document = moved(row, seqs.get(core, 0) + 1)
        if document is None:
            continue
        seqs[core] = document["seq"]
        batch.append(document)
        if len(batch) >= BATCH:
            count += await _insert_kept(database[INDEX], batch)
            batch = []
    return count + await _insert_kept(database[INDEX], batch)


async def _insert_kept(collection: Any, documents: list[dict[str, Any]]) -> int:
    """Insert the documents; one whose id is already there (moved by a stopped run) is kept as it is."""
    if not documents:
        return 0
    try:
        await collection.insert_many(documents, ordered=False)
    except BulkWriteError as exc:
        if any(error.get("code") != DUPLICATE_KEY for error in exc.details.get("writeErrors", [])):
            raise
    return len(documents)


async def count_nodes(database: Any, words: dict[tuple[str, str], list[str]]) -> tuple[int, int]:
    """Set each core's and each topic node's document from the slices now in ``recall_index``."""
    index = database[INDEX]
    cores: dict[str, list[int]] = {}
    nodes: dict[tuple[str, str], int] = {}
    async for row in index.find({"kind": "slice"}, {"core_id": 1, "seq": 1, "ancestors": 1}):
        counted = cores.setdefault(row["core_id"], [0, 0])
        counted[0] += 1
        counted[1] = max(counted[1], int(row.get("seq") or 0))
        for path in row.get("ancestors") or ():
            nodes[(row["core_id"], path)] = nodes.get((row["core_id"], path), 0) + 1
    writes = [
        UpdateOne(
            {"_id": _key("c", core), "core_id": core},
            {"$set": {"kind": "core", "slices": slices, "last_seq": last}},
            upsert=True,
        )
        for core, (slices, last) in cores.items()
    ]
    writes.extend(
        _node_write(core, path, count, words.get((core, path))) for (core, path), count in nodes.items()
    )
    for start in range(0, len(writes), BATCH):
        await driver.bulk_write(index, writes[start : start + BATCH], ordered=False)
    return len(cores), len(nodes)


def _node_write(core: str, path: str, count: int, words: list[str] | None) -> UpdateOne:
    """A node's document, its counter set; the words 0.4 named it by, or (when 0.4's vocabulary is already
    gone, on a rerun) those a stopped run wrote, else its own name as it is written."""
    fixed: dict[str, Any] = {"kind": "node", "node": path, "label": path, "depth": len(path.split("->"))}
    update: dict[str, Any] = {"$set": {**fixed, "slices": count}}
    own = sorted(set(words or [path.split("->")[-1].strip().casefold()]))
    named = {"words": own, "names": sorted({*own, path})}
    if words is None:
        update["$setOnInsert"] = named
    else:
        update["$set"].update(named)
    return UpdateOne({"_id": _key("n", core, path), "core_id": core}, update, upsert=True)


async def _old_words(database: Any) -> dict[tuple[str, str], list[str]]:
    """The words 0.4 named each node by (its vocabulary entry's ``words``)."""
    words: dict[tuple[str, str], list[str]] = {}
    projection = {"core_id": 1, "value": 1, "words": 1}
    async for row in database[OLD_VOCABULARY].find({"kind": "node"}, projection):
        words[(row["core_id"], row["value"])] = list(row.get("words") or ())
    return words


async def forward(database: Any) -> None:
    await create_indexes(database, INDEXES)
    words = await _old_words(database)
    slices = await move_slices(database)
    cores, nodes = await count_nodes(database, words)
    await database.drop_collection(OLD_VOCABULARY)
    await database.drop_collection(OLD_SLICES)
    log.info("recall_index: %d slice(s) of %d core(s) moved, %d topic node(s) counted", slices, cores, nodes)


# -- backward --------------------------------------------------------------------------------------------


def restored(document: dict[str, Any]) -> dict[str, Any]:
    """A 0.5 slice document in 0.4's shape."""
    old = {name: value for name, value in document.items() if name not in NEW_FIELDS and name != "_id"}
    old["_id"] = {"u": document["unit_id"], "s": document["slice_id"]}
    old["topic"] = document.get("path") or document.get("topic")
    old["marks"] = _marks_listed(document.get("marks") or {})
    return old


Lists = dict[str, dict[tuple[str, str], list[list[str]]]]
"""Core -> (kind, value) -> the keys of the slices holding it: 0.4's vocabulary."""


async def restore_slices(database: Any) -> Lists:
    """0.4's slice documents back under their old ids, and 0.4's vocabulary lists of each core (the keys of
    the slices holding each term, node and the core)."""
    lists: Lists = {}
    batch: list[dict[str, Any]] = []
    async for document in database[INDEX].find({"kind": "slice"}).sort("_id", ASCENDING):
        old = restored(document)
        batch.append(old)
        held = lists.setdefault(old["core_id"], {})
        key = [old["unit_id"], old["slice_id"]]
        entries = [("term", term) for term in old.get("terms") or ()]
        entries += [("node", path) for path in old.get("ancestors") or ()] + [("core", "")]
        for entry in entries:
            held.setdefault(entry, []).append(key)
        if len(batch) >= BATCH:
            await _insert_kept(database[OLD_SLICES], batch)
            batch = []
    await _insert_kept(database[OLD_SLICES], batch)
    return lists


async def restore_vocabulary(database: Any, lists: Lists) -> int:
    """0.4's vocabulary entries, each with its list of slice keys (set whole: a rerun writes the same)."""
    words: dict[tuple[str, str], list[str]] = {}
    async for row in database[INDEX].find({"kind": "node"}, {"core_id": 1, "node": 1, "words": 1}):
        words[(row["core_id"], row["node"])] = list(row.get("words") or ())
    writes = []
    for core, held in lists.items():
        for (kind, value), keys in held.items():
            fields: dict[str, Any] = {"core_id": core, "kind": kind, "value": value, "slices": keys}
            if kind == "node":
                fields.update(depth=len(value.split("->")), words=words.get((core, value), []))
            entry = {"_id": {"c": core, "k": kind, "v": value}}
            writes.append(UpdateOne(entry, {"$set": fields}, upsert=True))
    for start in range(0, len(writes), BATCH):
        await driver.bulk_write(database[OLD_VOCABULARY], writes[start : start + BATCH], ordered=False)
    return len(writes)


async def backward(database: Any) -> None:
    await create_indexes(database, OLD_INDEXES)
    lists = await restore_slices(database)
    entries = await restore_vocabulary(database, lists)
    await database.drop_collection(INDEX)
    log.info("recall_index backward: %d core(s) restored, %d vocabulary entr(ies)", len(lists), entries)


class Forward:
    @free_fall_migration(document_models=[UnitCollection])
    async def move_recall_index(self, session: Any) -> None:
        await forward(_database())


class Backward:
    @free_fall_migration(document_models=[UnitCollection])
    async def restore_recall_collections(self, session: Any) -> None:
        await backward(_database())

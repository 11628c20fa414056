"""The embedded in-memory backend is mongomock as it is: whatever is written through it, however (inserts,
in-place updates, replacements, deletes, PyMongo's bulk requests), it stores and answers exactly what plain
mongomock stores and answers for the same writes; its shims only change the shape of the calls.

A test of the backend's own mechanism, so it imports the private module."""

from __future__ import annotations

import ast
import inspect
import pkgutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import mongomock
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymongo import DeleteMany, DeleteOne, InsertOne, ReplaceOne, UpdateMany, UpdateOne
from pymongo.errors import BulkWriteError

import partner_repo
from partner_repo.mongo import driver
from partner_repo.mongo._embedded import EmbeddedClient

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CORES = ["a", "b"]
WORDS = ["w0", "w1", "w2", "w3"]
INDEXES = [
    ([("core", 1), ("words", 1)], "core_words"),
    ([("core", 1), ("seq", 1)], "core_seq"),
    ([("core", 1), ("at", -1), ("_id", 1)], "core_at"),
    ([("tag", 1)], "tag"),
]

documents = st.fixed_dictionaries(
    {"core": st.sampled_from(CORES)},
    optional={
        "words": st.lists(st.sampled_from(WORDS), max_size=3),
        "seq": st.one_of(st.integers(0, 6), st.floats(0, 6), st.booleans()),
        "at": st.integers(0, 5).map(lambda days: T0 + timedelta(days=days)),
        "tag": st.one_of(
            st.none(), st.sampled_from(["x", "y"]), st.lists(st.sampled_from(["x", "y"]), max_size=2)
        ),
    },
)
cores = st.sampled_from(CORES)
days = st.integers(0, 5).map(lambda day: T0 + timedelta(days=day))


def on_core(**conditions: Any) -> Any:
    """Filters on one core and the given fields."""
    return st.fixed_dictionaries({"core": cores, **conditions})


filters = st.one_of(
    on_core(words=st.sampled_from(WORDS)),
    on_core(words=st.fixed_dictionaries({"$in": st.lists(st.sampled_from(WORDS))})),
    on_core(seq=st.fixed_dictionaries({"$gt": st.integers(-1, 6)})),
    on_core(seq=st.fixed_dictionaries({"$lte": st.floats(0, 6)})),
    on_core(at=st.fixed_dictionaries({"$gte": days})),
    on_core(),
    st.fixed_dictionaries({"tag": st.sampled_from(["x", "y", None])}),
    st.fixed_dictionaries({"_id": st.integers(0, 9)}),
    on_core(_id=st.fixed_dictionaries({"$in": st.lists(st.integers(0, 9))})),
)
updates = st.one_of(
    st.fixed_dictionaries({"$set": st.fixed_dictionaries({"core": st.sampled_from(CORES)})}),
    st.fixed_dictionaries({"$push": st.fixed_dictionaries({"words": st.sampled_from(WORDS)})}),
    st.fixed_dictionaries({"$inc": st.fixed_dictionaries({"seq": st.integers(-2, 2)})}),
    st.fixed_dictionaries({"$unset": st.fixed_dictionaries({"tag": st.just("")})}),
)
writes = st.lists(
    st.one_of(
        st.tuples(st.just("update_many"), filters, updates),
        st.tuples(st.just("update_one"), filters, updates),
        st.tuples(st.just("replace"), st.integers(0, 9), documents),
        st.tuples(st.just("delete_many"), filters, st.none()),
        st.tuples(st.just("insert"), st.integers(0, 12), documents),
    ),
    max_size=6,
)


async def collections() -> tuple[Any, Any]:
    """The same collection on the embedded backend and on plain mongomock, indexes declared on both."""
    embedded = EmbeddedClient(tz_aware=True)["db"]["c"]
    plain = mongomock.MongoClient(tz_aware=True)["db"]["c"]
    for keys, name in INDEXES:
        await embedded.create_index(keys, name=name)
        plain.create_index(keys, name=name)
    return embedded, plain


def request(write: tuple[str, Any, Any]) -> Any:
    """One write as PyMongo's bulk request."""
    kind, target, body = write
    if kind == "update_many":
        return UpdateMany(target, body)
    if kind == "update_one":
        return UpdateOne(target, body)
    if kind == "replace":
        return ReplaceOne({"_id": target}, body, upsert=True)
    if kind == "delete_many":
        return DeleteMany(target)
    return UpdateOne({"_id": target}, {"$setOnInsert": body}, upsert=True)


def apply(collection: Any, write: tuple[str, Any, Any]) -> None:
    """One write through plain mongomock's own method for it."""
    kind, target, body = write
    if kind == "update_many":
        collection.update_many(target, body)
    elif kind == "update_one":
        collection.update_one(target, body)
    elif kind == "replace":
        collection.replace_one({"_id": target}, body, upsert=True)
    elif kind == "delete_many":
        collection.delete_many(target)
    else:
        collection.update_one({"_id": target}, {"$setOnInsert": body}, upsert=True)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(documents, max_size=10), writes, st.lists(filters, min_size=1, max_size=5))
async def test_bulk_requests_store_and_find_what_mongomock_stores_and_finds_for_the_same_writes(
    stored: list[dict[str, Any]], changes: list[tuple[str, Any, Any]], asked: list[dict[str, Any]]
) -> None:
    embedded, plain = await collections()
    for number, document in enumerate(stored):
        await embedded.insert_one({**document, "_id": number})
        plain.insert_one({**document, "_id": number})
    if changes:
        await driver.bulk_write(embedded, [request(write) for write in changes])
    for write in changes:
        apply(plain, write)
    for query in asked:
        assert [row async for row in embedded.find(query)] == list(plain.find(query)), query


async def test_an_ordered_bulk_stops_at_its_first_error_and_says_which_operation_failed() -> None:
    embedded, _ = await collections()
    await embedded.insert_one({"_id": 1, "core": "a"})

    result = await driver.bulk_write(
        embedded,
        [
            UpdateOne({"_id": 1}, {"$inc": {"seq": 1}}),
            InsertOne({"_id": 2, "core": "a"}),
            DeleteOne({"_id": 9}),
        ],
    )
    assert (result.matched_count, result.inserted_count, result.deleted_count) == (1, 1, 0)
    with pytest.raises(BulkWriteError) as failed:
        await driver.bulk_write(
            embedded, [ReplaceOne({"_id": 1, "seq": 0}, {"core": "z"}, upsert=True), InsertOne({"_id": 3})]
        )

    assert [(e["index"], e["code"]) for e in failed.value.details["writeErrors"]] == [(0, 11000)]
    assert await embedded.find_one({"_id": 3}) is None


async def test_the_in_memory_database_of_either_stack_takes_pymongos_bulk_requests() -> None:
    database = partner_repo.in_memory_database("bulk")
    collection = database["c"]

    result = await driver.bulk_write(
        collection, [InsertOne({"_id": 1, "n": 0}), UpdateOne({"_id": 1}, {"$inc": {"n": 2}}, upsert=True)]
    )

    assert (result.inserted_count, result.modified_count) == (1, 1)
    assert await collection.find_one({"_id": 1}) == {"_id": 1, "n": 2}


PIPELINES = [
    [{"$match": {"core": "a"}}, {"$project": {"words": 1, "n": {"$size": {"$ifNull": ["$words", []]}}}}],
    [
        {"$match": {"core": "a"}},
        {"$match": {"seq": {"$gt": 1}}},
        {"$sort": {"seq": -1, "_id": 1}},
        {"$limit": 2},
    ],
    [{"$match": {"core": "b"}}, {"$limit": 3}, {"$count": "n"}],
    [{"$match": {"core": "a"}}, {"$unwind": "$words"}, {"$group": {"_id": "$words", "n": {"$sum": 1}}}],
    [{"$match": {"core": "a"}}, {"$facet": {"all": [{"$sort": {"_id": 1}}], "n": [{"$count": "n"}]}}],
    [{"$match": {"core": "a", "at": {"$gte": T0}}}, {"$project": {"at": 1, "later": {"$gt": ["$at", T0]}}}],
]


@pytest.mark.parametrize("pipeline", PIPELINES, ids=[str(n) for n in range(len(PIPELINES))])
async def test_an_aggregation_answers_what_mongomock_answers(pipeline: list[dict[str, Any]]) -> None:
    rows = [
        {
            "_id": n,
            "core": "a" if n % 3 else "b",
            "seq": n,
            "words": WORDS[: n % 4],
            "at": T0 + timedelta(days=n),
        }
        for n in range(12)
    ]
    embedded, plain = await collections()
    await embedded.insert_many([dict(row) for row in rows])
    plain.insert_many([dict(row) for row in rows])

    answer = await (await embedded.aggregate(pipeline, maxTimeMS=1000, hint="core_seq")).to_list(None)

    assert answer == list(plain.aggregate(pipeline))


def mongomocks_private_names() -> set[str]:
    """Every private name mongomock defines (module level, class members, instance attributes), less the ones
    PyMongo defines too (``_add_to_bulk`` is PyMongo's own protocol of its bulk requests)."""
    import pymongo.operations

    names: set[str] = set()
    for module in pkgutil.walk_packages(mongomock.__path__, "mongomock."):
        path = Path(inspect.getfile(mongomock)).parent / (
            module.name.split(".", 1)[1].replace(".", "/") + ".py"
        )
        if not path.exists():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            name = getattr(node, "attr", None) or getattr(node, "name", None) or getattr(node, "id", None)
            if isinstance(name, str) and name.startswith("_") and not name.startswith("__"):
                names.add(name)
    return names - {name for name in vars(pymongo.operations.UpdateOne) if name.startswith("_")}


def private_mongomock_reads(source: str, private: set[str]) -> list[str]:
    """Where ``source`` reads one of ``private`` from an object that is not its own (``self``, ``cls``), or
    imports one."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in private:
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if owner not in ("self", "cls"):
                found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mongomock"):
            found += [
                f"{node.lineno}: import {alias.name}" for alias in node.names if alias.name.startswith("_")
            ]
    return found


def test_no_module_of_the_library_reads_a_private_member_of_mongomock() -> None:
    private = mongomocks_private_names()
    assert {"_store", "_iter_documents", "_update", "_ensure_uniques"} <= private  # the scan sees them
    package = Path(partner_repo.__file__).parent

    reads = {
        str(path.relative_to(package)): found
        for path in sorted(package.rglob("*.py"))
        if (found := private_mongomock_reads(path.read_text(), private))
    }

    assert reads == {}


async def test_an_aggregation_reads_only_what_its_leading_match_selects() -> None:
    """mongomock's own aggregate copies the whole collection before its first stage; the embedded backend
    gives the leading ``$match`` to mongomock's ``find``, so a read costs what it selects."""
    embedded, _ = await collections()
    await embedded.insert_many([{"_id": n, "core": "a" if n < 3 else "b"} for n in range(100)])
    asked: list[Any] = []
    find = embedded._mongomock.find

    def recorded(*args: Any, **kwargs: Any) -> Any:
        asked.append(args[0] if args else None)
        return find(*args, **kwargs)

    embedded._mongomock.find = recorded

    rows = await (await embedded.aggregate([{"$match": {"core": "a"}}, {"$count": "n"}])).to_list(None)

    assert rows == [{"n": 3}] and asked == [{"core": "a"}]

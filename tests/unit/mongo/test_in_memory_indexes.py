"""The in-memory backend serves filters from the indexes declared on it, and answers exactly as mongomock
does without them: whatever was written, however (inserts, in-place updates, replacements, deletes, bulk
writes), a filter finds the same documents in the same order; only fewer are tested."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import mongomock
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymongo import DeleteMany, InsertOne, ReplaceOne, UpdateOne
from pymongo.errors import BulkWriteError

from partner_repo.mongo._embedded import EmbeddedClient
from partner_repo.mongo._mongomock_store import IndexedClient, IndexedCollectionStore
from partner_repo.mongo._pushdown import needed, plan

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


def collections() -> tuple[Any, Any]:
    """The same collection on the indexed backend and on plain mongomock, indexes declared on both."""
    indexed = IndexedClient(tz_aware=True)["db"]["c"]
    plain = mongomock.MongoClient(tz_aware=True)["db"]["c"]
    for keys, name in INDEXES:
        indexed.create_index(keys, name=name)
        plain.create_index(keys, name=name)
    return indexed, plain


def apply(collection: Any, write: tuple[str, Any, Any]) -> None:
    kind, target, body = write
    if kind == "update_many":
        collection.update_many(target, body)
    elif kind == "update_one":
        collection.update_one(target, body)
    elif kind == "replace":
        collection.replace_one({"_id": target}, body, upsert=True)
    elif kind == "delete_many":
        collection.delete_many(target)
    elif collection.find_one({"_id": target}) is None:
        collection.insert_one({**body, "_id": target})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(documents, max_size=10), writes, st.lists(filters, min_size=1, max_size=5))
def test_every_filter_finds_what_mongomock_finds_after_any_writes(
    stored: list[dict[str, Any]], changes: list[tuple[str, Any, Any]], asked: list[dict[str, Any]]
) -> None:
    indexed, plain = collections()
    for number, document in enumerate(stored):
        indexed.insert_one({**document, "_id": number})
        plain.insert_one({**document, "_id": number})
    for write in changes:
        apply(indexed, write)
        apply(plain, write)
    for query in asked:
        assert list(indexed.find(query)) == list(plain.find(query)), query


def test_a_filter_on_an_index_tests_only_the_documents_its_keys_name() -> None:
    indexed, _ = collections()
    indexed.insert_many([{"_id": n, "core": "a" if n % 10 else "b", "words": [f"w{n}"]} for n in range(1000)])
    store = indexed._store
    assert isinstance(store, IndexedCollectionStore)

    assert len(store.candidates({"core": "a", "words": "w7"}) or []) == 1
    assert len(store.candidates({"core": "b", "words": {"$in": ["w0", "w10", "w7"]}}) or []) == 2
    assert len(store.candidates({"_id": {"$in": [1, 2, 3000]}}) or []) == 2
    assert store.candidates({"words": "w7"}) is None  # no index starts with words: every document is tested


def test_an_update_in_place_moves_the_documents_keys() -> None:
    indexed, _ = collections()
    indexed.insert_one({"_id": 1, "core": "a", "words": ["w0"]})

    indexed.update_one({"_id": 1}, {"$set": {"words": ["w3"]}})
    indexed.update_many({"core": "a", "words": "w3"}, {"$set": {"core": "b"}})

    assert [row["_id"] for row in indexed.find({"core": "b", "words": "w3"})] == [1]
    assert list(indexed.find({"core": "a"})) == [] and list(indexed.find({"core": "b", "words": "w0"})) == []


def test_bulk_write_takes_pymongos_requests_and_stops_an_ordered_batch_at_its_first_error() -> None:
    indexed, _ = collections()
    indexed.insert_one({"_id": 1, "core": "a"})

    result = indexed.bulk_write(
        [
            UpdateOne({"_id": 1}, {"$inc": {"seq": 1}}),
            InsertOne({"_id": 2, "core": "a"}),
            DeleteMany({"_id": 9}),
        ]
    )
    assert (result.matched_count, result.inserted_count, result.deleted_count) == (1, 1, 0)
    try:
        indexed.bulk_write(
            [ReplaceOne({"_id": 1, "seq": 0}, {"core": "z"}, upsert=True), InsertOne({"_id": 3})]
        )
    except BulkWriteError as exc:
        assert [(e["index"], e["code"]) for e in exc.details["writeErrors"]] == [(0, 11000)]
    else:
        raise AssertionError("a replacement upserted over an existing _id must fail")
    assert indexed.find_one({"_id": 3}) is None  # the ordered batch stopped at its first error


def test_a_pipelines_read_takes_its_match_its_limit_and_the_fields_the_next_stage_needs() -> None:
    read = plan([{"$match": {"core": "a"}}, {"$limit": 5}, {"$count": "n"}])
    assert read is not None and (read.limit, read.projection, read.rest) == (5, {"_id": 1}, [{"$count": "n"}])
    projected = needed(
        {"$project": {"a.b": 1, "score": {"$multiply": ["$w.x", 2]}, "n": {"$size": "$$ROOT.l"}}}
    )
    assert projected is None  # $$ROOT: the whole document
    assert needed({"$project": {"a": 1, "a.b": 1, "s": {"$add": ["$w.x", "$w.y"]}}}) == {
        "_id": 1,
        "a": 1,
        "w.x": 1,
        "w.y": 1,
    }
    assert needed({"$project": {"big": 0}}) is None and needed({"$sort": {"a": 1}}) is None
    assert plan([{"$sort": {"a": 1}}]) is None


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
    [{"$match": {"core": "a"}}, {"$addFields": {"nested.x": 1}}, {"$sort": {"_id": 1}}],
    [{"$match": {"core": "a", "at": {"$gte": T0}}}, {"$project": {"at": 1, "later": {"$gt": ["$at", T0]}}}],
]


@pytest.mark.parametrize("pipeline", PIPELINES, ids=[str(n) for n in range(len(PIPELINES))])
async def test_an_aggregation_answers_what_mongomock_answers_and_leaves_the_documents_as_they_were(
    pipeline: list[dict[str, Any]],
) -> None:
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
    indexed = EmbeddedClient(tz_aware=True)["db"]["c"]
    plain = mongomock.MongoClient(tz_aware=True)["db"]["c"]
    for keys, name in INDEXES:
        await indexed.create_index(keys, name=name)
    await indexed.insert_many([dict(row) for row in rows])
    plain.insert_many([dict(row) for row in rows])

    answer = await (await indexed.aggregate(pipeline)).to_list(None)

    assert answer == list(plain.aggregate(pipeline))
    assert [row async for row in indexed.find({}, sort=[("_id", 1)])] == list(
        plain.find({}, sort=[("_id", 1)])
    )


def test_an_update_in_place_that_breaks_a_unique_index_is_refused_and_undone() -> None:
    indexed = IndexedClient()["db"]["c"]
    indexed.create_index([("slot", 1)], name="slot", unique=True)
    indexed.insert_many([{"_id": 1, "slot": 1}, {"_id": 2, "slot": 2}])

    with pytest.raises(mongomock.DuplicateKeyError):
        indexed.update_many({"_id": 2}, {"$set": {"slot": 1}})

    assert list(indexed.find({"slot": 2})) == [{"_id": 2, "slot": 2}]
    assert list(indexed.find({"slot": 1})) == [{"_id": 1, "slot": 1}]

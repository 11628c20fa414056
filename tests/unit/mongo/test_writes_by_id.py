"""The in-memory backend replaces and updates a document named by ``_id`` in one pass, and answers exactly as
mongomock does: the same results, the same errors, the same documents (fields in the same order) after any
sequence of fenced replacements, counter updates and upserts, with or without a match."""

from __future__ import annotations

from collections import OrderedDict
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import bson
import mongomock
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partner_repo.mongo._mongomock_store import IndexedClient
from partner_repo.mongo._writes_by_id import replace_by_id, stored_form, update_by_id

T0 = datetime(2026, 1, 1, 12, 30, 15, 123456, tzinfo=UTC)
INDEXES = [
    ([("core", 1), ("tags", 1)], {"name": "core_tags"}),
    ([("core", 1), ("n", 1)], {"name": "core_n"}),
    ([("slot", 1)], {"name": "slot", "unique": True, "sparse": True}),
]

ids = st.one_of(st.integers(0, 4), st.sampled_from(["a", "b"]))
numbers = st.one_of(st.integers(-3, 3), st.floats(-3, 3, allow_nan=False), st.just(float("nan")))
times = st.integers(0, 3).map(lambda days: T0 + timedelta(days=days, microseconds=days * 777))
values = st.one_of(
    numbers,
    st.sampled_from(["x", "y"]),
    times,
    times.map(lambda at: at.astimezone(timezone(timedelta(hours=2)))),
    st.lists(st.sampled_from(["t0", "t1", "t2"]), max_size=3),
    st.lists(times, max_size=2).map(tuple),
    st.fixed_dictionaries({"w": st.sampled_from(["t0", "t1"])}, optional={"at": times}),
    st.none(),
)
fields = st.sampled_from(["n", "rev", "core", "tags", "at", "slot"])
documents = st.dictionaries(fields, values, max_size=5).map(lambda d: {**d, "core": d.get("core", "c")})
conditions = st.fixed_dictionaries(
    {"_id": ids},
    optional={
        "core": st.sampled_from(["c", "d"]),
        "rev": st.one_of(st.just({"$exists": False}), st.integers(0, 2)),
        "n": st.fixed_dictionaries({"$lte": st.integers(-1, 2)}),
    },
)
updates = st.dictionaries(
    st.sampled_from(["$set", "$setOnInsert", "$inc", "$max", "$min"]),
    st.dictionaries(fields, st.one_of(numbers, values), min_size=1, max_size=2),
    min_size=1,
    max_size=3,
)
replacements = st.tuples(conditions, documents, st.booleans()).map(
    # a replacement may repeat the filter's _id (MongoDB refuses another one, and mongomock then leaves the
    # stored document changed: a bug of its own, not compared here)
    lambda drawn: ("replace", drawn[0], {"_id": drawn[0]["_id"], **drawn[1]} if drawn[2] else drawn[1])
)
writes = st.lists(
    st.one_of(
        st.tuples(replacements, st.booleans()).map(lambda drawn: (*drawn[0], drawn[1])),
        st.tuples(st.just("update"), conditions, updates, st.booleans()),
    ),
    max_size=8,
)


def collections() -> tuple[Any, Any]:
    """The same collection on the indexed backend and on plain mongomock, indexes declared on both."""
    indexed = IndexedClient(tz_aware=True)["db"]["c"]
    plain = mongomock.MongoClient(tz_aware=True)["db"]["c"]
    for keys, options in INDEXES:
        indexed.create_index(keys, **options)
        plain.create_index(keys, **options)
    return indexed, plain


def outcome(collection: Any, write: tuple[str, Any, Any, bool]) -> Any:
    """What a write answers: its counts, or the type (and code) of its error."""
    kind, spec, body, upsert = write
    try:
        if kind == "replace":
            result = collection.replace_one(spec, body, upsert=upsert)
        else:
            result = collection.update_one(spec, body, upsert=upsert)
    except Exception as exc:  # the error itself is what is compared
        return type(exc).__name__, getattr(exc, "code", None)
    return result.matched_count, result.modified_count, result.upserted_id


def stored(collection: Any) -> list[bytes]:
    """Every document in natural order, each as its BSON (fields in order, types told apart, NaN as NaN)."""
    return encoded(collection.find({}))


def encoded(documents: Any) -> list[bytes]:
    return [bson.encode(document) for document in documents]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(documents, max_size=4), writes)
def test_every_replacement_and_update_by_id_answers_and_stores_what_mongomock_does(
    initial: list[dict[str, Any]], changes: list[tuple[str, Any, Any, bool]]
) -> None:
    indexed, plain = collections()
    for number, document in enumerate(initial):
        for collection in (indexed, plain):
            outcome(collection, ("replace", {"_id": number}, document, True))
    for write in changes:
        assert outcome(indexed, write) == outcome(plain, write), write
        assert stored(indexed) == stored(plain), write
    for query in ({"core": "c"}, {"core": "d", "n": {"$gte": 0}}, {"core": "c", "tags": "t1"}):
        assert encoded(indexed.find(query)) == encoded(plain.find(query)), query


def test_a_fenced_replacement_that_lost_its_race_is_a_duplicate_key_and_writes_nothing() -> None:
    indexed, _ = collections()
    indexed.replace_one({"_id": "s", "rev": {"$exists": False}}, {"core": "c", "rev": 1}, upsert=True)

    with pytest.raises(mongomock.DuplicateKeyError):
        indexed.replace_one({"_id": "s", "rev": {"$exists": False}}, {"core": "c", "rev": 2}, upsert=True)

    assert indexed.find_one({"_id": "s"}) == {"_id": "s", "core": "c", "rev": 1}


def test_a_counter_upsert_takes_the_filters_equalities_and_its_operators() -> None:
    indexed, _ = collections()
    update = {"$max": {"last": 4}, "$setOnInsert": {"kind": "core"}, "$inc": {"n": 1}}

    indexed.update_one({"_id": "k", "core": "c"}, update, upsert=True)
    indexed.update_one({"_id": "k", "core": "c"}, {**update, "$max": {"last": 2}}, upsert=True)

    assert list(indexed.find({"core": "c", "n": 2})) == [
        {"_id": "k", "core": "c", "last": 4, "kind": "core", "n": 2}
    ]


def test_a_write_this_path_does_not_take_is_left_to_mongomock() -> None:
    indexed, _ = collections()
    assert update_by_id(indexed, {"_id": {"$in": ["a"]}}, {"$inc": {"n": 1}}, True) is None
    assert update_by_id(indexed, {"_id": "a"}, {"$push": {"tags": "t0"}}, True) is None
    assert update_by_id(indexed, {"_id": "a"}, {"$inc": {"n": 1}, "$set": {"n": 2}}, True) is None
    assert update_by_id(indexed, {"_id": "a"}, {"$set": {"w.x": 1}}, True) is None
    assert replace_by_id(indexed, {"_id": 1}, {"_id": 1.0, "core": "c"}, True) is None
    assert replace_by_id(indexed, {"core": "c"}, {"core": "c"}, True) is None


def test_a_stored_value_is_a_copy_with_its_times_as_mongomock_stores_them() -> None:
    given = OrderedDict(
        [("at", T0.astimezone(timezone(timedelta(hours=-5)))), ("tags", ("t0", ["t1"])), ("w", {"x": [1]})]
    )

    copied = stored_form(given)

    assert copied == mongomock.helpers.patch_datetime_awareness_in_document(given)
    assert isinstance(copied, OrderedDict) and copied["at"] == datetime(2026, 1, 1, 12, 30, 15, 123000)
    assert copied["w"]["x"] is not given["w"]["x"] and copied["tags"][1] is not given["tags"][1]

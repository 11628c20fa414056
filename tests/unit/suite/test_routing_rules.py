"""The routing checker of the command-routing test (tests/routing_rules.py), against the manual's rules:
a filter pinning the shard key goes to one shard, a range on a hashed key to all, and what a sharded cluster
refuses is reported."""

from __future__ import annotations

from typing import Any

import pytest

from tests.routing_rules import route

UNITS = "memory_units"
RECALL = "recall_index"


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ({"find": UNITS, "filter": {"_id": "u1"}}, "one"),
        ({"find": UNITS, "filter": {"_id": {"$eq": "u1"}, "version": 3}}, "one"),
        ({"find": UNITS, "filter": {"_id": {"$in": ["u1"]}}}, "one"),
        ({"find": UNITS, "filter": {"_id": {"$in": ["u1", "u2"]}}}, "some"),
        ({"find": UNITS, "filter": {"$or": [{"_id": "u1"}, {"_id": "u2"}]}}, "some"),
        ({"find": UNITS, "filter": {"$or": [{"_id": "u1"}, {"slice_ids": "s"}]}}, "all"),
        ({"find": UNITS, "filter": {"_id": {"$gt": "u1"}}}, "all"),  # a range on a hashed key pins nothing
        ({"find": UNITS, "filter": {"core_id": "c"}}, "all"),
        ({"aggregate": UNITS, "pipeline": [{"$match": {"_id": "u1"}}]}, "one"),
        ({"aggregate": UNITS, "pipeline": [{"$changeStream": {}}]}, "all"),
        ({"insert": UNITS, "documents": [{"_id": "u1"}]}, "one"),
        ({"update": UNITS, "updates": [{"q": {"core_id": "c"}, "u": {}, "multi": True}]}, "all"),
        ({"delete": UNITS, "deletes": [{"q": {"_id": {"$in": ["a", "b"]}}, "limit": 0}]}, "some"),
        ({"find": "memory_cores", "filter": {"idle_rolled": False}}, "unsharded"),
        ({"createIndexes": "erasures", "indexes": [{"name": "x", "key": {"a": 1}, "unique": True}]}, "admin"),
        ({"getMore": 1234, "collection": UNITS}, "admin"),
        ({"aggregate": RECALL, "pipeline": [{"$match": {"core_id": "c", "terms": "t"}}]}, "one"),
        ({"find": RECALL, "filter": {"terms": "t"}}, "all"),
        (
            {"update": RECALL, "updates": [{"q": {"_id": "s", "core_id": "c"}, "u": {}, "upsert": True}]},
            "one",
        ),
        ({"delete": RECALL, "deletes": [{"q": {"core_id": "c", "_id": {"$in": ["a"]}}, "limit": 0}]}, "one"),
    ],
)
def test_a_command_is_routed_as_the_manual_says(command: dict[str, Any], kind: str) -> None:
    assert route(command).kind == kind


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ({"update": UNITS, "updates": [{"q": {"core_id": "c"}, "u": {}, "upsert": True}]}, "an upsert"),
        ({"update": UNITS, "updates": [{"q": {"core_id": "c"}, "u": {}}]}, "single-document"),
        ({"delete": UNITS, "deletes": [{"q": {"core_id": "c"}, "limit": 1}]}, "single-document"),
        ({"findAndModify": UNITS, "query": {"version": 3}, "update": {}}, "single-document"),
        (
            {"createIndexes": UNITS, "indexes": [{"name": "s", "key": {"slice_ids": 1}, "unique": True}]},
            "not prefixed by the shard key",
        ),
        ({"create": "migration_backup_x", "autocommit": False}, "inside a transaction"),
        ({"update": RECALL, "updates": [{"q": {"_id": "s"}, "u": {}, "upsert": True}]}, "full shard key"),
        ({"update": RECALL, "updates": [{"q": {"core_id": "c"}, "u": {}, "upsert": True}]}, "full shard key"),
    ],
)
def test_what_a_sharded_cluster_refuses_is_reported_with_why(command: dict[str, Any], why: str) -> None:
    routed = route(command)

    assert routed.kind == "refused" and why in routed.why


def test_a_unique_index_led_by_id_is_allowed_on_a_collection_sharded_by_id() -> None:
    index = {"name": "f", "key": {"_id": 1, "version": 1}, "unique": True}

    assert route({"createIndexes": UNITS, "indexes": [index]}).kind == "admin"

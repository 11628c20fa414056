"""What recall puts on the wire (the real driver, a scripted mockupdb server): three round trips per recall
(four with an embedder: the codes scanned from their index, the nearest read with their vectors, then the
best slices' message vectors), an index write of four commands, and every command selects one core first
with a plain filter on the fields of one of ``recall_index``'s indexes (so a server serves it from that
index, and a cluster sharded on ``{core_id: 1, _id: 1}`` sends it to one shard); MongoDB Search is used only
when the probe finds it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime
from typing import Any

import pytest
from bson.binary import Binary
from mockupdb import MockupDB, Request

from partner_repo import MemorySlice, Message, RollingResult
from partner_repo.mongo import RECALL_INDEXES
from partner_repo.recall import Identity, MemoryRecall, RecallIndexer
from partner_repo.recall._keys import core_key
from partner_repo.recall._vectors import embedder_name, int8_vector, packed_int8, vector_code
from tests.wire.wire_support import cursor, motor_client, plain, receive, server_fixture

pytestmark = pytest.mark.wire

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
INDEX = "partner.recall_index"
INDEXED_FIELDS = [list(model.document["key"]) for model in RECALL_INDEXES]

server = server_fixture()


@pytest.fixture
async def client(server: MockupDB) -> AsyncIterator[Any]:
    async with motor_client(server, quiet_for=0.05) as client:
        yield client


def slice_row(**extra: Any) -> dict[str, Any]:
    return {
        "_id": '["s","u1","s1"]',
        "unit_id": "u1",
        "slice_id": "s1",
        "core_id": "c",
        "summary": "user: I adopted a puppy",
        "start": 4,
        "end": 6,
        "created_at": T0,
        "began_at": T0,
        "ended_at": T0,
        "topic": "puppy",
        "path": "puppi",
        "profile": {"activation": 0.5, "diffusion": 0.5, "independence": 0.5},
        "marks": {"puppi": "0:1.4"},
        "text": 1.2,
        **extra,
    }


def embedder(texts: list[str]) -> list[list[float]]:
    return [[1.0, 0.0, 0.5] for _ in texts]


def stages(request: Request) -> list[str]:
    return [next(iter(stage)) for stage in request.doc["pipeline"]]


def selection(request: Request) -> dict[str, Any]:
    """The filter a command selects documents with: a find's, or an aggregation's first ``$match``."""
    if "find" in request.doc:
        return dict(plain(request.doc["filter"]))
    return dict(plain(request.doc["pipeline"][0]["$match"]))


def assert_one_core_through_one_index(request: Request, core_id: str = "c") -> None:
    """The command selects ``core_id`` first, with equalities (and at most one ``$in`` or range, on the last
    field) on fields that begin one of the declared indexes: no ``$or``, nothing outside the index."""
    chosen = selection(request)
    assert chosen.get("core_id") == core_id, chosen
    assert not any(field.startswith("$") for field in chosen), chosen
    fields = list(chosen)
    assert any(sorted(fields) == sorted(index[: len(fields)]) for index in INDEXED_FIELDS), fields
    operators = [field for field, value in chosen.items() if isinstance(value, dict)]
    assert len(operators) <= 1, chosen


async def received(server: MockupDB, count: int) -> list[Request]:
    """``count`` requests, all received before any is answered: they were sent together."""
    return [await receive(server) for _ in range(count)]


def answer_counts(requests: Iterable[Request], nodes: list[dict[str, Any]] | None = None) -> None:
    """Round trip 1: each term's count, the core's counters, the nodes its words name."""
    for request in requests:
        assert_one_core_through_one_index(request)
        chosen = selection(request)
        if "find" in request.doc:
            assert chosen["_id"] == core_key("c")
            request.replies(cursor({"_id": core_key("c"), "slices": 3, "last_seq": 3}, ns=INDEX))
        elif "names" in chosen:
            assert stages(request) == ["$match", "$limit", "$project"]
            request.replies(cursor(*(nodes or []), ns=INDEX))
        else:
            assert stages(request) == ["$match", "$limit", "$count"]
            assert request.doc["pipeline"][1] == {"$limit": 513}
            request.replies(cursor({"n": 1}, ns=INDEX))


async def answer_messages(request: Request) -> None:
    assert request.doc["aggregate"] == "memory_units"
    # by _id first (each unit on its shard), the one core's units only
    assert plain(request.doc["pipeline"][0]["$match"]) == {"_id": {"$in": ["u1"]}, "core_id": "c"}
    request.replies(
        cursor({"_id": "u1", "picked": [{"role": "user", "content": "I adopted a puppy"}], "count": 6})
    )


async def test_without_mongodb_search_a_recall_is_three_round_trips_of_core_first_reads(
    client: Any, server: MockupDB
) -> None:
    recall = MemoryRecall(client["partner"], clock=lambda: T0)
    call = asyncio.create_task(recall.recall("c", "the puppy dog", max_messages=1))

    probe = await receive(server)
    assert stages(probe) == ["$listSearchIndexes"] and probe.doc["aggregate"] == "recall_index"
    probe.replies({"ok": 0, "errmsg": "$listSearchIndexes is only allowed on MongoDB Atlas", "code": 6047401})
    answer_counts(await received(server, 4))  # two terms' counts, the core, the named nodes
    [text] = await received(server, 1)
    assert_one_core_through_one_index(text)
    assert selection(text)["terms"] == {"$in": ["dog", "puppi"]}
    text.replies(cursor(slice_row(), ns=INDEX))
    await answer_messages(await receive(server))

    [found] = await call
    assert found.sources == ("text",) and [m.content for m in found.messages] == ["I adopted a puppy"]
    assert found.positions == (4,) and found.topic == "puppy"


async def test_the_channels_of_a_named_node_and_a_date_go_together_each_through_its_index(
    client: Any, server: MockupDB
) -> None:
    recall = MemoryRecall(client["partner"], clock=lambda: T0, search=False)
    call = asyncio.create_task(recall.recall("c", "the puppy yesterday", max_messages=1))
    node = {"_id": "n", "node": "puppi", "label": "puppy", "words": ["puppi"], "depth": 1, "slices": 1}

    answer_counts(await received(server, 4), nodes=[node])  # two terms, the core, the nodes
    channels = await received(server, 4)  # text, topic, related, date: sent together

    found = {}
    for request in channels:
        assert_one_core_through_one_index(request)
        found[next(field for field in selection(request) if field != "core_id")] = request
        request.replies(cursor(slice_row(), ns=INDEX))
    assert set(found) == {"terms", "path", "related", "days"}
    assert stages(found["path"])[1:] == ["$sort", "$limit", "$project"]  # newest first, from the index
    await answer_messages(await receive(server))
    [activated] = await call
    assert activated.sources == ("text", "topic", "related", "date")


async def test_with_mongodb_search_the_search_channels_go_beside_the_counts_filtered_by_core(
    client: Any, server: MockupDB
) -> None:
    recall = MemoryRecall(client["partner"], clock=lambda: T0, embedder=embedder)
    call = asyncio.create_task(recall.recall("c", "the puppy", max_messages=1, since=T0))

    probe = await receive(server)
    probe.replies(
        cursor(
            {"name": "recall_text", "type": "search", "queryable": True},
            {"name": "recall_vector", "type": "vectorSearch", "queryable": True},
            ns=INDEX,
        )
    )
    sent = await received(server, 5)  # the counts (one term), the core, the nodes, and both search channels
    searches = {stages(r)[0]: r for r in sent if "pipeline" in r.doc and stages(r)[0] != "$match"}
    vector = plain(searches["$vectorSearch"].doc["pipeline"][0]["$vectorSearch"])
    assert vector["index"] == "recall_vector" and vector["path"] == "vector"
    assert vector["filter"]["core_id"] == {"$eq": "c"} and set(vector["filter"]) >= {"core_id", "vtag"}
    assert vector["limit"] == 20 and vector["numCandidates"] == 200
    query = searches["$vectorSearch"].doc["pipeline"][0]["$vectorSearch"]["queryVector"]
    assert isinstance(query, Binary) and query.subtype == 9  # the stored vectors' type (int8): else no match
    search = plain(searches["$search"].doc["pipeline"][0]["$search"])
    assert {"equals": {"path": "core_id", "value": "c"}} in search["compound"]["filter"]
    searches["$vectorSearch"].replies(cursor(slice_row(), ns=INDEX))
    searches["$search"].replies(cursor(ns=INDEX))
    answer_counts(request for request in sent if request not in searches.values())
    [text] = await received(server, 1)
    text.replies(cursor(slice_row(), ns=INDEX))
    [vectors] = await received(server, 1)  # the best slices' message vectors, by _id
    assert_one_core_through_one_index(vectors)
    assert plain(vectors.doc["projection"]) == {"unit_id": 1, "slice_id": 1, "mvectors": 1}
    vectors.replies(cursor(ns=INDEX))
    await answer_messages(await receive(server))

    [found] = await call
    assert found.sources == ("text", "vector")


async def test_with_an_embedder_and_no_vector_search_a_recall_is_four_round_trips_and_scans_codes_covered(
    client: Any, server: MockupDB
) -> None:
    identity = Identity(embedder_name(embedder), 3)
    recall = MemoryRecall(client["partner"], clock=lambda: T0, embedder=embedder)
    call = asyncio.create_task(recall.recall("c", "the puppy dog", max_messages=1))

    probe = await receive(server)
    probe.replies({"ok": 0, "errmsg": "$listSearchIndexes is only allowed on MongoDB Atlas", "code": 6047401})
    first = await received(server, 5)  # two terms' counts, the core, the named nodes, the codes
    [codes] = [r for r in first if "pipeline" in r.doc and "vtag" in selection(r)]
    assert plain(codes.doc["pipeline"]) == [
        {"$match": {"core_id": "c", "vtag": identity.tag}},
        {"$project": {"_id": 0, "vcode": 1}},  # the core_vectors index alone answers it
    ]
    assert_one_core_through_one_index(codes)
    assert codes.doc["cursor"]["batchSize"] >= 10_000  # every code in the first batch: no getMore
    codes.replies(cursor({"vcode": vector_code(7, [1.0, 0.0, 0.5])}, ns=INDEX))
    for request in first:
        if request is not codes and "find" in request.doc:
            core = {"_id": core_key("c"), "slices": 3, "last_seq": 7, "embedder": identity.as_document()}
            request.replies(cursor(core, ns=INDEX))
    answer_counts(r for r in first if r is not codes and "find" not in r.doc)
    second = await received(server, 2)  # the text channel and the nearest codes' vectors, together
    for request in second:
        assert_one_core_through_one_index(request)
    [nearest] = [r for r in second if "seq" in selection(r)]
    assert selection(nearest)["seq"] == {"$in": [7]}
    nearest.replies(cursor(slice_row(seq=7, vector=int8_vector([1.0, 0.0, 0.5])), ns=INDEX))
    [text] = [r for r in second if r is not nearest]
    text.replies(cursor(ns=INDEX))
    [vectors] = await received(server, 1)  # round trip 3: the best slices' message vectors, by _id
    assert_one_core_through_one_index(vectors)
    vectors.replies(cursor({**slice_row(), "mvectors": packed_int8([[1.0, 0.0, 0.5]] * 2)}, ns=INDEX))
    await answer_messages(await receive(server))  # round trip 4

    [found] = await call
    assert found.sources == ("vector",) and [m.content for m in found.messages] == ["I adopted a puppy"]


async def test_search_false_never_probes(client: Any, server: MockupDB) -> None:
    recall = MemoryRecall(client["partner"], clock=lambda: T0, search=False)
    call = asyncio.create_task(recall.recall("c", "the puppy", max_messages=1))
    answer_counts(await received(server, 3))
    [text] = await received(server, 1)
    text.replies(cursor(slice_row(), ns=INDEX))
    await answer_messages(await receive(server))
    assert len(await call) == 1


async def test_an_index_write_is_four_commands_each_on_the_slices_core_or_unit(
    client: Any, server: MockupDB
) -> None:
    said = [Message(role="user", content="I adopted a puppy", at=T0)]
    piece = MemorySlice(id="s1", start_index=0, end_index=1, summary="a puppy", created_at=T0)
    write = asyncio.create_task(
        RecallIndexer(client["partner"]).consume(RollingResult.from_slice("u1", "c", piece, said))
    )

    read = await receive(server)
    assert_one_core_through_one_index(read)
    assert selection(read)["_id"] == {"$in": ['["s","u1","s1"]', core_key("c")]}
    read.replies(cursor({"_id": core_key("c"), "slices": 2, "last_seq": 2}, ns=INDEX))
    window = await receive(server)
    assert_one_core_through_one_index(window)
    assert selection(window)["seq"] == {"$gt": 2 - 64}
    window.replies(cursor({"terms": ["puppi"], "ancestors": ["puppi"]}, ns=INDEX))
    update = await receive(server)
    assert update.doc["update"] == "recall_index" and update.doc["ordered"] is True
    statements = [plain(statement) for statement in update.doc["updates"]]
    assert all(s["q"]["core_id"] == "c" and "_id" in s["q"] for s in statements)  # the full shard key
    assert statements[0]["q"]["revision"] == {"$exists": False} and statements[0]["upsert"] is True
    update.replies({"ok": 1, "n": len(statements), "nModified": 0, "upserted": [{"index": 0, "_id": "x"}]})
    fence = await receive(server)  # the slice's unit: erased meanwhile? (by _id: one shard)
    assert fence.command_name == "find" and fence.doc["find"] == "memory_units"
    assert plain(fence.doc["filter"])["_id"] == {"$in": ["u1"]}
    fence.replies(cursor())

    await write

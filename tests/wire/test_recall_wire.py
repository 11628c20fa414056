"""What MemoryRecall puts on the wire (the real driver, a scripted mockupdb server): three aggregations per
recall, the core filter before anything is ranked, and MongoDB Search used only when the probe finds it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from mockupdb import MockupDB, Request

from partner_repo.recall import MemoryRecall
from tests.wire.wire_support import cursor, motor_client, plain, receive, server_fixture

pytestmark = pytest.mark.wire

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
VOCABULARY = "partner.recall_vocabulary"
SLICES = "partner.recall_slices"

server = server_fixture()


@pytest.fixture
async def client(server: MockupDB) -> AsyncIterator[Any]:
    async with motor_client(server, quiet_for=0.05) as client:
        yield client


def slice_row(**extra: Any) -> dict[str, Any]:
    return {
        "_id": {"u": "u1", "s": "s1"},
        "unit_id": "u1",
        "slice_id": "s1",
        "core_id": "c",
        "summary": "user: I adopted a puppy",
        "start": 4,
        "end": 6,
        "created_at": T0,
        "began_at": T0,
        "ended_at": T0,
        "topic": "puppi",
        "profile": {"activation": 0.5, "diffusion": 0.5, "independence": 0.5},
        "marks": {"puppi": [[0, 1.4]]},
        **extra,
    }


def embedder(texts: list[str]) -> list[list[float]]:
    return [[1.0, 0.0, 0.5] for _ in texts]


def stages(request: Request) -> list[str]:
    return [next(iter(stage)) for stage in request.doc["pipeline"]]


async def answer_lookup(request: Request) -> None:
    assert request.doc["aggregate"] == "recall_vocabulary"
    assert stages(request) == ["$match", "$facet"]  # one document back, however many terms and nodes
    match = plain(request.doc["pipeline"][0]["$match"])
    term_ids = match["$or"][0]["_id"]["$in"]
    assert {"c": "c", "k": "term", "v": "puppi"} in term_ids and {"c": "c", "k": "core", "v": ""} in term_ids
    counts = [{"kind": "core", "value": "", "slices": 3}, {"kind": "term", "value": "puppi", "slices": 1}]
    request.replies(cursor({"counts": counts, "nodes": []}, ns=VOCABULARY))


async def answer_candidates(request: Request, **channels: list[dict[str, Any]]) -> None:
    assert request.doc["aggregate"] == "recall_slices"
    assert stages(request) == ["$match", "$project", "$facet"]
    match = plain(request.doc["pipeline"][0]["$match"])
    assert match["core_id"] == "c"  # the core is a filter of the first stage: applied before ranking
    assert {"terms": {"$in": ["puppi"]}} in match["$or"]
    request.replies(cursor({"text": [slice_row(text=1.2)], **channels}, ns=SLICES))


async def answer_messages(request: Request) -> None:
    assert request.doc["aggregate"] == "memory_units"
    assert plain(request.doc["pipeline"][0]["$match"])["_id"] == {"$in": ["u1"]}
    request.replies(
        cursor({"_id": "u1", "picked": [{"role": "user", "content": "I adopted a puppy"}], "count": 6})
    )


async def test_without_mongodb_search_a_recall_is_three_aggregations_after_one_probe(
    client: Any, server: MockupDB
) -> None:
    recall = MemoryRecall(client["partner"], clock=lambda: T0)
    call = asyncio.create_task(recall.recall("c", "the puppy", max_messages=1))

    probe = await receive(server)
    assert stages(probe) == ["$listSearchIndexes"] and probe.doc["aggregate"] == "recall_slices"
    probe.replies(
        {"ok": 0, "errmsg": "$listSearchIndexes stage is only allowed on MongoDB Atlas", "code": 6047401}
    )
    await answer_lookup(await receive(server))
    await answer_candidates(await receive(server))
    await answer_messages(await receive(server))

    [found] = await call
    assert found.sources == ("text",) and [m.content for m in found.messages] == ["I adopted a puppy"]
    assert found.positions == (4,)

    again = asyncio.create_task(recall.recall("c", "the puppy", max_messages=1))
    await answer_lookup(await receive(server))  # probed once: the next recall goes straight to the lookup
    await answer_candidates(await receive(server))
    await answer_messages(await receive(server))
    assert len(await again) == 1


async def test_with_mongodb_search_the_search_channels_go_beside_the_lookup_filtered_by_core(
    client: Any, server: MockupDB
) -> None:
    recall = MemoryRecall(client["partner"], clock=lambda: T0, embedder=embedder)
    call = asyncio.create_task(recall.recall("c", "the puppy", max_messages=1, since=T0))

    probe = await receive(server)
    probe.replies(
        cursor(
            {"name": "recall_text", "type": "search", "queryable": True},
            {"name": "recall_vector", "type": "vectorSearch", "queryable": True},
            ns=SLICES,
        )
    )
    sent = [await receive(server) for _ in range(3)]  # sent together: the lookup and both search channels
    by_stage = {stages(request)[0]: request for request in sent}
    assert set(by_stage) == {"$match", "$vectorSearch", "$search"}

    vector = plain(by_stage["$vectorSearch"].doc["pipeline"][0]["$vectorSearch"])
    assert vector["index"] == "recall_vector" and vector["path"] == "vector"
    assert vector["queryVector"] == [1.0, 0.0, 0.5]
    assert vector["filter"]["core_id"] == {"$eq": "c"} and "ended_at" in vector["filter"]
    assert vector["numCandidates"] >= vector["limit"]
    search = plain(by_stage["$search"].doc["pipeline"][0]["$search"])
    assert search["index"] == "recall_text"
    assert {"equals": {"path": "core_id", "value": "c"}} in search["compound"]["filter"]

    by_stage["$vectorSearch"].replies(cursor(slice_row(), ns=SLICES))
    by_stage["$search"].replies(cursor(ns=SLICES))
    await answer_lookup(by_stage["$match"])
    await answer_candidates(await receive(server))
    await answer_messages(await receive(server))

    [found] = await call
    assert found.sources == ("text", "vector")


async def test_search_false_never_probes(client: Any, server: MockupDB) -> None:
    recall = MemoryRecall(client["partner"], clock=lambda: T0, search=False)
    call = asyncio.create_task(recall.recall("c", "the puppy", max_messages=1))
    await answer_lookup(await receive(server))
    await answer_candidates(await receive(server))
    await answer_messages(await receive(server))
    assert len(await call) == 1

"""What the repositories put on the wire: the real Motor driver against a scripted mockupdb server.

The test plays the server. It receives each command the driver sends (in a thread: mockupdb blocks), checks
it, and scripts the reply. Handshakes and heartbeats are answered automatically and never reach the test, so
every request a test receives is one round trip of the operation under test.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from mockupdb import MockupDB, Request

from partner_repo import (
    MAX_DOCUMENT_BYTES,
    ConflictError,
    DuplicateSliceId,
    MemorySlice,
    MemoryUnit,
    MemoryUnitRepository,
    Message,
    UnitTooLarge,
    init_repository,
)
from tests.wire.wire_support import cursor, motor_client, plain, server_fixture

pytestmark = pytest.mark.wire

T0 = datetime(2024, 3, 1, 10, 0, tzinfo=UTC)
NEW = [Message(role="user", content="new question"), Message(role="assistant", content="new answer")]


class Wire:
    """The scripted server side of one test, and a count of the round trips it served."""

    def __init__(self, server: MockupDB, client: Any) -> None:
        self.server = server
        self.database = client["partner"]
        self.round_trips = 0

    async def receives(self) -> Request:
        request = await asyncio.to_thread(self.server.receives, timeout=10)
        self.round_trips += 1
        return request

    async def has_request(self, wait: float) -> bool:
        return bool(await asyncio.to_thread(self.server.got, timeout=wait))

    async def nothing_more_was_sent(self) -> bool:
        return not await self.has_request(0.1)


server = server_fixture()


@pytest.fixture
async def wire(server: MockupDB) -> AsyncIterator[Wire]:
    async with motor_client(server, quiet_for=0, unexpected="a request was left unanswered") as client:
        yield Wire(server, client)


def command(request: Request) -> str:
    return str(next(iter(request.doc)))


def head(
    *,
    version: int = 7,
    message_count: int = 40,
    slice_count: int = 12,
    size_bytes: int = 9_000_000,
    last_slice_time: datetime = T0,
) -> dict[str, Any]:
    """What the server returns for the head projection of a large existing unit."""
    return {
        "_id": "u",
        "core_id": "c",
        "message_count": message_count,
        "slice_count": slice_count,
        "slice_ids": ["last"],  # the head projection's ``$slice: -1``: the last id only
        "size_bytes": size_bytes,
        "version": version,
        "updated_at": last_slice_time,
        "previous_unit_id": None,
        "slices": [
            {
                "id": "last",
                "start_index": 30,
                "end_index": 40,
                "summary": "stored summary",
                "created_at": last_slice_time,
            }
        ],
    }


DUPLICATE_KEY = {"n": 0, "writeErrors": [{"index": 0, "code": 11000, "errmsg": "E11000 duplicate key error"}]}


def the_claim(request: Request) -> dict[str, Any]:
    """The claim an insert into ``slice_id_claims`` writes, without its time."""
    assert command(request) == "insert" and request.doc["insert"] == "slice_id_claims"
    (document,) = request.doc["documents"]
    return {k: v for k, v in plain(document).items() if k != "claimed_at"}


def the_update(request: Request) -> dict[str, Any]:
    assert command(request) == "update" and request.doc["update"] == "memory_units"
    (statement,) = request.doc["updates"]
    return plain(statement)  # type: ignore[no-any-return]


# -- append -------------------------------------------------------------------------------------------------


async def test_append_reads_the_head_then_sends_one_guarded_push_of_only_the_increment(wire: Wire) -> None:
    units = MemoryUnitRepository(wire.database)
    call = asyncio.create_task(units.append("u", NEW, "the summary", core_id="c", created_at=T0))

    find = await wire.receives()
    assert command(find) == "find" and find.doc["filter"] == {"_id": "u"}
    projection = plain(find.doc["projection"])
    assert "conversation_messages" not in projection
    assert projection["slices"] == {"$slice": -1}
    find.replies(cursor(head(version=7, message_count=40)))

    update = await wire.receives()
    statement = the_update(update)
    slice_id = statement["q"]["slice_ids"]["$ne"]
    assert statement["q"] == {"_id": "u", "version": 7, "slice_ids": {"$ne": slice_id}}
    assert statement.get("multi") in (None, False) and statement.get("upsert") in (None, False)
    operators = statement["u"]
    assert set(operators) == {"$push", "$inc", "$max"}  # operators only: never a replacement document
    assert operators["$max"] == {"updated_at": T0.replace(tzinfo=None)}
    assert operators["$push"]["conversation_messages"] == {"$each": [m.model_dump() for m in NEW]}
    (pushed,) = operators["$push"]["slices"]["$each"]
    assert "$position" not in operators["$push"]["slices"]
    assert (pushed["id"], pushed["start_index"], pushed["end_index"], pushed["summary"]) == (
        slice_id,
        40,
        42,
        "the summary",
    )
    assert operators["$inc"]["version"] == 1 and operators["$inc"]["message_count"] == 2
    assert operators["$inc"]["slice_count"] == 1
    assert "stored summary" not in repr(update.doc)
    update.replies({"n": 1, "nModified": 1})

    piece = await call
    assert (piece.id, piece.start_index, piece.end_index, piece.created_at) == (slice_id, 40, 42, T0)
    assert wire.round_trips == 2
    assert await wire.nothing_more_was_sent()


async def test_append_creating_a_unit_sends_one_find_and_one_insert(wire: Wire) -> None:
    units = MemoryUnitRepository(wire.database)
    call = asyncio.create_task(units.append("fresh", NEW, "first", core_id="c", created_at=T0))

    find = await wire.receives()
    assert command(find) == "find"
    find.replies(cursor())

    insert = await wire.receives()
    assert command(insert) == "insert"
    (document,) = insert.doc["documents"]
    document = plain(document)
    assert document["_id"] == "fresh" and document["version"] == 1
    assert document["conversation_messages"] == [m.model_dump() for m in NEW]
    assert [(s["start_index"], s["end_index"]) for s in document["slices"]] == [(0, 2)]
    assert (document["message_count"], document["slice_count"]) == (2, 1)
    insert.replies({"n": 1})

    piece = await call
    assert (piece.start_index, piece.end_index) == (0, 2)
    assert wire.round_trips == 2
    assert await wire.nothing_more_was_sent()


async def test_a_push_that_lost_the_race_rereads_the_head_and_pushes_after_the_winner(wire: Wire) -> None:
    units = MemoryUnitRepository(wire.database)
    call = asyncio.create_task(units.append("u", NEW, "s", core_id="c", created_at=T0))

    (await wire.receives()).replies(cursor(head(version=7, message_count=40)))
    lost = await wire.receives()
    assert the_update(lost)["q"]["version"] == 7
    lost.replies({"n": 0, "nModified": 0})  # another writer bumped the version first

    reread = await wire.receives()
    assert command(reread) == "find"
    reread.replies(cursor(head(version=8, message_count=43, slice_count=13)))
    retry = await wire.receives()
    statement = the_update(retry)
    assert statement["q"]["version"] == 8
    (pushed,) = statement["u"]["$push"]["slices"]["$each"]
    assert (pushed["start_index"], pushed["end_index"]) == (43, 45)
    retry.replies({"n": 1, "nModified": 1})

    piece = await call
    assert (piece.start_index, piece.end_index) == (43, 45)
    assert wire.round_trips == 4


async def test_a_retried_append_with_a_stored_slice_id_returns_it_without_pushing(wire: Wire) -> None:
    units = MemoryUnitRepository(wire.database)
    call = asyncio.create_task(units.append("u", NEW, "s", core_id="c", slice_id="turn-9", created_at=T0))

    find = await wire.receives()
    assert plain(find.doc["filter"]) == {"_id": "u"}  # the head, by the shard key: no query by slice id
    find.replies(cursor(head(version=9, message_count=42)))
    claimed = await wire.receives()
    assert the_claim(claimed) == {"_id": "turn-9", "unit_id": "u"}
    claimed.replies(DUPLICATE_KEY)  # the first attempt claimed it
    holder = await wire.receives()
    assert command(holder) == "find" and plain(holder.doc["filter"]) == {"_id": "turn-9"}
    holder.replies(cursor({"_id": "turn-9", "unit_id": "u"}))  # its own claim: go on
    update = await wire.receives()
    assert the_update(update)["q"] == {"_id": "u", "version": 9, "slice_ids": {"$ne": "turn-9"}}
    update.replies({"n": 0, "nModified": 0})  # the unit already holds turn-9: the first attempt landed

    lookup = await wire.receives()
    assert command(lookup) == "find"
    assert plain(lookup.doc["projection"]) == {"slices": {"$elemMatch": {"id": "turn-9"}}}
    stored = {"id": "turn-9", "start_index": 40, "end_index": 42, "summary": "s", "created_at": T0}
    lookup.replies(cursor({"_id": "u", "slices": [stored]}))

    piece = await call
    assert (piece.id, piece.start_index, piece.end_index) == ("turn-9", 40, 42)
    assert wire.round_trips == 5
    assert await wire.nothing_more_was_sent()


async def test_a_freshly_minted_slice_id_keeps_every_round_trip_on_the_units_shard(wire: Wire) -> None:
    units = MemoryUnitRepository(wire.database)
    call = asyncio.create_task(
        units.append("u", NEW, "s", core_id="c", slice_id="minted-1", fresh_slice_id=True, created_at=T0)
    )

    find = await wire.receives()
    assert command(find) == "find" and find.doc["filter"] == {"_id": "u"}  # no fan-out query by slice id
    find.replies(cursor(head(version=3, message_count=10)))
    update = await wire.receives()
    assert the_update(update)["q"] == {"_id": "u", "version": 3, "slice_ids": {"$ne": "minted-1"}}
    update.replies({"n": 1, "nModified": 1})

    piece = await call
    assert (piece.id, piece.start_index, piece.end_index) == ("minted-1", 10, 12)
    assert wire.round_trips == 2
    assert await wire.nothing_more_was_sent()


async def test_a_slice_id_held_by_another_unit_is_refused_without_a_write(wire: Wire) -> None:
    units = MemoryUnitRepository(wire.database)
    call = asyncio.create_task(units.append("u", NEW, "s", core_id="c", slice_id="taken"))

    (await wire.receives()).replies(cursor(head()))
    claimed = await wire.receives()
    assert the_claim(claimed) == {"_id": "taken", "unit_id": "u"}
    claimed.replies(DUPLICATE_KEY)
    (await wire.receives()).replies(cursor({"_id": "taken", "unit_id": "other"}))
    resolved = await wire.receives()  # who holds it is read from the claim's unit, by its id
    assert plain(resolved.doc["filter"]) == {"_id": "other", "slice_ids": "taken"}
    resolved.replies(cursor({"_id": "other"}))

    with pytest.raises(DuplicateSliceId, match=r"'taken' is already used by unit 'other'$"):
        await call
    assert wire.round_trips == 4
    assert await wire.nothing_more_was_sent()


async def test_an_append_past_16_mib_fails_before_anything_is_sent(wire: Wire) -> None:
    units = MemoryUnitRepository(wire.database)
    big = [Message(role="user", content="x" * 200)]
    call = asyncio.create_task(units.append("u", big, "s", core_id="c"))

    (await wire.receives()).replies(cursor(head(size_bytes=MAX_DOCUMENT_BYTES - 100)))

    with pytest.raises(UnitTooLarge) as refused:
        await call
    assert refused.value.unit_id == "u" and refused.value.size_bytes > MAX_DOCUMENT_BYTES
    assert wire.round_trips == 1
    assert await wire.nothing_more_was_sent()


# -- reads --------------------------------------------------------------------------------------------------


async def test_slice_messages_fetches_only_the_slices_interval(wire: Wire) -> None:
    units = MemoryUnitRepository(wire.database)
    call = asyncio.create_task(units.slice_messages("u", "s2"))

    lookup = await wire.receives()
    assert plain(lookup.doc["projection"]) == {"slices": {"$elemMatch": {"id": "s2"}}}
    lookup.replies(
        cursor(
            {
                "_id": "u",
                "slices": [{"id": "s2", "start_index": 4, "end_index": 7, "summary": "", "created_at": T0}],
            }
        )
    )

    fetch = await wire.receives()
    assert command(fetch) == "find" and fetch.doc["filter"] == {"_id": "u"}
    projection = plain(fetch.doc["projection"])
    assert projection["conversation_messages"] == {"$slice": [4, 3]}
    assert "slices" not in projection
    interval = [{"role": "user", "content": f"m{i}"} for i in range(4, 7)]
    fetch.replies(cursor({"_id": "u", "message_count": 10, "conversation_messages": interval}))

    assert [m.content for m in await call] == ["m4", "m5", "m6"]
    assert wire.round_trips == 2


async def test_tail_messages_fetches_only_the_last_n_and_the_head(wire: Wire) -> None:
    units = MemoryUnitRepository(wire.database)
    call = asyncio.create_task(units.tail_messages("u", 3))

    fetch = await wire.receives()
    assert command(fetch) == "find" and fetch.doc["filter"] == {"_id": "u"}
    projection = plain(fetch.doc["projection"])
    assert projection["conversation_messages"] == {"$slice": -3}
    assert projection["slices"] == {"$slice": -1} and projection["slice_ids"] == {"$slice": -1}
    fetch.replies(
        cursor(
            {
                "_id": "u",
                "core_id": "c",
                "message_count": 40,
                "slice_count": 12,
                "slice_ids": ["last"],
                "size_bytes": 9_000,
                "version": 7,
                "conversation_messages": [{"role": "assistant", "content": c} for c in ("x", "y", "z")],
            }
        )
    )

    assert [m.content for m in await call] == ["x", "y", "z"]
    assert wire.round_trips == 1


# -- append: the remembered head ----------------------------------------------------------------------------


async def append_once(wire: Wire, units: MemoryUnitRepository) -> None:
    """A first append to ``u`` (head read, then push): the repository now remembers the head it pushed to."""
    call = asyncio.create_task(units.append("u", NEW, "first", core_id="c", created_at=T0))
    (await wire.receives()).replies(cursor(head(version=7, message_count=40, slice_count=12)))
    (await wire.receives()).replies({"n": 1, "nModified": 1})
    await call


@pytest.mark.parametrize("slice_options", [{}, {"slice_id": "minted-2", "fresh_slice_id": True}])
async def test_a_second_append_from_the_same_repository_is_one_guarded_push(
    wire: Wire, slice_options: dict[str, Any]
) -> None:
    units = MemoryUnitRepository(wire.database)
    await append_once(wire, units)
    call = asyncio.create_task(units.append("u", NEW, "second", core_id="c", created_at=T0, **slice_options))

    update = await wire.receives()
    statement = the_update(update)
    query = statement["q"]
    (pushed,) = statement["u"]["$push"]["slices"]["$each"]
    assert (query["_id"], query["version"], query["message_count"], query["slice_count"]) == ("u", 8, 42, 13)
    assert query["size_bytes"] > 9_000_000  # the size the first push left, guarded like the version
    if "slice_id" in slice_options:  # a caller's id may be a retry's: its absence is part of the guard
        assert query["slice_ids"] == {"$ne": "minted-2"} and pushed["id"] == "minted-2"
    else:  # minted by this call: it cannot be in the unit
        assert "slice_ids" not in query
    assert (pushed["start_index"], pushed["end_index"]) == (42, 44)
    update.replies({"n": 1, "nModified": 1})

    piece = await call
    assert (piece.id, piece.start_index, piece.end_index) == (pushed["id"], 42, 44)
    assert wire.round_trips == 3
    assert await wire.nothing_more_was_sent()


async def test_a_stale_remembered_head_falls_back_to_reading_the_head_and_pushes_after_the_winner(
    wire: Wire,
) -> None:
    units = MemoryUnitRepository(wire.database)
    await append_once(wire, units)
    call = asyncio.create_task(units.append("u", NEW, "second", core_id="c", created_at=T0))

    stale = await wire.receives()
    assert the_update(stale)["q"]["version"] == 8
    stale.replies({"n": 0, "nModified": 0})  # another writer appended since

    reread = await wire.receives()
    assert command(reread) == "find" and reread.doc["filter"] == {"_id": "u"}
    reread.replies(cursor(head(version=10, message_count=47, slice_count=15)))
    retry = await wire.receives()
    statement = the_update(retry)
    assert statement["q"]["version"] == 10 and "message_count" not in statement["q"]
    (pushed,) = statement["u"]["$push"]["slices"]["$each"]
    assert (pushed["start_index"], pushed["end_index"]) == (47, 49)
    retry.replies({"n": 1, "nModified": 1})

    piece = await call
    assert (piece.start_index, piece.end_index) == (47, 49)
    assert wire.round_trips == 2 + 3
    assert await wire.nothing_more_was_sent()


async def test_a_caller_chosen_slice_id_never_uses_the_remembered_head(wire: Wire) -> None:
    units = MemoryUnitRepository(wire.database)
    await append_once(wire, units)
    call = asyncio.create_task(units.append("u", NEW, "s", core_id="c", slice_id="turn-9", created_at=T0))

    find = await wire.receives()  # the head is read again: the id is claimed, then pushed guarded by it
    assert plain(find.doc["filter"]) == {"_id": "u"}
    find.replies(cursor(head(version=8, message_count=42, slice_count=13)))
    claimed = await wire.receives()
    assert the_claim(claimed) == {"_id": "turn-9", "unit_id": "u"}
    claimed.replies({"n": 1})
    update = await wire.receives()
    assert the_update(update)["q"] == {"_id": "u", "version": 8, "slice_ids": {"$ne": "turn-9"}}
    update.replies({"n": 1, "nModified": 1})

    assert (await call).start_index == 42
    assert wire.round_trips == 2 + 3
    assert await wire.nothing_more_was_sent()


async def test_saving_a_unit_forgets_its_remembered_head(wire: Wire) -> None:
    units = MemoryUnitRepository(wire.database)
    await append_once(wire, units)
    unit = MemoryUnit(id="u", core_id="c", conversation_messages=NEW, updated_at=T0, version=8)
    saving = asyncio.create_task(units.save(unit))
    (await wire.receives()).replies({"n": 1, "nModified": 1})
    await saving
    call = asyncio.create_task(units.append("u", NEW, "after the save", core_id="c", created_at=T0))

    find = await wire.receives()
    assert command(find) == "find"
    find.replies(cursor(head(version=9, message_count=2, slice_count=0)))
    update = await wire.receives()
    assert the_update(update)["q"]["version"] == 9
    update.replies({"n": 1, "nModified": 1})

    assert (await call).start_index == 2
    assert await wire.nothing_more_was_sent()


# -- save ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("matched", "outcome"), [(1, "saved"), (0, "conflict")])
async def test_save_replaces_only_the_version_it_read(wire: Wire, matched: int, outcome: str) -> None:
    unit = MemoryUnit(id="u", core_id="c", conversation_messages=NEW, updated_at=T0, version=5)
    call = asyncio.create_task(MemoryUnitRepository(wire.database).save(unit))

    update = await wire.receives()
    statement = the_update(update)
    assert statement["q"] == {"_id": "u", "version": 5}
    assert statement["u"]["version"] == 6 and statement["u"]["message_count"] == 2
    update.replies({"n": matched, "nModified": matched})

    if outcome == "saved":
        assert (await call).version == 6
    else:
        with pytest.raises(ConflictError, match="changed since version 5"):
            await call


async def test_saving_a_unit_of_many_slices_claims_their_ids_in_one_read_and_one_insert(wire: Wire) -> None:
    said = [Message(role="user", content=f"m{n}") for n in range(300)]
    pieces = [
        MemorySlice(id=f"s{n}", start_index=n, end_index=n + 1, summary=f"s{n}", created_at=T0)
        for n in range(300)
    ]
    unit = MemoryUnit(
        id="u", core_id="c", conversation_messages=said, slices=pieces, updated_at=T0, version=5
    )
    call = asyncio.create_task(MemoryUnitRepository(wire.database).save(unit))

    holders = await wire.receives()
    assert command(holders) == "find" and holders.doc["find"] == "slice_id_claims"
    assert holders.doc["filter"] == {"_id": {"$in": [f"s{n}" for n in range(300)]}}
    holders.replies(cursor({"_id": "s0", "unit_id": "u"}))  # a claim of its own from an earlier try
    insert = await wire.receives()
    assert command(insert) == "insert" and insert.doc["ordered"] is False
    assert [d["_id"] for d in insert.doc["documents"]] == [f"s{n}" for n in range(1, 300)]
    assert {d["unit_id"] for d in insert.doc["documents"]} == {"u"}
    insert.replies({"n": 299})
    (await wire.receives()).replies({"n": 1, "nModified": 1})

    assert (await call).version == 6
    assert wire.round_trips == 3
    assert await wire.nothing_more_was_sent()


# -- indexes ------------------------------------------------------------------------------------------------


async def test_init_repository_asks_for_no_unique_slice_id_index_and_for_the_claims_index(wire: Wire) -> None:
    call = asyncio.create_task(init_repository(wire.database))
    created: dict[str, list[dict[str, Any]]] = {}
    while not call.done():
        if not await wire.has_request(0.05):
            continue
        request = await wire.receives()
        name = command(request)
        if name == "createIndexes":
            created.setdefault(request.doc["createIndexes"], []).extend(plain(request.doc["indexes"]))
            request.replies({})
        elif name == "buildInfo":
            request.replies({"version": "7.0.12", "versionArray": [7, 0, 12, 0]})
        elif name in {"find", "listCollections", "listIndexes", "aggregate"}:
            request.replies(cursor())
        else:
            request.replies({})
    await call

    by_name = {index["name"]: index for index in created["memory_units"]}
    assert by_name["slice_ids"] == {"name": "slice_ids", "key": {"slice_ids": 1}}
    assert not any(index.get("unique") for index in created["memory_units"])
    assert created["slice_id_claims"] == [{"name": "unit", "key": {"unit_id": 1}}]
    assert by_name["core_updated"]["key"] == {"core_id": 1, "updated_at": -1}
    assert "memory_cores" in created

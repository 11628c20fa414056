"""MongoDB's 16 MiB document limit: a write that would pass it fails with ``UnitTooLarge``, unsent."""

from __future__ import annotations

from typing import Any

import bson
import pytest

from partner_repo import (
    MAX_DOCUMENT_BYTES,
    MemoryUnit,
    MemoryUnitRepository,
    Message,
    PartnerRepoError,
    UnitTooLarge,
)

SMALL_LIMIT = 2_000


class CountingDatabase:
    """Counts the write calls reaching the units collection, to show a refused write was never sent."""

    WRITES = frozenset({"insert_one", "update_one", "replace_one", "find_one_and_update", "bulk_write"})

    def __init__(self, database: Any) -> None:
        self._database = database
        self.writes: list[str] = []

    def __getitem__(self, name: str) -> Any:
        return _CountingCollection(self._database[name], self.writes)


class _CountingCollection:
    def __init__(self, collection: Any, writes: list[str]) -> None:
        self._collection = collection
        self._writes = writes

    def __getattr__(self, name: str) -> Any:
        if name in CountingDatabase.WRITES:
            self._writes.append(name)
        return getattr(self._collection, name)


@pytest.fixture
def counting(memory_db: Any) -> CountingDatabase:
    return CountingDatabase(memory_db)


def text(size: int) -> list[Message]:
    return [Message(role="user", content="x" * size)]


async def test_append_creating_an_oversized_unit_is_refused_unsent(counting: CountingDatabase) -> None:
    units = MemoryUnitRepository(counting, max_document_bytes=SMALL_LIMIT)

    with pytest.raises(UnitTooLarge) as refused:
        await units.append("big", text(SMALL_LIMIT), "s", core_id="c")

    assert counting.writes == []
    assert await units.get("big") is None
    assert refused.value.unit_id == "big" and refused.value.limit_bytes == SMALL_LIMIT
    assert refused.value.size_bytes > SMALL_LIMIT
    assert "'big'" in str(refused.value) and str(refused.value.size_bytes) in str(refused.value)


async def test_append_taking_a_unit_past_the_limit_is_refused_unsent(counting: CountingDatabase) -> None:
    units = MemoryUnitRepository(counting, max_document_bytes=SMALL_LIMIT)
    await units.append("u", text(1_000), "fits", core_id="c")
    before = await units.get("u")
    counting.writes.clear()

    with pytest.raises(UnitTooLarge) as refused:
        await units.append("u", text(1_000), "does not fit", core_id="c")

    assert counting.writes == []
    assert await units.get("u") == before
    assert isinstance(refused.value, PartnerRepoError)
    assert refused.value.unit_id == "u" and refused.value.size_bytes > SMALL_LIMIT


async def test_the_refused_size_is_the_size_the_unit_would_have(memory_db: Any) -> None:
    """The same append without the limit produces a document of exactly the size the refusal named."""
    units = MemoryUnitRepository(memory_db, max_document_bytes=SMALL_LIMIT)
    await units.append("u", text(900), "fits", core_id="c")
    with pytest.raises(UnitTooLarge) as refused:
        await units.append("u", text(1_200), "does not fit", core_id="c", slice_id="the-slice")

    roomy = MemoryUnitRepository(memory_db)
    await roomy.append("u", text(1_200), "does not fit", core_id="c", slice_id="the-slice")
    raw = await memory_db["memory_units"].find_one({"_id": "u"})
    assert refused.value.size_bytes == len(bson.encode(raw)) == raw["size_bytes"]


async def test_save_of_an_oversized_unit_is_refused_unsent(counting: CountingDatabase) -> None:
    units = MemoryUnitRepository(counting, max_document_bytes=SMALL_LIMIT)

    with pytest.raises(UnitTooLarge, match="'u'"):
        await units.save(MemoryUnit(id="u", core_id="c", conversation_messages=text(SMALL_LIMIT)))

    assert counting.writes == []
    assert await units.get("u") is None


async def test_a_unit_exactly_at_the_limit_is_accepted(memory_db: Any) -> None:
    probe = MemoryUnitRepository(memory_db)
    await probe.append("probe", text(100), "s", core_id="c", slice_id="p")
    raw = await memory_db["memory_units"].find_one({"_id": "probe"})
    exact = len(bson.encode(raw))

    units = MemoryUnitRepository(memory_db, max_document_bytes=exact)
    await units.append("exact", text(100), "s", core_id="c", slice_id="q")
    stored = await memory_db["memory_units"].find_one({"_id": "exact"})
    assert stored is not None and len(bson.encode(stored)) == exact


async def test_the_real_16_mib_limit_is_enforced_before_sending(counting: CountingDatabase) -> None:
    """One unit just under MongoDB's limit: a small append fits, one more kibibyte does not."""
    units = MemoryUnitRepository(counting)
    await units.save(
        MemoryUnit(id="huge", core_id="c", conversation_messages=text(MAX_DOCUMENT_BYTES - 4_096))
    )
    head = await units.head("huge")
    assert head is not None and MAX_DOCUMENT_BYTES - 4_096 < head.size_bytes < MAX_DOCUMENT_BYTES - 1_024

    await units.append("huge", text(100), "fits", core_id="c")
    counting.writes.clear()
    with pytest.raises(UnitTooLarge) as refused:
        await units.append("huge", text(4_096), "does not fit", core_id="c")

    assert counting.writes == []
    assert refused.value.limit_bytes == MAX_DOCUMENT_BYTES == 16 * 1024 * 1024
    assert MAX_DOCUMENT_BYTES < refused.value.size_bytes < MAX_DOCUMENT_BYTES + 8_192
    stored = await units.head("huge")
    assert stored is not None and stored.message_count == 2

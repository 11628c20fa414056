"""The recall index's check and repair read what is there: a damaged document (a counter of another type, a
node missing a field, a lowered sequence number) is reported and repaired, once, and never raised on; the
readers of the index (``topics``, recall) keep answering meanwhile."""

from __future__ import annotations

from typing import Any

import pytest

from partner_repo.mongo import RECALL_INDEX
from partner_repo.recall import RecallIndexCheck
from tests.recall_support import (
    CONVERSATION,
    HIKE,
    History,
    assert_counters_derive_from_slices,
    index_state,
)

pytestmark = pytest.mark.asyncio


async def indexed(database: Any) -> History:
    history = History(database)
    await history.rolls("agent", CONVERSATION)
    return history


async def a_node(database: Any) -> dict[str, Any]:
    node = await database[RECALL_INDEX].find_one({"core_id": "agent", "kind": "node"})
    assert node is not None
    return dict(node)


async def damage(database: Any, selector: dict[str, Any], update: dict[str, Any]) -> None:
    result = await database[RECALL_INDEX].update_one({"core_id": "agent", **selector}, update)
    assert result.modified_count == 1


async def checked_then_repaired(database: Any) -> list[Any]:
    """What check finds, after which repair runs and check finds nothing more."""
    [found] = await RecallIndexCheck(database).check("agent")
    await RecallIndexCheck(database).repair("agent")
    assert [report.ok for report in await RecallIndexCheck(database).check("agent")] == [True]
    return [found]


async def test_a_node_counter_of_another_type_is_reported_and_repaired_while_topics_still_answer(
    database: Any,
) -> None:
    history = await indexed(database)
    node = await a_node(database)
    await damage(database, {"_id": node["_id"]}, {"$set": {"slices": "x"}})

    assert await history.recall().topics("agent") is not None  # read as none: no ValueError
    [found] = await checked_then_repaired(database)

    assert [(off.path, off.recorded) for off in found.nodes] == [(node["node"], None)]
    await assert_counters_derive_from_slices(database)


async def test_a_core_counter_stored_as_text_is_reported_and_repaired_so_indexing_goes_on(
    database: Any,
) -> None:
    history = await indexed(database)
    await damage(database, {"kind": "core"}, {"$set": {"slices": "4"}})

    [found] = await checked_then_repaired(database)
    await history.roll("agent", HIKE)  # indexed: its $inc meets a number again

    assert found.core is not None and (found.core.recorded, found.core.counted) == (None, 4)
    await assert_counters_derive_from_slices(database)


async def test_a_node_missing_its_depth_is_listed_by_topics_and_repaired_once(database: Any) -> None:
    history = await indexed(database)
    node = await a_node(database)
    await damage(database, {"_id": node["_id"]}, {"$unset": {"depth": ""}})

    listed = {topic.key or topic.path for topic in await history.recall().topics("agent")}
    [found] = await checked_then_repaired(database)

    assert node["node"] in listed
    assert found.damaged == [node["node"]]
    assert (await database[RECALL_INDEX].find_one({"_id": node["_id"]}))["depth"] == node["depth"]


async def test_a_lowered_last_sequence_number_is_reported_and_raised_so_no_number_is_taken_twice(
    database: Any,
) -> None:
    history = await indexed(database)
    await damage(database, {"kind": "core"}, {"$set": {"last_seq": 1}})

    [found] = await checked_then_repaired(database)
    await history.roll("agent", HIKE)

    assert found.sequence is not None and (found.sequence.recorded, found.sequence.counted) == (1, 4)
    _, slices = await index_state(database)
    assert sorted(row["seq"] for row in slices) == [1, 2, 3, 4, 5]


async def test_a_node_that_lost_its_path_field_is_found_by_its_id_and_repaired(database: Any) -> None:
    history = await indexed(database)
    node = await a_node(database)
    await damage(database, {"_id": node["_id"]}, {"$unset": {"node": "", "label": ""}})

    [found] = await checked_then_repaired(database)

    assert found.damaged == [node["node"]]
    assert node["node"] in {topic.key or topic.path for topic in await history.recall().topics("agent")}

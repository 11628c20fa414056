"""``RollingService.resummarize``: placeholder summaries (slices stored ``unsummarized``) are summarized again
from their raw messages and replaced only while the placeholder is still there, so runs never fight."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from partner_repo import (
    SUMMARY_ON_EXCEPTION,
    InvalidInput,
    MemoryCoreRepository,
    Message,
    RollingConfig,
    RollingResult,
    RollingService,
    UnitChecker,
)
from partner_repo.mongo import UNITS, bson_size
from tests.unit.rolling.support import T0, numbered

QUICK = RollingConfig(summarize_attempts=2, summarize_backoff=timedelta(0), retain_divisor=0)


async def down(messages: list[Message]) -> str:
    raise RuntimeError("model down")


async def back(messages: list[Message]) -> str:
    return f"summary of {messages[0].content} .. {messages[-1].content}"


async def failed_rolls(database: Any, core_id: str = "agent", rolls: int = 1) -> list[RollingResult]:
    """``rolls`` rolls of ``core_id`` while the summarizer is down: each stores a placeholder slice."""
    cores, service = MemoryCoreRepository(database), RollingService(database, down, QUICK)
    results = []
    for number in range(rolls):
        await cores.record(core_id, numbered(4 * number, 4 * number + 4), at=T0)
        result = await service.roll(core_id, now=T0 + timedelta(minutes=number))
        assert result is not None and result.unsummarized
        results.append(result)
    return results


async def stored_slices(database: Any, unit_id: str) -> list[dict[str, Any]]:
    return [dict(piece) for piece in (await database[UNITS].find_one({"_id": unit_id}))["slices"]]


async def test_the_placeholder_is_replaced_by_a_summary_of_the_slices_raw_messages(database: Any) -> None:
    [failed] = await failed_rolls(database)
    unit_id = failed.memory_unit.id
    version = (await database[UNITS].find_one({"_id": unit_id}))["version"]

    report = await RollingService(database, back, QUICK).resummarize()

    [replaced] = report.replaced
    assert (replaced.slice_id, replaced.revision) == (failed.slice_id, 1)
    assert replaced.summary == "summary of message 0 .. message 3" and not report.more
    [stored] = await stored_slices(database, unit_id)
    assert stored["summary"] == replaced.summary and stored["revision"] == 1
    assert "unsummarized" not in stored
    document = await database[UNITS].find_one({"_id": unit_id})
    assert document["version"] == version + 1
    assert document["size_bytes"] == bson_size(document)  # kept exact
    assert (await UnitChecker(database).check()).ok


async def test_only_placeholders_are_replaced(database: Any) -> None:
    [failed] = await failed_rolls(database)
    cores = MemoryCoreRepository(database)
    await cores.record("agent", numbered(10, 14), at=T0)
    working = await RollingService(database, back, QUICK).roll("agent", now=T0 + timedelta(minutes=5))
    assert working is not None and not working.unsummarized

    report = await RollingService(database, back, QUICK).resummarize()

    assert [r.slice_id for r in report.slices] == [failed.slice_id]
    first, second = await stored_slices(database, failed.memory_unit.id)
    assert first["revision"] == 1
    assert second["summary"] == working.summary and "revision" not in second


async def test_only_the_given_cores_placeholders_are_replaced(database: Any) -> None:
    [mine] = await failed_rolls(database, "mine")
    [theirs] = await failed_rolls(database, "theirs")

    report = await RollingService(database, back, QUICK).resummarize("mine")

    assert [r.slice_id for r in report.replaced] == [mine.slice_id]
    [stored] = await stored_slices(database, theirs.memory_unit.id)
    assert stored["summary"] == SUMMARY_ON_EXCEPTION and stored["unsummarized"] is True


async def test_a_summary_that_fails_again_keeps_the_placeholder_and_the_mark(database: Any) -> None:
    [failed] = await failed_rolls(database)

    report = await RollingService(database, down, QUICK).resummarize()

    [again] = report.failed
    assert again.slice_id == failed.slice_id and again.detail == "RuntimeError: model down"
    [stored] = await stored_slices(database, failed.memory_unit.id)
    assert stored["summary"] == SUMMARY_ON_EXCEPTION and stored["unsummarized"] is True
    assert "revision" not in stored


async def test_the_summarizer_given_is_used_instead_of_the_services(database: Any) -> None:
    await failed_rolls(database)

    report = await RollingService(database, down, QUICK).resummarize(summarizer=back)

    assert len(report.replaced) == 1


async def test_a_sync_summarizer_may_be_given(database: Any) -> None:
    await failed_rolls(database)

    service = RollingService(database, down, QUICK)

    report = await service.resummarize(summarizer=lambda messages: "in a thread")

    assert [r.summary for r in report.replaced] == ["in a thread"]


async def test_two_runs_at_once_replace_each_slice_once(database: Any) -> None:
    failed = await failed_rolls(database, rolls=3)
    both_summarizing = asyncio.Barrier(2)

    async def slow(messages: list[Message]) -> str:
        await both_summarizing.wait()  # both runs hold a summary of the same slice before either writes
        return f"summary of {messages[0].content}"

    one, other = await asyncio.gather(
        RollingService(database, slow, QUICK).resummarize(),
        RollingService(database, slow, QUICK).resummarize(),
    )

    replaced = sorted(r.slice_id for r in [*one.replaced, *other.replaced])
    assert replaced == sorted(r.slice_id for r in failed)
    assert len(one.skipped) + len(other.skipped) == len(failed)
    stored = await stored_slices(database, failed[0].memory_unit.id)
    assert [piece["revision"] for piece in stored] == [1, 1, 1]
    assert (await UnitChecker(database).check()).ok


async def test_a_run_after_another_finds_nothing_left(database: Any) -> None:
    await failed_rolls(database)
    service = RollingService(database, back, QUICK)
    await service.resummarize()

    report = await service.resummarize()

    assert report.slices == () and not report.more


async def test_the_limit_bounds_the_slices_tried_and_says_more_are_left(database: Any) -> None:
    await failed_rolls(database, rolls=3)
    service = RollingService(database, back, QUICK)

    first = await service.resummarize(limit=2)
    second = await service.resummarize(limit=2)

    assert (len(first.replaced), first.more) == (2, True)
    assert (len(second.replaced), second.more) == (1, False)


@pytest.mark.parametrize("limit", [0, -1, True, 1.5])
async def test_a_limit_that_is_not_a_positive_count_is_refused(memory_db: Any, limit: Any) -> None:
    with pytest.raises(InvalidInput, match="limit"):
        await RollingService(memory_db, back).resummarize(limit=limit)

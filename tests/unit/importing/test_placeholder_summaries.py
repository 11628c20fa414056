"""Partner's placeholder summaries come in marked ``unsummarized``, so ``resummarize`` replaces them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from partner_repo import (
    SUMMARY_ON_EXCEPTION,
    MemoryUnitRepository,
    Message,
    RollingService,
    UnitChecker,
    import_partner_state,
)

MS = 1_709_280_000_000


async def summarize(messages: list[Message]) -> str:
    return f"{len(messages)} messages, summarized at last"


def partner_state(root: Path) -> Path:
    """A Partner state whose one unit has a slice Partner's summarizer failed on, and one it did not."""
    (root / "core" / "memory").mkdir(parents=True)
    (root / "core" / "memory.json").write_text(json.dumps({"memory_unit_uuid_set": ["u1"]}))
    unit = {
        "id": "u1",
        "update_timestamp": MS,
        "conversation_messages": [{"role": "user", "content": f"m{n}"} for n in range(3)],
        "memory_slices": [
            {
                "id": "lost",
                "start_index": 0,
                "end_index": 2,
                "summary": SUMMARY_ON_EXCEPTION,
                "created_timestamp": MS,
            },
            {
                "id": "kept",
                "start_index": 2,
                "end_index": 3,
                "summary": "a note",
                "created_timestamp": MS + 1,
            },
        ],
    }
    (root / "core" / "memory" / "memory-unitu1.json").write_text(json.dumps(unit))
    return root


async def test_an_imported_placeholder_is_marked_unsummarized_and_replaced_by_resummarize(
    tmp_path: Path, database: Any
) -> None:
    await import_partner_state(partner_state(tmp_path), database, core_id="partner")
    unit = await MemoryUnitRepository(database).get("u1")
    assert unit is not None
    assert [(s.id, s.unsummarized) for s in unit.complete_slices()] == [("lost", True), ("kept", False)]
    assert (await UnitChecker(database).check()).ok

    report = await RollingService(database, summarize).resummarize("partner")

    assert [(r.slice_id, r.summary) for r in report.replaced] == [("lost", "2 messages, summarized at last")]

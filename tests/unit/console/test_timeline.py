"""The timeline's picture: blocks as wide as the messages they cover, and gaps and overlaps drawn so that no
one can miss them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from partner_repo.admin import SliceView
from partner_repo.console._timeline import MIN_BLOCK, timeline

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def piece(number: int, start: int, end: int, unit: str = "u1", **fields: object) -> SliceView:
    return SliceView(
        id=f"s{number}",
        unit_id=unit,
        core_id="core",
        start_index=start,
        end_index=end,
        summary=f"summary {number}",
        created_at=T0 + timedelta(minutes=number),
        message_count=end - start,
        **fields,  # type: ignore[arg-type]
    )


def test_each_slice_is_a_block_as_wide_as_its_messages() -> None:
    picture = timeline([piece(1, 0, 2), piece(2, 2, 8)], {"u1": 8}, {}, newest_page=True)

    (row,) = picture.rows
    first, second = row.blocks
    assert second.width == 3 * first.width and second.x == first.x + first.width
    assert picture.problems == []


def test_messages_in_no_slice_are_a_gap_block() -> None:
    picture = timeline([piece(1, 0, 2), piece(2, 4, 6)], {"u1": 6}, {}, newest_page=True)

    (gap,) = picture.problems
    assert (gap.kind, gap.start, gap.end) == ("gap", 2, 4)
    assert gap.title == "gap: 2 messages in no slice (2 to 4)"


def test_messages_in_two_slices_are_an_overlap_block_drawn_on_top() -> None:
    picture = timeline([piece(1, 0, 4), piece(2, 3, 6)], {"u1": 6}, {}, newest_page=True)

    assert [block.kind for block in picture.rows[0].blocks] == ["slice", "slice", "overlap"]
    assert (picture.problems[0].start, picture.problems[0].end) == (3, 4)


def test_messages_after_a_units_last_slice_are_a_gap_on_the_newest_page_only() -> None:
    slices = [piece(1, 0, 2), piece(2, 2, 4)]

    assert [(b.start, b.end) for b in timeline(slices, {"u1": 7}, {}, newest_page=True).problems] == [(4, 7)]
    assert timeline(slices, {"u1": 7}, {}, newest_page=False).problems == []


def test_a_block_is_labelled_by_its_topic_else_by_its_summary_and_marks_an_unsummarized_slice() -> None:
    picture = timeline(
        [piece(1, 0, 40), piece(2, 40, 80, unsummarized=True)],
        {"u1": 80},
        {"s1": "Lyon->sister"},
        newest_page=True,
    )

    labelled, marked = picture.rows[0].blocks
    assert labelled.label == "Lyon->sister" and marked.kind == "unsummarized"
    assert marked.label.startswith("summary 2 (unsummarized)") or marked.label.endswith("…")
    assert "(unsummarized)" in marked.title


def test_units_share_one_scale_and_an_empty_slice_still_shows() -> None:
    picture = timeline(
        [piece(1, 0, 10), piece(2, 0, 0, unit="u2")], {"u1": 10, "u2": 0}, {}, newest_page=True
    )

    wide, empty = picture.rows[0].blocks[0], picture.rows[1].blocks[0]
    assert wide.width == picture.scale * 10 and empty.width == MIN_BLOCK

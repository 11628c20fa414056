"""``partner-repo recall CORE QUERY``, ``partner-repo recall topics CORE`` and ``listen --recall``: what
recall prints for people (at 80 and 120 columns) and for scripts, and how it fails."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner, Result

from partner_repo import (
    DeadLetterRepository,
    MemoryCoreRepository,
    Message,
    Role,
    RollingResult,
    RollingService,
    SliceQueries,
    extractive_summarizer,
)
from partner_repo.cli import _consumers as consumers_module
from partner_repo.cli import main
from partner_repo.recall import MemoryRecall, RecallIndexer
from tests.unit.cli.support import Seed, listen_stops

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
LATE = datetime(2026, 11, 25, 23, 30, tzinfo=UTC)  # already 26 November in Shanghai
CORE = "agent-caroline"
Lines = list[tuple[Role, str | None, str]]
PUPPY: Lines = [
    ("user", "Caroline", "I adopted a puppy from the shelter last weekend!"),
    ("assistant", None, "Congratulations! What is the puppy called?"),
    ("user", "Caroline", "Her name is Biscuit, a beagle mix with very long ears."),
    ("assistant", None, "Beagles love long walks; Biscuit will keep you busy."),
]
FOOD: Lines = [
    ("user", "Caroline", "Any vegetarian restaurants near Nishiki Market in Kyoto?"),
    ("assistant", None, "Try shojin ryori, the Buddhist temple cuisine: it is fully vegetarian."),
    ("user", "Caroline", "Do they serve it at lunch too?"),
    ("assistant", None, "Several temples in Arashiyama serve it at lunch; reserve a day ahead."),
]


async def remember(database: Any, core_id: str, at: datetime, lines: Lines) -> str:
    """Record one session's messages at ``at``, roll them into a slice and index it; the slice's id."""
    messages = [Message(role=role, content=content, name=name) for role, name, content in lines]
    await MemoryCoreRepository(database).record(core_id, messages, at=at)
    rolled = await RollingService(database, extractive_summarizer).roll(
        core_id, refresh_session=True, now=at + timedelta(minutes=5)
    )
    assert rolled is not None
    await RecallIndexer(database).consume(rolled)
    return rolled.slice_id


@pytest.fixture
def database(every_command_uses: Callable[[Seed], Any]) -> Any:
    """Every command sees: two indexed sessions of CORE, a core named "topics" with one, and a core "quiet"
    with a window but nothing indexed."""

    async def seed(db: Any) -> None:
        await remember(db, CORE, T0, PUPPY)
        await remember(db, CORE, LATE, FOOD)
        await remember(db, "topics", T0, PUPPY)
        await MemoryCoreRepository(db).record("quiet", [Message(role="user", content="hello")], at=T0)

    return every_command_uses(seed)


def run(*arguments: str, columns: int = 120) -> Result:
    return CliRunner(env={"COLUMNS": str(columns)}).invoke(main, ["--in-memory", *arguments])


def ids_of(database: Any, query: str) -> tuple[str, str]:
    """The slice and unit ids recall finds first for ``query`` (through the API)."""
    found = asyncio.run(MemoryRecall(database).recall(CORE, query, limit=1))
    return found[0].slice_id, found[0].unit_id


# -- what ----------------------------------------------------------------------------------------------------


def test_recall_prints_each_slice_with_its_ids_day_topic_sources_score_summary_and_raw_messages(
    database: Any,
) -> None:
    slice_id, unit_id = ids_of(database, "puppy beagle")

    result = run("recall", CORE, "puppy beagle", "--limit", "1")

    assert result.exit_code == 0, result.output
    lines = [" ".join(line.split()) for line in result.stdout.splitlines()]
    assert lines[0] == f"recalled 1 slice(s), 4 message(s) of core '{CORE}' for 'puppy beagle'"
    assert lines[1].startswith("#1 score ") and "found by text" in lines[1]
    assert f"slice {slice_id}" in lines and f"unit {unit_id}" in lines
    assert "day 2026-11-20 09:00 to 09:00 UTC" in lines
    assert any(line.startswith("topic ") for line in lines)
    assert any(line.startswith("summary ") and "puppy" in line for line in lines)
    assert "0 user (Caroline) I adopted a puppy from the shelter last weekend!" in lines
    assert "1 assistant Congratulations! What is the puppy called?" in lines


@pytest.mark.parametrize("columns", [80, 120])
def test_recall_fits_the_terminal_with_every_id_whole_on_a_line(database: Any, columns: int) -> None:
    slice_id, unit_id = ids_of(database, "vegetarian lunch")

    result = run("recall", CORE, "vegetarian lunch", columns=columns)

    assert result.exit_code == 0, result.output
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert max(len(line) for line in lines) <= columns
    assert any(slice_id in line for line in lines) and any(unit_id in line for line in lines)
    assert any("Several temples in Arashiyama" in line for line in lines)


def test_recall_with_why_shows_what_each_part_of_the_score_added_and_the_date_cues(database: Any) -> None:
    result = run("recall", CORE, "what about the puppy on 2026-11-20?", "--why", "--limit", "1")

    assert result.exit_code == 0, result.output
    lines = [" ".join(line.split()) for line in result.stdout.splitlines()]
    assert lines[0] == "date cues (UTC): '2026-11-20' = 2026-11-20"
    (why,) = [line for line in lines if line.startswith("why ")]
    assert "text " in why and "date " in why and "recency " in why
    assert "found by text, date" in lines[2]


def test_recall_with_why_shows_the_event_cues_read_from_the_query(database: Any) -> None:
    result = run("recall", CORE, "what did we eat two days before the trip?", "--why")
    as_json = json.loads(run("recall", CORE, "what did we eat after the trip", "--json").stdout)

    assert result.exit_code == 0, result.output
    lines = [" ".join(line.split()) for line in result.stdout.splitlines()]
    assert lines[1] == "event cues: 'two days before the trip' = before 'the trip', 2 day(s)"
    assert as_json["event_cues"] == [
        {"text": "after the trip", "event": "the trip", "before": False, "days": None}
    ]


def test_recall_shows_days_and_reads_date_cues_in_the_zone_given(database: Any) -> None:
    result = run("recall", CORE, "vegetarian food yesterday", "--tz", "Asia/Shanghai", "--why")

    assert result.exit_code == 0, result.output
    lines = [" ".join(line.split()) for line in result.stdout.splitlines()]
    assert "day 2026-11-26 07:30 to 07:30 Asia/Shanghai" in lines


def test_since_and_until_filter_the_slices_before_they_are_ranked(database: Any) -> None:
    before = run("recall", CORE, "puppy", "--until", "2026-11-22")
    after = run("recall", CORE, "puppy", "--since", "2026-11-22")

    assert before.exit_code == 0 and "I adopted a puppy" in before.stdout
    assert after.exit_code == 0, after.output
    assert after.stdout.strip() == (
        f"nothing recalled from core '{CORE}' for 'puppy' since 2026-11-22 00:00:00.000Z"
    )


def test_recall_as_json_gives_every_field_of_each_slice_and_each_message_with_its_position(
    database: Any,
) -> None:
    result = run("recall", CORE, "puppy", "--json", "--limit", "1", "--max-messages", "2")

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert set(document) == {
        "core_id", "query", "now", "tz", "since", "until", "date_cues", "event_cues", "slices",
    }  # fmt: skip
    assert (document["core_id"], document["query"], document["tz"]) == (CORE, "puppy", "UTC")
    (recalled,) = document["slices"]
    assert set(recalled) == {
        "slice_id", "unit_id", "core_id", "summary", "day", "began_at", "ended_at", "topic", "sources",
        "score", "why", "messages",
    }  # fmt: skip
    assert recalled["day"] == "2026-11-20" and recalled["sources"][0] == "text" and recalled["why"] is None
    assert recalled["messages"][0] == {
        "position": 0,
        "role": "user",
        "content": "I adopted a puppy from the shelter last weekend!",
        "name": "Caroline",
        "at": "2026-11-20T09:00:00Z",
    }
    assert len(recalled["messages"]) == 2


def test_recall_as_json_with_why_gives_the_score_parts_and_the_date_cues(database: Any) -> None:
    result = run("recall", CORE, "the puppy yesterday", "--json", "--why")

    document = json.loads(result.stdout)
    assert [cue["text"] for cue in document["date_cues"]] == ["yesterday"]
    assert all(set(piece["why"]) >= {"recency", "activation"} for piece in document["slices"])


def test_a_core_named_topics_is_recalled_through_the_explicit_search(database: Any) -> None:
    searched = run("recall", "search", "topics", "beagle")
    tree = run("recall", "topics", "topics")

    assert searched.exit_code == 0 and "of core 'topics' for 'beagle'" in searched.stdout
    assert tree.exit_code == 0 and tree.stdout.startswith("topics of core 'topics'")


def test_the_root_options_may_follow_the_query(database: Any) -> None:
    result = CliRunner().invoke(main, ["recall", CORE, "puppy", "--in-memory"])

    assert result.exit_code == 0 and "recalled 1 slice(s)" in result.stdout
    assert "note:" not in result.stderr  # --in-memory given: no note about the implicit in-memory database


@pytest.mark.parametrize(
    "before", [["--in-memory"], ["--log-level", "warning", "--in-memory"], ["--log-format=text"]]
)
def test_the_root_options_may_come_before_the_subcommand_or_the_core(
    database: Any, before: list[str]
) -> None:
    tree = CliRunner().invoke(main, ["recall", *before, "topics", CORE])
    searched = CliRunner().invoke(main, ["recall", *before, CORE, "puppy"])

    assert tree.exit_code == 0 and tree.stdout.startswith(f"topics of core {CORE!r}")
    assert searched.exit_code == 0 and "recalled 1 slice(s)" in searched.stdout


# -- nothing -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["recall", "nobody", "puppy"], ["recall", "topics", "nobody"]])
def test_a_core_that_does_not_exist_is_one_line_and_exit_1(database: Any, command: list[str]) -> None:
    result = run(*command)

    assert result.exit_code == 1
    assert result.stderr.strip() == "error: no core 'nobody': no core document and no unit has that core id"
    assert result.stdout == ""


@pytest.mark.parametrize("command", [["recall", "quiet", "hello"], ["recall", "topics", "quiet"]])
def test_a_core_with_nothing_indexed_says_how_to_index_it(database: Any, command: list[str]) -> None:
    result = run(*command)

    assert result.exit_code == 0
    assert "has no indexed slices yet" in result.stdout
    assert "partner-repo listen --group recall --recall" in result.stdout


def test_a_core_with_nothing_indexed_is_an_empty_list_as_json(database: Any) -> None:
    result = run("recall", "quiet", "hello", "--json")

    assert result.exit_code == 0 and json.loads(result.stdout)["slices"] == []


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        (["--since", "yesterday"], "Invalid value for '--since': 'yesterday' is not an ISO 8601 date"),
        (["--until", "2026-13-01"], "Invalid value for '--until': '2026-13-01' is not an ISO 8601 date"),
        (
            ["--since", "2026-11-22", "--until", "2026-11-21"],
            "since (2026-11-22T00:00:00+00:00) must be before",
        ),
        (["--tz", "Mars/Olympus"], "Invalid value for '--tz': 'Mars/Olympus' is not a time zone name"),
        (["--limit", "0"], "Invalid value for '--limit': 0 is not in the range 1<=x<=100"),
        (["--max-messages", "1001"], "Invalid value for '--max-messages': 1001 is not in the range"),
    ],
)
def test_bad_dates_and_bounds_are_usage_errors_on_one_line(
    database: Any, options: list[str], complaint: str
) -> None:
    result = run("recall", CORE, "puppy", *options)

    assert result.exit_code == 2
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert complaint in error and "Traceback" not in result.output


# -- topics --------------------------------------------------------------------------------------------------


def test_topics_prints_the_tree_indented_with_slice_counts(database: Any) -> None:
    nodes = asyncio.run(MemoryRecall(database).topics(CORE))

    result = run("recall", "topics", CORE, columns=80)

    assert result.exit_code == 0, result.output
    cells = [line.split("│")[1:-1] for line in result.stdout.splitlines() if line.startswith("│")]
    shown = [(topic[1:].rstrip(), int(count)) for topic, count in cells]  # a cell is padded by one space
    assert shown == [("  " * (node.depth - 1) + node.path.split("->")[-1], node.slices) for node in nodes]
    assert any(name.startswith("  ") for name, _ in shown)
    assert result.stdout.splitlines()[-1] == f"{len(nodes)} topic(s) over 2 slice(s)"


def test_topics_as_json_gives_each_readable_path_with_its_depth_slices_and_key(database: Any) -> None:
    nodes = asyncio.run(MemoryRecall(database).topics(CORE))

    result = run("recall", "topics", CORE, "--json")

    assert json.loads(result.stdout) == {
        "core_id": CORE,
        "topics": [
            {"path": n.path, "depth": n.depth, "slices": n.slices, "key": n.key or n.path} for n in nodes
        ],
    }
    assert any(n.key is not None and n.key != n.path for n in nodes)  # the offline extractor's stems


def test_topics_show_readable_words_not_the_stems_they_are_matched_by(database: Any) -> None:
    nodes = asyncio.run(MemoryRecall(database).topics(CORE))
    stems = {n.key for n in nodes if n.key}

    result = run("recall", "topics", CORE)

    shown = {n.path.split("->")[-1] for n in nodes}
    assert all(name in result.stdout for name in shown)
    assert not any(f" {stem.split('->')[-1]} " in result.stdout for stem in stems if stem not in shown)


# -- listen --------------------------------------------------------------------------------------------------


@pytest.fixture
def stored(every_command_uses: Callable[[Seed], Any]) -> Any:
    """Every command sees a slice of CORE rolled but never indexed."""

    async def seed(db: Any) -> None:
        await MemoryCoreRepository(db).record(
            CORE, [Message(role="user", content=c) for _, _, c in PUPPY], at=T0
        )
        rolled = await RollingService(db, extractive_summarizer).roll(CORE, now=T0 + timedelta(minutes=5))
        assert rolled is not None

    return every_command_uses(seed)


def test_listen_with_recall_backfills_the_index_from_the_beginning(
    stored: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    stops = listen_stops(monkeypatch)

    class StoppingAfterIndexing(RecallIndexer):
        """The real indexer, which stops ``listen`` once it has indexed a slice (or failed to)."""

        async def consume(self, result: RollingResult) -> None:
            try:
                await super().consume(result)
            finally:
                stops[0].set()

    monkeypatch.setattr(consumers_module, "RecallIndexer", StoppingAfterIndexing)

    backfill = ["--group", "recall", "--start-from", "beginning", "--recall"]
    result = run("listen", *backfill, "--poll-interval", "0.01")

    assert result.exit_code == 0, result.output
    assert "listening as group 'recall' for recall-index" in result.stderr
    assert "stopped: 1 delivered, 0 dead-lettered; checkpoint saved" in result.stderr
    (found,) = asyncio.run(MemoryRecall(stored).recall(CORE, "beagle"))
    assert any(message.content.startswith("Her name is Biscuit") for message in found.messages)


def test_listen_needs_a_consumer_or_recall(stored: Any) -> None:
    result = run("listen")

    assert result.exit_code == 2
    assert "Error: give at least one --consumer MODULE:ATTR, or --recall" in result.stderr


def test_dead_letters_replay_with_recall_indexes_the_slices_the_recall_index_gave_up_on(stored: Any) -> None:
    async def letter() -> None:
        (piece,) = (await SliceQueries(stored).find(core_id=CORE)).items
        await DeadLetterRepository(stored).record(
            group="recall",
            consumer="recall-index",
            unit_id=piece.unit_id,
            core_id=CORE,
            slice_id=piece.id,
            error=RuntimeError("server gone"),
            attempts=5,
            at=T0,
        )

    asyncio.run(letter())
    assert not asyncio.run(MemoryRecall(stored).topics(CORE))

    result = run("dead-letters", "replay", "--group", "recall", "--recall")

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("1 delivered, 0 failed again")
    assert asyncio.run(MemoryRecall(stored).recall(CORE, "beagle"))


# -- vectors -------------------------------------------------------------------------------------------------

EMBEDDER = "tests.recall_support:concepts"


def test_reindex_embeds_every_indexed_slice_and_a_second_run_none(database: Any) -> None:
    first = run("recall", "reindex", "--embedder", EMBEDDER)
    again = run("recall", "reindex", "--embedder", EMBEDDER, "--json")

    assert first.exit_code == 0, first.output
    assert "2 core(s), 3 slice(s): 3 embedded, 0 already embedded" in first.stdout
    assert json.loads(again.stdout)["skipped"] == 3


def test_reindex_of_one_core_leaves_the_others(database: Any) -> None:
    result = run("recall", "reindex", "--core", CORE, "--embedder", EMBEDDER, "--json")

    assert result.exit_code == 0, result.output
    assert (json.loads(result.stdout)["cores"], json.loads(result.stdout)["embedded"]) == (1, 2)


def test_reindex_needs_an_embedder_it_can_load(database: Any) -> None:
    missing = run("recall", "reindex")
    unloadable = run("recall", "reindex", "--embedder", "tests.recall_support:no_such_embedder")

    assert missing.exit_code == 2 and "Missing option '--embedder'" in missing.stderr
    assert unloadable.exit_code == 2 and "has no attribute 'no_such_embedder'" in unloadable.stderr


def test_recall_with_an_embedder_finds_by_vector_once_reindexed(database: Any) -> None:
    run("recall", "reindex", "--embedder", EMBEDDER)

    result = run("recall", CORE, "how is the dog?", "--embedder", EMBEDDER, "--json")

    assert result.exit_code == 0, result.output
    assert "vector" in json.loads(result.stdout)["slices"][0]["sources"]


def test_recall_with_another_embedder_than_the_cores_is_one_line_and_exit_2(database: Any) -> None:
    run("recall", "reindex", "--embedder", EMBEDDER)

    result = run("recall", CORE, "dog", "--embedder", "tests.unit.cli.test_recall:other_embedder")

    assert result.exit_code == 2
    assert "its vectors are of embedder 'concepts'" in result.stderr and len(result.stderr.splitlines()) == 1


def test_embedder_without_recall_is_a_usage_error(stored: Any) -> None:
    result = run(
        "listen", "--consumer", "partner_repo.listener.examples:print_consumer", "--embedder", EMBEDDER
    )

    assert result.exit_code == 2 and "--embedder is the recall index's: give --recall too" in result.stderr


def other_embedder(texts: list[str]) -> list[list[float]]:
    """An embedder of another name than :func:`tests.recall_support.concepts` (same vectors)."""
    from tests.recall_support import concepts

    return concepts(texts)


# -- check and repair ----------------------------------------------------------------------------------------


def test_check_reports_a_recall_counter_that_differs_and_repair_sets_it(database: Any) -> None:
    asyncio.run(
        database["recall_index"].update_one({"kind": "core", "core_id": CORE}, {"$set": {"slices": 7}})
    )

    checked = run("check")
    repaired = run("repair", "--json")
    again = run("check")

    assert checked.exit_code == 1
    assert f"recall index of core {CORE!r}: slice count 7 for 2" in checked.stdout
    [fixed] = [found for found in json.loads(repaired.stdout)["recall_index"] if found["core_id"] == CORE]
    assert fixed["core"] == {"path": "", "recorded": 7, "counted": 2}
    assert again.exit_code == 0 and "0 with something off" in again.stdout

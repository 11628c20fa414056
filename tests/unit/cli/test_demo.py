"""``partner-repo demo`` end to end: a scripted conversation rolled by count and idle, delivered by the
listener, listed and counted; and where it connects."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from partner_repo import MemoryCoreRepository, SliceQueries, in_memory_database, init_repository
from partner_repo.cli import main
from partner_repo.cli._demo import CONFIG, QUESTION, run_demo
from partner_repo.cli._demo_script import TURNS
from partner_repo.cli._runtime import Connection
from partner_repo.recall import MemoryRecall


def test_the_script_is_a_conversation_of_at_least_100_messages() -> None:
    assert 2 * len(TURNS) >= 100
    assert all(question.strip() and answer.strip() for question, answer in TURNS)


def test_demo_runs_in_memory_and_prints_rolls_deliveries_slices_stats_and_a_recall(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MONGODB_URI", "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=200")

    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["demo"], catch_exceptions=False)

    assert result.exit_code == 0
    output = result.output
    assert "embedded in-memory backend" in output
    assert output.count("rolled (count trigger)") == 3 and output.count("rolled (idle trigger)") == 1
    assert output.count("listener ▸ RollingResult") == 4
    assert "4 roll(s) stored and delivered" in output
    assert f"turn {len(TURNS)}" in output
    assert "slices of core 'demo'" in output and "largest units" in output
    assert re.search(r"messages\s+104", output)
    assert "indexed 4 slice(s) with RecallIndexer" in output
    assert f"recall {QUESTION!r}" in output and "found by text" in output


def test_the_demo_logs_no_warning_and_names_no_exception_class(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MONGODB_URI", raising=False)

    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["demo"], catch_exceptions=False)

    assert result.exit_code == 0
    levels = {line.split()[1] for line in result.stderr.splitlines()}
    assert levels == {"INFO"}, result.stderr
    exception_class = r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)*(?:Error|Exception|Unavailable|Failure)\b"
    assert not re.search(exception_class, result.output)
    assert "polling every 0.05s instead" in result.stderr  # said in words: no change streams in memory


async def test_the_demo_stores_every_message_and_delivers_every_roll() -> None:
    database = await init_repository(in_memory_database("demo_test"))
    buffer = io.StringIO()

    await run_demo(database, core_id="demo", out=Console(file=buffer, width=200))

    queries = SliceQueries(database)
    slices = (await queries.find(core_id="demo", order="asc")).items
    assert sum(s.message_count for s in slices) == 2 * len(TURNS)
    assert [(s.start_index, s.end_index) for s in slices] == [(0, 30), (30, 56), (56, 82), (82, 104)]
    assert all(s.rolling_size is not None and s.retain_divisor == CONFIG.retain_divisor for s in slices)
    stats = await queries.stats("demo")
    assert (stats.units, stats.slices, stats.messages) == (1, 4, 104)
    core = await MemoryCoreRepository(database).get("demo")
    assert core is not None and core.memory_session_id != slices[0].unit_id  # the idle roll opened a new one
    text = buffer.getvalue()
    for piece in slices:
        assert f"RollingResult: slice {piece.id}" in text
    assert text.index("rolled (idle trigger)") < text.index("slices of core 'demo'")


async def test_the_demo_indexes_every_roll_and_recalls_the_raw_messages_of_its_question() -> None:
    database = await init_repository(in_memory_database("demo_recall"))
    buffer = io.StringIO()

    await run_demo(database, core_id="demo", out=Console(file=buffer, width=200))

    nodes = await MemoryRecall(database).topics("demo")
    assert sum(node.slices for node in nodes if node.depth == 1) == 4
    text = buffer.getvalue()
    recalled = text.split(f"recall {QUESTION!r}", 1)[1]
    assert text.index("largest units") < text.index(f"recall {QUESTION!r}")
    assert "Ha, good to know. Now, food! I'm vegetarian." in recalled
    assert recalled.count("\nslice ") == 1
    assert len(re.findall(r"^\s*\d+\s+(?:user|assistant)\s", recalled, re.M)) == 4  # its four best messages


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["demo"], (None, "partner_demo")),
        (["--db", "mine", "demo"], (None, "mine")),
        (["--uri", "mongodb://db.example:27017", "demo"], ("mongodb://db.example:27017", "partner_demo")),
        (
            ["--uri", "mongodb://db.example:27017", "--db", "mine", "demo"],
            ("mongodb://db.example:27017", "mine"),
        ),
    ],
)
def test_demo_ignores_mongodb_uri_and_uses_its_own_database_name(
    monkeypatch: pytest.MonkeyPatch, arguments: list[str], expected: tuple[str | None, str]
) -> None:
    monkeypatch.setenv("MONGODB_URI", "mongodb://configured.example:27017")
    monkeypatch.setenv("PARTNER_REPO_DB", "configured")
    opened: list[tuple[str | None, str]] = []

    async def open_database(self: Connection) -> Any:
        opened.append((self.uri, self.db_name))
        return await init_repository(in_memory_database("demo_target"))

    monkeypatch.setattr(Connection, "open", open_database)

    result = CliRunner().invoke(main, arguments, catch_exceptions=False)

    assert result.exit_code == 0 and opened == [expected]


def test_demo_with_an_unreachable_uri_fails_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MONGODB_URI", raising=False)

    result = CliRunner().invoke(
        main, ["--uri", "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=200", "demo"]
    )

    assert result.exit_code == 2
    assert (
        result.output.strip()
        .splitlines()[-1]
        .startswith("error: cannot reach MongoDB at mongodb://127.0.0.1:1")
    )

"""Every command that prints for people fits 80 columns (a terminal's default, and what a pipe gets) with
realistic ids (UUIDs, a core id of 42 characters), never breaking an id over lines: tables, cards and the
lines of resummarize, roll-idle and forget alike. A new command is either rendered here or listed among
those that print no table."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from partner_repo import (
    DeadLetterRepository,
    MemoryCoreRepository,
    Message,
    RollingConfig,
    RollingService,
    extractive_summarizer,
)
from partner_repo.cli import main
from partner_repo.cli.reference import commands
from partner_repo.recall import RecallIndexer
from tests.unit.admin.support import T0, at, insert_raw, raw_unit, seed_unit
from tests.unit.cli.support import Seed
from tests.unit.listener.support import Recorder, quick_listener, registry_of

COLUMNS = 80


def an_id(name: str) -> str:
    """A UUID of its own (no two share a prefix, so a half of one shown is a broken id)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


CORE, PLACEHOLDER_CORE, IDLE_CORE, RECALLED_CORE = (
    f"agent-{an_id(name)}" for name in ("core", "placeholder", "idle", "recalled")
)
UNIT, SLICE, BROKEN, BROKEN_SLICE = (an_id(name) for name in ("unit", "slice", "broken", "broken slice"))
SUMMARY = "The user plans a weekend in Kyoto in autumn: Fushimi Inari at dawn, maples at Tofuku-ji, tofu."
ERROR = "ConnectionError: the search index at search.internal:9200 refused the document " * 2
IDS = [CORE, UNIT, SLICE, BROKEN, BROKEN_SLICE, PLACEHOLDER_CORE, IDLE_CORE, RECALLED_CORE]


async def failing(messages: list[Message]) -> str:
    raise RuntimeError("model down")


def conversation(count: int) -> list[Message]:
    words = ["Kyoto", "temples", "maples", "autumn", "Fushimi", "Inari", "dawn", "tofu", "bamboo"]
    return [
        Message(role="user" if n % 2 == 0 else "assistant", content=f"{words[n % len(words)]} turn {n}")
        for n in range(count)
    ]


async def seed(database: Any) -> Any:
    """A unit and a broken unit of a realistic core, a dead letter naming them, a listener group, a core
    whose roll stored a placeholder, an idle core, and a recall index."""
    await seed_unit(database, UNIT, CORE, [(SLICE, at(1), SUMMARY)])
    await DeadLetterRepository(database).record(
        group="search",
        consumer="search-indexer",
        unit_id=UNIT,
        core_id=CORE,
        slice_id=SLICE,
        error=RuntimeError(ERROR),
        attempts=5,
        at=T0,
    )
    async with quick_listener(database, registry_of(Recorder("search-indexer")), group="search") as group:
        await group.flush()
    cores = MemoryCoreRepository(database)
    await cores.record(PLACEHOLDER_CORE, conversation(4), at=T0)
    await RollingService(database, failing, RollingConfig(summarize_attempts=1)).roll(
        PLACEHOLDER_CORE, now=T0 + timedelta(minutes=1)
    )
    await cores.record(IDLE_CORE, conversation(6), at=T0)
    await cores.record(RECALLED_CORE, conversation(6), at=T0)
    rolled = await RollingService(database, extractive_summarizer).roll(RECALLED_CORE, now=T0)
    assert rolled is not None
    await RecallIndexer(database).consume(rolled)
    overlong = {"id": BROKEN_SLICE, "start_index": 0, "end_index": 9, "summary": SUMMARY, "created_at": T0}
    await insert_raw(database, raw_unit(BROKEN, CORE, slices=[overlong]))  # last: a listener adopts it
    return database


@pytest.fixture
def database(monkeypatch: pytest.MonkeyPatch, every_command_uses: Callable[[Seed], Any]) -> Any:
    monkeypatch.setenv("PARTNER_REPO_ROLLING_SUMMARIZE_BACKOFF", "0")
    return every_command_uses(seed)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """A Partner state directory whose unit file (a UUID name) has skipped messages, notes and unknown
    keys."""
    (tmp_path / "core" / "memory").mkdir(parents=True)
    (tmp_path / "core" / "memory.json").write_text(json.dumps({"memory_unit_uuid_set": [], "extra": 1}))
    unit = {
        "conversation_messages": [
            {"role": "robot", "content": "beep"},
            {"role": "user", "content": "hi", "timestamp": "yesterday at noon"},
        ],
        "memory_slices": [{"id": "s", "start_index": 0, "end_index": 2, "summary": "x"}],
        "slices": [],
    }
    (tmp_path / "core" / "memory" / f"memory-unit{UNIT}.json").write_text(json.dumps(unit))
    return tmp_path


RENDERED = {
    "partner-repo check": ["check"],
    "partner-repo repair": ["repair"],
    "partner-repo dead-letters list": ["dead-letters", "list"],
    "partner-repo forget": ["forget", CORE],
    "partner-repo listener status": ["listener", "status"],
    "partner-repo migrate": ["migrate", "--status"],
    "partner-repo recall search": ["recall", RECALLED_CORE, "Kyoto temples"],
    "partner-repo recall topics": ["recall", "topics", RECALLED_CORE],
    "partner-repo resummarize": ["resummarize"],
    "partner-repo roll-idle": ["roll-idle", "--once", "--idle-after", "60"],
    "partner-repo slices list": ["slices", "list"],
    "partner-repo slices show": ["slices", "show", SLICE],
    "partner-repo slices stats": ["slices", "stats", "--all-days"],
    "partner-repo units show": ["units", "show", UNIT, "--messages"],
}
"""One command line per command that prints for people, run on the seeded database."""
ALSO_RENDERED = [["forget", CORE, "--yes"], ["forget", "--pending"]]
NO_TABLE = {
    "partner-repo": "a group: its help",
    "partner-repo dead-letters": "a group: its help",
    "partner-repo listener": "a group: its help",
    "partner-repo recall": "a group: its help",
    "partner-repo slices": "a group: its help",
    "partner-repo units": "a group: its help",
    "partner-repo demo": "rendered by test_the_demo_fits_80_columns (it takes seconds)",
    "partner-repo import-state": "rendered by test_import_state_fits_80_columns (it needs a state directory)",
    "partner-repo listen": "log lines only, on stderr",
    "partner-repo mcp": "a server: log lines only, on stderr (its answers are the protocol's, to its client)",
    "partner-repo console": "a server: log lines only, on stderr (its answers are web pages)",
    "partner-repo dead-letters replay": "one line of counts",
    "partner-repo recall reindex": "a line per replaced embedder and one of counts (needs an embedder)",
}


def rendered(arguments: list[str]) -> list[str]:
    result = CliRunner(env={"COLUMNS": str(COLUMNS)}).invoke(main, ["--in-memory", *arguments])
    assert result.exit_code in (0, 1), result.output
    assert result.stdout.strip(), result.output
    return result.stdout.splitlines()


def assert_fits(lines: list[str], ids: list[str] = IDS) -> None:
    too_wide = [line for line in lines if len(line.rstrip()) > COLUMNS]
    assert not too_wide, "\n".join(too_wide)
    text = "\n".join(lines)
    for identifier in ids:
        broken = identifier[: len(identifier) // 2]  # shown, so it must be shown whole
        if broken in text:
            assert any(identifier in line for line in lines), (identifier, text)


@pytest.mark.parametrize("arguments", [*RENDERED.values(), *ALSO_RENDERED], ids=" ".join)
def test_the_command_fits_80_columns_with_every_id_whole(database: Any, arguments: list[str]) -> None:
    assert_fits(rendered(arguments))


def test_import_state_fits_80_columns(database: Any, state: Path) -> None:
    lines = rendered(["import-state", str(state), "--core", CORE])

    assert_fits(lines, [CORE, f"core/memory/memory-unit{UNIT}.json"])
    assert any("skipped" in line for line in lines) and any("unknown keys" in line for line in lines)


def test_the_demo_fits_80_columns() -> None:
    result = CliRunner(env={"COLUMNS": str(COLUMNS), "MONGODB_URI": ""}).invoke(main, ["demo"])

    assert result.exit_code == 0, result.output
    assert_fits(result.stdout.splitlines(), [])


def test_every_command_is_rendered_here_or_prints_no_table() -> None:
    every = {path for path, _ in commands()}

    assert every == set(RENDERED) | set(NO_TABLE)

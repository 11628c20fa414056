"""``slices show`` shows who spoke and which tool call a message answers (issue 20)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner

from partner_repo import MemoryUnitRepository, Message
from partner_repo.cli import main
from tests.unit.cli.support import Seed

TURN = [
    Message(role="user", content="Weather in Kyoto?", name="ada"),
    Message(role="tool", content="18 C", name="weather", tool_call_id="call_1", metadata={"ms": 80}),
]


@pytest.fixture(autouse=True)
def seeded(every_command_uses: Callable[[Seed], Any]) -> Any:
    async def seed(database: Any) -> None:
        await MemoryUnitRepository(database).append("u1", TURN, "the weather", core_id="agent", slice_id="s1")

    return every_command_uses(seed)


def show(*options: str) -> str:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["--in-memory", "slices", "show", "s1", *options])
    assert result.exit_code == 0, result.output
    return result.output


def test_slices_show_names_the_speaker_and_the_tool_call() -> None:
    output = show()

    assert "user (ada)" in output and "tool (weather, call call_1)" in output


def test_slices_show_json_carries_the_set_fields_only() -> None:
    messages = json.loads(show("--json"))["messages"]

    assert messages == [
        {"role": "user", "content": "Weather in Kyoto?", "name": "ada"},
        {
            "role": "tool",
            "content": "18 C",
            "name": "weather",
            "tool_call_id": "call_1",
            "metadata": {"ms": 80},
        },
    ]

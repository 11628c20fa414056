"""The tools the server lists: each one's name, description, schemas, hints and the :class:`MemoryTools`
method that does it. The descriptions are written for the model that picks a tool: what it is for, when to
call it, what comes back.

Kept apart from :mod:`.server` (the protocol) so the list reads as the server's whole surface in one place.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from partner_repo.mcp._arguments import (
    ContextArguments,
    ForgetArguments,
    RecallArguments,
    RecordTurnArguments,
    ToolArguments,
    TopicsArguments,
)
from partner_repo.mcp._results import (
    ContextResult,
    ForgetResult,
    RecallResult,
    RecordTurnResult,
    ToolResult,
    TopicsResult,
)
from partner_repo.mcp._tools import MemoryTools


@dataclass(frozen=True)
class ToolSpec:
    """One tool: ``run`` takes the tools and the validated arguments (an instance of ``arguments``) and
    answers an instance of ``result``; it calls the method by name, so a subclass's override is the one
    run. The hints are MCP's tool annotations (hints to a host, never guarantees): ``read_only`` tools
    change nothing; a ``destructive`` one may remove what was stored."""

    name: str
    title: str
    description: str
    arguments: type[ToolArguments]
    result: type[ToolResult]
    run: Callable[[MemoryTools, Any], Awaitable[ToolResult]]
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="record_turn",
        title="Record a turn",
        description=(
            "Record one turn of the conversation (the user's message and your answer, in order) in the "
            "core's memory. Call it after every turn. When the live window is long enough or the user was "
            "idle, the turn is rolled into a summarized memory slice within the call (slice_id says which); "
            "window_size is how many messages the live window holds afterwards."
        ),
        arguments=RecordTurnArguments,
        result=RecordTurnResult,
        run=lambda tools, arguments: tools.record_turn(arguments),
    ),
    ToolSpec(
        name="recall",
        title="Recall memories",
        description=(
            "Find what the core's memory holds about a query: the memory slices it is about, best first, "
            "each with its summary, day, topic and the raw messages it came from. Dates in the query "
            "(yesterday, last week, May 7, 上周) and since/until narrow it to a time."
        ),
        arguments=RecallArguments,
        result=RecallResult,
        run=lambda tools, arguments: tools.recall(arguments),
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        name="context",
        title="Context for the prompt",
        description=(
            "What to put in your prompt at the start of a conversation: the summaries of the latest memory "
            "slices (newest last), then the live chat window (the recent messages not summarized away)."
        ),
        arguments=ContextArguments,
        result=ContextResult,
        run=lambda tools, arguments: tools.context(arguments),
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        name="topics",
        title="Topics remembered",
        description=(
            "The core's topic tree: every topic path its memory is filed under (names joined by '->'), with "
            "how many memory slices sit under each."
        ),
        arguments=TopicsArguments,
        result=TopicsResult,
        run=lambda tools, arguments: tools.topics(arguments),
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        name="forget",
        title="Forget the core",
        description=(
            "Erase the core's whole memory: its live window, every memory slice and raw message, and what "
            "the recall index holds of them. Without confirm: true it only counts what would be erased "
            "(would_erase) and changes nothing; ask the user before confirming."
        ),
        arguments=ForgetArguments,
        result=ForgetResult,
        run=lambda tools, arguments: tools.forget(arguments),
        destructive=True,
        idempotent=True,
    ),
)

BY_NAME = {spec.name: spec for spec in TOOLS}

__all__ = ["BY_NAME", "TOOLS", "ToolSpec"]

"""What each tool answers: one pydantic model per tool, its JSON Schema the tool's ``outputSchema``.

A result goes out twice (:mod:`.server`): as ``structuredContent`` (the model dumped to JSON, for the host
application; the SDK's own client checks it against the schema) and as the same JSON in a text block, for
the model that reads the tool's answer. Field names are the issue's contract (issue 33); ``day`` is an ISO
date (``2026-11-16``), UTC.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field


class ToolResult(BaseModel):
    """Built from the library's own results by attribute (``model_validate(x, from_attributes=True)``): a
    field is named as the attribute it shows, and what the library adds later stays out."""

    model_config = ConfigDict(frozen=True)


class MessageView(ToolResult):
    """A raw message as an agent puts it in a prompt: who said what."""

    role: str
    content: str
    name: str | None = None


class RecordTurnResult(ToolResult):
    window_size: Annotated[int, Field(description="Messages in the core's live window after the call.")]
    slice_id: Annotated[
        str | None, Field(description="The slice the turn's roll stored; null when nothing rolled.")
    ]


class RecalledSlice(ToolResult):
    slice_id: str
    unit_id: str
    summary: str
    day: Annotated[date, Field(description="The UTC date the slice's conversation began.")]
    topic: Annotated[str, Field(description="Its topic path, names joined by '->'.")]
    score: float
    messages: Annotated[list[MessageView], Field(description="The raw messages it came from, in order.")]


class RecallResult(ToolResult):
    slices: Annotated[list[RecalledSlice], Field(description="What the query is about, best first.")]


class SummaryView(ToolResult):
    slice_id: str
    summary: str
    day: Annotated[date | None, Field(description="The UTC date the slice was stored (rolled).")]


class ContextResult(ToolResult):
    summaries: Annotated[list[SummaryView], Field(description="The latest slices' summaries, newest last.")]
    window: Annotated[list[MessageView], Field(description="The live chat window, oldest first.")]


class TopicView(ToolResult):
    path: Annotated[str, Field(description="The node's topic path, names joined by '->'.")]
    slices: Annotated[int, Field(description="Indexed slices under the node.")]


class TopicsResult(ToolResult):
    nodes: Annotated[list[TopicView], Field(description="The core's topic tree, in path order.")]


class WouldErase(ToolResult):
    """What ``forget`` with ``confirm: true`` would erase now, counted."""

    window_messages: int
    units: int
    slices: int
    messages: Annotated[int, Field(description="Messages held in those units.")]
    checkpoints: Annotated[int, Field(description="Listener progress entries on those units.")]
    dead_letters: int


class Erased(ToolResult):
    """What ``forget`` erased (counted over every run of the erasure)."""

    erasure_id: Annotated[str | None, Field(description="null when there was nothing to forget.")]
    window_messages: int
    units: int
    slices: int
    checkpoints: int
    dead_letters: int


class ForgetResult(ToolResult):
    erased: Annotated[bool, Field(description="Whether this call erased the core (confirm was true).")]
    would_erase: Annotated[WouldErase | None, Field(description="Without confirm: what would be erased.")] = (
        None
    )
    removed: Annotated[Erased | None, Field(description="With confirm: what was erased.")] = None


def output_schema(model: type[ToolResult]) -> dict[str, Any]:
    """The tool's ``outputSchema``: the model's JSON Schema as it is dumped (2020-12, an object)."""
    return model.model_json_schema(mode="serialization")


__all__ = [
    "ContextResult",
    "Erased",
    "ForgetResult",
    "MessageView",
    "RecallResult",
    "RecalledSlice",
    "RecordTurnResult",
    "SummaryView",
    "ToolResult",
    "TopicView",
    "TopicsResult",
    "WouldErase",
    "output_schema",
]

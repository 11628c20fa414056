"""The tools on the official MCP Python SDK's low-level ``Server``: listing them, calling them.

The low-level server, not ``MCPServer``'s decorators, because the result is ours to build: a library error is
a tool error of one line (``InvalidInput: ...``, the exception's class and message, secrets masked) that the
model reads and can act on, the schemas are exactly the models' (:mod:`.arguments`, :mod:`.results`), and
arguments are validated once, by those models. A tool error writes nothing: arguments are checked before
the services run, and the services refuse bad input before they write.

What is not a library error (a bug) is logged with its traceback and answered as a tool error that names
only its type, so no internal text reaches the client; the server keeps serving either way. A tool the
server does not have is a protocol error (``-32602``), as the specification asks.

The SDK answers both protocol eras with the same handlers: ``2026-07-28`` (``server/discover``, no session)
and the ``initialize`` handshake of ``2024-11-05`` to ``2025-11-25``.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from partner_repo.errors import PartnerRepoError
from partner_repo.mcp._arguments import input_schema, parse_arguments
from partner_repo.mcp._catalog import BY_NAME, TOOLS, ToolSpec
from partner_repo.mcp._results import ToolResult, output_schema
from partner_repo.mcp._tools import MemoryTools
from partner_repo.mongo import library_logger, scrub

logger = library_logger("partner_repo.mcp")

NAME = "partner-repo"
INSTRUCTIONS = (
    "Long-term conversational memory. Record every turn with record_turn; at the start of a conversation put "
    "what context returns in your prompt; when the user refers to something earlier, call recall with their "
    "words. forget erases the core's memory: call it with confirm only when the user asked for that."
)


def listed(spec: ToolSpec) -> types.Tool:
    """The tool as ``tools/list`` shows it."""
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=input_schema(spec.arguments),
        output_schema=output_schema(spec.result),
        annotations=types.ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=False,
        ),
    )


def answered(result: ToolResult) -> types.CallToolResult:
    """A result twice: structured, and as the same JSON in a text block for the model."""
    return types.CallToolResult(
        content=[types.TextContent(text=result.model_dump_json())],
        structured_content=result.model_dump(mode="json"),
    )


def refused(text: str) -> types.CallToolResult:
    """A tool error: one line the model reads, no structured content."""
    return types.CallToolResult(content=[types.TextContent(text=" ".join(text.splitlines()))], is_error=True)


async def call(tools: MemoryTools, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
    """Call the tool ``name``: its result, or a tool error; an unknown tool is a protocol error."""
    spec = BY_NAME.get(name)
    if spec is None:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name!r}; this server has {', '.join(BY_NAME)}")
    try:
        result = await spec.run(tools, parse_arguments(spec.arguments, arguments))
    except PartnerRepoError as exc:
        line = f"{type(exc).__name__}: {scrub(str(exc))}"
        logger.info("tool %s refused: %s", name, line)
        return refused(line)
    except Exception as exc:
        logger.exception("tool %s failed", name)
        return refused(f"internal error ({type(exc).__name__}); the server logged it")
    return answered(result)


def memory_server(tools: MemoryTools, *, version: str) -> Server[Any]:
    """The SDK server of the memory tools (one per process: it serves every connection); ``version`` is
    the one it names itself with (partner-repo's)."""

    catalog = [listed(spec) for spec in TOOLS]
    schemas = {tool.name: tool.input_schema for tool in catalog}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=catalog)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await call(tools, params.name, params.arguments)

    return Server(
        NAME,
        version=version,
        title="partner-repo memory",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=schemas.get,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


__all__ = ["NAME", "call", "memory_server"]

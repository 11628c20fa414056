"""Driving ``partner-repo mcp`` the way an agent host does: the official SDK's own client, over stdio to a
server started as a subprocess, or over streamable HTTP to one listening on a free local port.

A module's tests share one server (starting one costs about a second and a half, and CI runs the suite
twice), each test on cores of its own so none depends on another's. The client is held open by a task of
its own (:class:`HeldClient`): the SDK's client is an anyio context, which must be left by the task that
entered it, and a module-scoped fixture is set up and torn down by different tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import IO, Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

ROOT = Path(__file__).resolve().parents[3]
TRIGGER_LIMIT = 4
"""The servers roll a window of four messages: two turns of a user and an assistant."""
SERVER_ENV = {"PARTNER_REPO_ROLLING_TRIGGER_LIMIT": str(TRIGGER_LIMIT), "PARTNER_REPO_LOG_LEVEL": "INFO"}


def server_command(*options: str) -> list[str]:
    """``partner-repo mcp --in-memory OPTIONS`` as this interpreter runs it."""
    return [sys.executable, "-m", "partner_repo", "mcp", "--in-memory", *options]


def stdio_server(errlog: IO[str], *options: str) -> Any:
    """The SDK's stdio transport to a server started with ``options``; its stderr goes to ``errlog``."""
    command, *arguments = server_command(*options)
    parameters = StdioServerParameters(command=command, args=arguments, env=SERVER_ENV, cwd=ROOT)
    return stdio_client(parameters, errlog=errlog)


class HeldClient:
    """An SDK client entered and left by a task of its own, usable from any task of the same loop."""

    def __init__(self, make: Callable[[], contextlib.AbstractAsyncContextManager[Client]]) -> None:
        self._make = make
        self._done = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> Client:
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()

        async def hold() -> None:
            try:
                async with self._make() as client:
                    ready.set_result(client)
                    await self._done.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                raise

        self._task = asyncio.create_task(hold())
        return await ready

    async def stop(self) -> None:
        self._done.set()
        if self._task is not None:
            await self._task


SERVING_AT = re.compile(r"serving MCP over streamable HTTP at (http://\S+/mcp)")


def start_http_server(token: str, errlog: IO[str]) -> tuple[subprocess.Popen[bytes], str]:
    """``partner-repo mcp --transport http --port 0`` on 127.0.0.1, requiring ``token`` (from the
    environment, as the docs advise), and the URL it serves at once it answers: the port it took is read
    from its log, so no other process can take it in between."""
    env = {**os.environ, **SERVER_ENV, "PARTNER_REPO_MCP_TOKEN": token}
    process = subprocess.Popen(
        server_command("--transport", "http", "--port", "0"),
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=errlog,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        errlog.seek(0)
        found = SERVING_AT.search(errlog.read())
        try:
            if found is not None:
                httpx2.get(found.group(1), timeout=1)
                return process, found.group(1)
        except httpx2.TransportError:
            pass
        time.sleep(0.1)
    process.kill()
    raise RuntimeError("the server did not start listening within 60 s")


@contextlib.asynccontextmanager
async def http_client(url: str, token: str | None, *, mode: str = "auto") -> AsyncIterator[Client]:
    """The SDK's client over streamable HTTP, sending ``token`` as a bearer token."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


def structured(result: CallToolResult) -> Any:
    """A successful call's structured content, checked equal to the JSON of its text block (the two
    representations a tool result carries)."""
    assert not result.is_error, result.content
    (block,) = result.content
    assert json.loads(getattr(block, "text", "")) == result.structured_content
    return result.structured_content


def error_line(result: CallToolResult) -> str:
    """A tool error's one line of text."""
    assert result.is_error and result.structured_content is None
    (block,) = result.content
    text: str = getattr(block, "text", "")
    assert "\n" not in text
    return text


def turn(question: str, answer: str, *, name: str | None = None) -> list[dict[str, Any]]:
    user: dict[str, Any] = {"role": "user", "content": question}
    if name is not None:
        user["name"] = name
    return [user, {"role": "assistant", "content": answer}]


async def record_turns(client: Client, core_id: str, turns: Sequence[list[dict[str, Any]]]) -> list[Any]:
    """``record_turn`` for each turn, in order: their structured results."""
    results = []
    for messages in turns:
        results.append(
            structured(await client.call_tool("record_turn", {"core_id": core_id, "messages": messages}))
        )
    return results

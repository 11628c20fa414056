"""``partner-repo mcp --transport http --port 0`` (a free local port, read from its log), configured to
require a bearer token (from ``PARTNER_REPO_MCP_TOKEN``): the SDK's own client over streamable HTTP, at the
current revision and at the previous one, and plain requests without the token. The server is stopped with
SIGTERM at the end of the module, and must stop cleanly (exit 0)."""

from __future__ import annotations

import signal
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import IO

import httpx2
import pytest
import pytest_asyncio
from mcp import MCPError

from tests.unit.mcp.support import http_client, record_turns, start_http_server, structured, turn

pytestmark = pytest.mark.asyncio(loop_scope="module")

TOKEN = "s3cret-Token_for.the-HTTP-tests"
WRONG = "not-the-token-but-long-enough"


@dataclass
class Served:
    url: str
    log: IO[str]

    def log_text(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with tempfile.TemporaryFile("w+") as log:
        process, url = start_http_server(TOKEN, log)
        try:
            yield Served(url, log)
        finally:
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0


@pytest_asyncio.fixture(loop_scope="module")
async def posted(served: Served) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient() as http:
        yield http


async def test_a_client_with_the_token_records_rolls_and_recalls(served: Served) -> None:
    async with http_client(served.url, TOKEN) as client:
        rolls = await record_turns(
            client,
            "olga",
            [turn("My sister Mia lives in Lyon.", "Lyon is lovely."), turn("She teaches piano.", "Nice!")],
        )
        recalled = structured(
            await client.call_tool("recall", {"core_id": "olga", "query": "Where does Mia live?"})
        )
        version = client.protocol_version

    assert version == "2026-07-28"
    assert rolls[1]["slice_id"] is not None
    assert recalled["slices"][0]["slice_id"] == rolls[1]["slice_id"]
    assert recalled["slices"][0]["messages"][0]["content"] == "My sister Mia lives in Lyon."


async def test_a_client_of_the_previous_revision_is_served_too(served: Served) -> None:
    async with http_client(served.url, TOKEN, mode="legacy") as client:
        await record_turns(client, "pavel", [turn("Remember: I take my tea black.", "Noted.")])
        context = structured(await client.call_tool("context", {"core_id": "pavel"}))
        version = client.protocol_version

    assert version == "2025-11-25"
    assert context["window"][0]["content"] == "Remember: I take my tea black."


async def test_a_request_without_the_token_gets_401(served: Served, posted: httpx2.AsyncClient) -> None:
    missing = await posted.post(served.url, json={})
    wrong = await posted.post(served.url, json={}, headers={"Authorization": f"Bearer {WRONG}"})
    other_scheme = await posted.post(served.url, json={}, headers={"Authorization": f"Basic {TOKEN}"})

    assert [missing.status_code, wrong.status_code, other_scheme.status_code] == [401, 401, 401]
    assert missing.headers["www-authenticate"] == 'Bearer realm="partner-repo"'
    assert wrong.headers["www-authenticate"] == 'Bearer realm="partner-repo", error="invalid_token"'
    assert wrong.json() == {"error": "invalid_token", "error_description": "a valid bearer token is required"}


async def test_the_sdk_client_without_the_token_cannot_connect(served: Served) -> None:
    with pytest.raises(ExceptionGroup) as refused:  # the SDK's task groups wrap what the server answered
        async with http_client(served.url, None):
            pass

    assert refused.group_contains(MCPError, match="Server returned an error response", depth=2)


async def test_tokens_never_appear_in_the_servers_log(served: Served, posted: httpx2.AsyncClient) -> None:
    await posted.post(served.url, json={}, headers={"Authorization": f"Bearer {WRONG}"})
    async with http_client(served.url, TOKEN) as client:
        await client.list_tools()

    log = served.log_text()

    assert '"POST /mcp HTTP/1.1" 401' in log and '"POST /mcp HTTP/1.1" 200' in log  # requests were logged
    assert TOKEN not in log and WRONG not in log

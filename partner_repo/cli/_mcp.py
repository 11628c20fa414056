"""``partner-repo mcp``: the memory as a Model Context Protocol server (:mod:`partner_repo.mcp`, docs/mcp.md).

The one command that imports :mod:`partner_repo.mcp`, and only when it runs: without the ``mcp`` extra every
other command works, and this one says in one line what to install (exit 2). Everything that can be refused
is refused before the database is opened: options that do not fit the transport, a ``--core`` that is no
id, an HTTP server reachable from other machines without a bearer token, a weak token.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from partner_repo import __version__
from partner_repo.cli._plugins import embedder_option, load_embedder
from partner_repo.cli._roll_idle import load_summarizer, summarizer_option
from partner_repo.cli._runtime import connection, fail, run_async
from partner_repo.cli._signals import end_at_once_on_signals, stop_on_signals
from partner_repo.mcp import DEFAULT_MAX_TURN_BYTES, TOKEN_VARIABLE, McpUnavailable, require_sdk
from partner_repo.mongo import MAX_MESSAGE_BYTES, library_logger, mask_uri
from partner_repo.rolling import RollingService, extractive_summarizer
from partner_repo.settings import load_settings
from partner_repo.validation import id_problem

log = library_logger("partner_repo.cli.mcp")

HTTP_ONLY = ("host", "port", "token")


@click.command("mcp")
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio: one client, the process that starts this one (a desktop or IDE host); http: streamable "
    "HTTP at /mcp, for any number of clients.",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="(http) Address to listen on; any but loopback needs a bearer token.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="(http) Port to listen on (0: any free port, logged).",
)
@click.option(
    "--token",
    default=None,
    envvar=TOKEN_VARIABLE,
    metavar="TOKEN",
    help=f"(http) Bearer token every request must carry; prefer {TOKEN_VARIABLE} in the environment (a "
    "command line is visible to other users of the machine).",
)
@click.option(
    "--core",
    "core_ids",
    multiple=True,
    metavar="ID",
    help="Serve only this core (repeatable); any other core id is refused [default: every core].",
)
@summarizer_option
@embedder_option("An embedder for recall's vector channel: each roll's slice and each recall query.")
@click.option(
    "--max-turn-bytes",
    type=click.IntRange(1024, MAX_MESSAGE_BYTES),
    default=DEFAULT_MAX_TURN_BYTES,
    show_default=True,
    help="The largest turn record_turn takes (BSON bytes of its messages); a larger one is a tool error.",
)
@click.option(
    "--print-config",
    is_flag=True,
    help="Print the JSON block a desktop host's configuration takes to start this server as given "
    "(absolute paths of this installation; a password is never printed), then exit.",
)
@click.pass_context
def mcp_command(
    ctx: click.Context,
    transport: str,
    host: str,
    port: int,
    token: str | None,
    core_ids: tuple[str, ...],
    summarizer_path: str | None,
    embedder_path: str | None,
    max_turn_bytes: int,
    print_config: bool,
) -> None:
    """Serve the memory to agents over the Model Context Protocol (needs the mcp extra).

    Tools: record_turn, recall, context, topics, forget (docs/mcp.md). Rolls the turns it records by the
    PARTNER_REPO_ROLLING_* settings and indexes its rolls for recall itself. Over stdio it ends when the
    client closes its end; over http, on SIGINT/SIGTERM.
    """
    _check_options(ctx, transport, core_ids)
    if print_config:
        _print_config(ctx, core_ids, (summarizer_path, embedder_path), max_turn_bytes)
        return
    try:
        require_sdk()
    except McpUnavailable as exc:
        fail(str(exc))
    token = (token or "").strip() or None  # an empty PARTNER_REPO_MCP_TOKEN counts as unset
    if transport == "http":
        from partner_repo.mcp import http_problem

        if (problem := http_problem(host, token)) is not None:
            fail(problem)
    target = connection(ctx, "write")
    summarizer = load_summarizer(summarizer_path) if summarizer_path else extractive_summarizer
    embedder = load_embedder(embedder_path) if embedder_path else None
    config = load_settings().rolling_config()

    async def work() -> None:
        from partner_repo.mcp import MemoryTools, memory_server

        database = await target.open()
        served = sorted(set(core_ids)) or None
        rolling = RollingService(database, summarizer, config)
        tools = MemoryTools(database, rolling, cores=served, max_turn_bytes=max_turn_bytes, embedder=embedder)
        log.info("serving %s", "cores " + ", ".join(served) if served else "every core")
        server = memory_server(tools, version=__version__)
        if transport == "stdio":
            await _serve_stdio(server)
        else:  # room for a turn's JSON (escapes add to it); a larger request body is answered 413
            await _serve_http(server, host=host, port=port, token=token, max_body_bytes=2 * max_turn_bytes)
        log.info("stopped")

    run_async(work)


async def _serve_stdio(server: Any) -> None:
    from partner_repo.mcp import serve_stdio

    with end_at_once_on_signals("ending at once; a client ends the server cleanly by closing its stdin"):
        await serve_stdio(server)


async def _serve_http(server: Any, **where: Any) -> None:
    from partner_repo.mcp import serve_http

    stop = asyncio.Event()
    with stop_on_signals(stop):
        await serve_http(server, stop, **where)


def _print_config(
    ctx: click.Context,
    core_ids: tuple[str, ...],
    plugins: tuple[str | None, str | None],
    max_turn_bytes: int,
) -> None:
    """The ``mcpServers`` entry that starts this very server over stdio from a host started outside any
    virtualenv: the absolute path of this installation's ``partner-repo`` (or of its Python, ``-m
    partner_repo``), the options given, the working directory a summarizer or embedder named by import path
    (``plugins``) is found from, and the connection in ``env`` with its password masked (never printed: put
    it in yourself)."""
    target = connection(ctx, "write")  # as running it would: no implicit in-memory server
    script = Path(sys.executable).with_name("partner-repo")
    command, prefix = (str(script), []) if script.exists() else (sys.executable, ["-m", "partner_repo"])
    args = [*prefix, "mcp"]
    env: dict[str, str] = {}
    if target.uri is not None:
        env["MONGODB_URI"] = mask_uri(target.uri)
        if not target.db_from_uri:
            env["PARTNER_REPO_DB"] = target.db_name
    else:
        args.insert(len(prefix), "--in-memory")
    for core_id in core_ids:
        args += ["--core", core_id]
    for option, path in zip(("--summarizer", "--embedder"), plugins, strict=True):
        if path:
            args += [option, path]
            env["PYTHONPATH"] = os.getcwd()  # a plug-in of the working directory, as this command found it
    if max_turn_bytes != DEFAULT_MAX_TURN_BYTES:
        args += ["--max-turn-bytes", str(max_turn_bytes)]
    server: dict[str, Any] = {"command": command, "args": args}
    if env:
        server["env"] = env
    click.echo(json.dumps({"mcpServers": {"partner-memory": server}}, indent=2))
    if target.uri is not None and "***" in env["MONGODB_URI"]:
        click.echo("note: put the password in place of *** in MONGODB_URI (it is never printed)", err=True)


def _check_options(ctx: click.Context, transport: str, core_ids: tuple[str, ...]) -> None:
    """Usage errors: HTTP options given for stdio, a ``--core`` that is no id."""
    if transport == "stdio":
        given = [
            f"--{name}" for name in HTTP_ONLY if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
        ]
        if given:
            raise click.UsageError(f"only --transport http takes {', '.join(given)}")
    for core_id in core_ids:
        if (problem := id_problem(core_id, "--core")) is not None:
            raise click.BadParameter(problem, param_hint="--core")

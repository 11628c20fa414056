"""Run the benchmark suite: ``python -m benchmarks`` (``--quick`` for a tiny run, ``--help`` for the rest).

Where each figure is measured: latencies, throughputs and scale on a server (``--uri``, ``MONGODB_URI``, or
else a throwaway SecantusDB this command starts for the run, as ``scripts/test-server`` does, and stops at
the end); commands and bytes on the scripted server (:mod:`benchmarks.wire_server`); in memory, counts only
(the in-memory section times the embedded backend as a usability bound, not a performance claim).
``--no-server`` starts nothing and measures in memory only. The output says which server was measured.

Prints one rich table per section and writes every raw figure, the machine, the server, the backends and the
versions to a JSON file (``benchmarks/results/`` by default, which git ignores). Exit status 0, or 1 with
``--check`` when a target was missed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from benchmarks import (
    admin_scale,
    concurrency,
    console_page,
    import_time,
    in_memory,
    listener_bench,
    overhead,
    peers,
    recall_locomo,
    recall_scale,
    turn_cost,
    wire_cost,
)
from benchmarks.backends import given_uri, server_description, started_server
from benchmarks.common import FULL, QUICK, Scale, SectionResult
from benchmarks.locomo_data import ENVIRONMENT
from benchmarks.report import (
    combined,
    default_output,
    document,
    keep_protocol_model_section,
    locomo_table,
    markdown,
    print_tables,
    readme_excerpt,
    replace_between_markers,
    replace_locomo_table,
    write,
)

SECTIONS: dict[str, Callable[[Scale], Awaitable[list[SectionResult]]]] = {
    "turn": turn_cost.run,
    "wire": wire_cost.run,
    "overhead": overhead.run,
    "listener": listener_bench.run,
    "concurrency": concurrency.run,
    "admin": admin_scale.run,
    "peers": peers.run,
    "recall-locomo": recall_locomo.run,
    "recall-scale": recall_scale.run,
    "in-memory": in_memory.run,
    "import": import_time.run,
    "console": console_page.run,
}


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks every path in seconds")
    parser.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"comma-separated subset of: {', '.join(SECTIONS)} (default: all)",
    )
    parser.add_argument(
        "--quick-sections",
        default="",
        help="comma-separated sections to run at the quick scale while the rest run at the full one (a full "
        "run on a slow server); the page says which scale each ran at",
    )
    parser.add_argument("--output", type=Path, help="JSON file to write (default: benchmarks/results/...)")
    parser.add_argument(
        "--markdown", type=Path, help="also write the markdown page (e.g. docs/benchmarks.md)"
    )
    parser.add_argument(
        "--readme", type=Path, help="also put the headline table between the benchmark markers of this README"
    )
    parser.add_argument(
        "--from-json",
        type=Path,
        nargs="+",
        help="render the tables of earlier runs' JSON files instead of measuring; with several, a section "
        "measured by a later file replaces the earlier files' (the page names each run)",
    )
    parser.add_argument("--check", action="store_true", help="exit with status 1 when a target is missed")
    parser.add_argument(
        "--uri",
        help="the server to measure on (the same as MONGODB_URI=...; default: a throwaway SecantusDB started "
        "for the run)",
    )
    parser.add_argument(
        "--no-server",
        action="store_true",
        help="start no server and ignore MONGODB_URI: in memory only, counts only (and the scripted server)",
    )
    parser.add_argument(
        "--locomo",
        type=Path,
        help=f"the LoCoMo conversations (default: ${ENVIRONMENT}, else ../shared/data/locomo/ beside the "
        "project)",
    )
    parser.add_argument(
        "--recall-doc",
        type=Path,
        help="also put the LoCoMo table between the locomo-table markers of this page (e.g. docs/recall.md)",
    )
    arguments = parser.parse_args(argv)
    chosen = _names(arguments.sections)
    quick = _names(arguments.quick_sections)
    unknown = [name for name in [*chosen, *quick] if name not in SECTIONS]
    if unknown or not chosen:
        parser.error(f"unknown sections {unknown}; choose from {', '.join(SECTIONS)}")
    if arguments.no_server and arguments.uri:
        parser.error("--no-server and --uri exclude each other")
    arguments.sections = chosen
    arguments.quick_sections = quick
    return arguments


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


async def run_sections(
    names: Sequence[str], scales: dict[str, Scale], console: Console
) -> list[SectionResult]:
    results: list[SectionResult] = []
    for name in names:
        with console.status(f"running {name} ({scales[name].name})..."):
            started = time.perf_counter()
            results.extend(await SECTIONS[name](scales[name]))
        console.log(f"{name} ({scales[name].name}): {time.perf_counter() - started:.1f} s")
    return results


MEASURED_ON_A_SERVER = frozenset(
    {"turn", "listener", "concurrency", "admin", "recall-locomo", "recall-scale", "console"}
)
"""The sections that measure on the run's server (a started one too): latency, throughput, scale, and a
turn's bytes on a replica set (its cluster time gossip included); the others count (in memory, on the
scripted server) and measure a server only when one is given."""


@contextmanager
def server(no_server: bool, sections: Sequence[str], console: Console) -> Iterator[str]:
    """The server of the run, and how the output names it: none with ``--no-server``, the one given
    (``--uri``, ``MONGODB_URI``), else a throwaway SecantusDB started here (when a section measures on a
    server) and stopped when the run ends."""
    if no_server:
        os.environ.pop("MONGODB_URI", None)
        yield server_description()
    elif given_uri() is not None or not MEASURED_ON_A_SERVER.intersection(sections):
        yield server_description(none="none: no section of this run measures on a server")
    else:
        with ExitStack() as stack:
            with console.status("starting a throwaway SecantusDB (the server of scripts/test-server)..."):
                stack.enter_context(started_server())
            # SIGTERM ends the run like Ctrl-C, through the exit that stops the server (which runs in a
            # session of its own and would otherwise be left behind)
            previous = signal.signal(signal.SIGTERM, _interrupted)
            stack.callback(signal.signal, signal.SIGTERM, previous)
            yield server_description()


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parse(argv)
    if arguments.uri:
        os.environ["MONGODB_URI"] = arguments.uri
    if arguments.locomo is not None:
        os.environ[ENVIRONMENT] = str(arguments.locomo)
    scale = QUICK if arguments.quick else FULL
    scales = {name: QUICK if name in arguments.quick_sections else scale for name in arguments.sections}
    console = Console() if sys.stdout.isatty() else Console(width=130)
    logging.basicConfig(level=logging.WARNING)
    if arguments.from_json is not None:
        data = combined([json.loads(path.read_text(encoding="utf-8")) for path in arguments.from_json])
        results = [
            SectionResult.from_dict(key, section)
            for key, sections in data["sections"].items()
            for section in sections
        ]
        print_tables(console, results)
    else:
        started_at = datetime.now(UTC)
        started = time.perf_counter()
        with server(arguments.no_server, arguments.sections, console) as measured_on:
            console.print(f"server: {measured_on}")
            results = asyncio.run(run_sections(arguments.sections, scales, console))
        scale_of = {name: chosen.name for name, chosen in scales.items()}
        data = document(results, scale_of, measured_on, started_at, time.perf_counter() - started)
        print_tables(console, results)
        console.print(f"server: {measured_on}")
        output = arguments.output or default_output(started_at)
        write(output, json.dumps(data, indent=2, default=str) + "\n")
        console.print(f"raw figures: {output}")
    if arguments.markdown is not None:
        page = markdown(results, data)
        if arguments.markdown.exists():  # the protocol model's long run is recorded by hand: kept
            page = keep_protocol_model_section(arguments.markdown.read_text(encoding="utf-8"), page)
        write(arguments.markdown, page)
        console.print(f"markdown: {arguments.markdown}")
    if arguments.readme is not None:
        text = arguments.readme.read_text(encoding="utf-8")
        write(arguments.readme, replace_between_markers(text, readme_excerpt(results, data)))
        console.print(f"README headline table: {arguments.readme}")
    if arguments.recall_doc is not None:
        table = locomo_table(results, data)
        if table is None:
            console.print("no recall-locomo section in this run: the LoCoMo table was left as it was")
        else:
            text = arguments.recall_doc.read_text(encoding="utf-8")
            write(arguments.recall_doc, replace_locomo_table(text, table))
            console.print(f"LoCoMo table: {arguments.recall_doc}")
    missed = data["targets"]["missed"]
    console.print(f"targets met: {data['targets']['met']}, missed: {len(missed)}")
    return 1 if arguments.check and missed else 0

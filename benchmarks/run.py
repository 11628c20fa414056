"""Run the benchmark suite: ``python -m benchmarks`` (``--quick`` for a tiny run, ``--help`` for the rest).

Prints one rich table per section and writes every raw figure, the machine, the backends and the versions to
a JSON file (``benchmarks/results/`` by default, which git ignores). Exit status 0, or 1 with ``--check`` when
a target was missed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from benchmarks import (
    admin_scale,
    concurrency,
    console_page,
    listener_bench,
    overhead,
    peers,
    recall_locomo,
    recall_scale,
    turn_cost,
    wire_cost,
)
from benchmarks.common import FULL, QUICK, Scale, SectionResult
from benchmarks.locomo_data import ENVIRONMENT
from benchmarks.report import (
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
    parser.add_argument("--output", type=Path, help="JSON file to write (default: benchmarks/results/...)")
    parser.add_argument(
        "--markdown", type=Path, help="also write the markdown page (e.g. docs/benchmarks.md)"
    )
    parser.add_argument(
        "--readme", type=Path, help="also put the headline table between the benchmark markers of this README"
    )
    parser.add_argument(
        "--from-json", type=Path, help="render the tables of an earlier run's JSON file instead of measuring"
    )
    parser.add_argument("--check", action="store_true", help="exit with status 1 when a target is missed")
    parser.add_argument(
        "--uri", help="a MongoDB server for the sections that support one (the same as MONGODB_URI=...)"
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
    chosen = [name.strip() for name in arguments.sections.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in SECTIONS]
    if unknown or not chosen:
        parser.error(f"unknown sections {unknown}; choose from {', '.join(SECTIONS)}")
    arguments.sections = chosen
    return arguments


async def run_sections(names: Sequence[str], scale: Scale, console: Console) -> list[SectionResult]:
    results: list[SectionResult] = []
    for name in names:
        with console.status(f"running {name} ({scale.name})..."):
            started = time.perf_counter()
            results.extend(await SECTIONS[name](scale))
        console.log(f"{name}: {time.perf_counter() - started:.1f} s")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parse(argv)
    if arguments.uri:
        os.environ["MONGODB_URI"] = arguments.uri
    if arguments.locomo is not None:
        os.environ[ENVIRONMENT] = str(arguments.locomo)
    scale = QUICK if arguments.quick else FULL
    console = Console() if sys.stdout.isatty() else Console(width=130)
    logging.basicConfig(level=logging.WARNING)
    if arguments.from_json is not None:
        data = json.loads(arguments.from_json.read_text(encoding="utf-8"))
        results = [
            SectionResult.from_dict(key, section)
            for key, sections in data["sections"].items()
            for section in sections
        ]
        print_tables(console, results)
    else:
        started_at = datetime.now(UTC)
        started = time.perf_counter()
        results = asyncio.run(run_sections(arguments.sections, scale, console))
        data = document(results, scale.name, started_at, time.perf_counter() - started)
        print_tables(console, results)
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

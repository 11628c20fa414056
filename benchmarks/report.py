"""Turning section results into the rich table, the JSON file and the markdown page."""

from __future__ import annotations

import os
import platform
import re
import sys
from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from benchmarks import peers_report, recall_report
from benchmarks.common import Row, SectionResult, package_versions, verdict

PACKAGES = (
    "partner-repo",
    "motor",
    "pymongo",
    "beanie",
    "pydantic",
    "pydantic-core",
    "mongomock",
    "mongomock-motor",
    "mockupdb",
    "langchain-mongodb",
    "langchain-core",
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-mongodb",
)
NOTE = "Absolute times vary by machine and load; the ratios (and command/byte counts) are the claim."
README_START = "<!-- benchmarks:start -->"
README_END = "<!-- benchmarks:end -->"
LOCOMO_START = "<!-- locomo-table:start -->"
LOCOMO_END = "<!-- locomo-table:end -->"


@dataclass(frozen=True)
class Headline:
    """Rows the README's short table shows: those of section ``key`` whose measurement matches ``pattern``, on
    the backends whose short name holds ``backend``."""

    key: str
    pattern: str
    backend: str = ""

    def selects(self, result: SectionResult, row: Row) -> bool:
        return (
            result.key == self.key
            and self.backend in _short_backend(result.backend)
            and re.search(self.pattern, row.measurement) is not None
        )


HEADLINES = (
    Headline("turn", r"^recommended: per turn"),  # a turn, rolls included, at every session size
    Headline("wire", r"^rolling step"),  # a roll's bytes do not grow with the unit
    Headline("overhead", r"^append: "),  # the CPU the library adds to the driver's append
    Headline("listener", r"^backfill .*, concurrency 32$"),  # parallel delivery to an I/O-bound consumer
    Headline("concurrency", r"^32 writers, 1 unit$", "-> scripted"),  # racing writers lose nothing
    Headline("admin", r"^find, page of"),  # a deep admin page costs what the first does (on a server)
    Headline("peers", r"^turn write"),  # a turn's write against the stores a service could pick instead
    Headline("recall-locomo", r"^evidence recall at \d+ messages: partner-repo", "embedded"),  # LoCoMo
    Headline(  # recall as a core's history grows: what MongoDB bounds, and with vectors
        "recall-scale",
        r"^(recall: documents examined by the other reads|recall with vectors.*?: (round trips|bytes read))",
    ),
    Headline("import", r"^`import partner_repo`"),  # importing the package against its driver stack
)
"""The headline figures: the README shows these rows, docs/benchmarks.md every row."""

_INTRO = """\
# Benchmarks

The suite measures the library's cost claims, each where it can be measured for what it is:

- **On a server**: every latency, throughput and scale figure (the listener, concurrent appends, admin
  pages at depth and at scale, recall's cost as a core's history grows, LoCoMo's ingest and recall
  latency). The server is the one given with `--uri` or `MONGODB_URI`; without one, `python -m benchmarks`
  starts a throwaway SecantusDB for the run (the server of `scripts/test-server`: MongoDB-compatible, a
  single-node replica set on 127.0.0.1, in memory) and stops it at the end. SecantusDB is written in
  Python and shares the machine's CPUs with the benchmark, so its absolute times are far above a
  MongoDB's: the ratios between sizes, the documents examined and the command counts are the claim.
- **On the scripted server**: commands and bytes, counted exactly: the real driver with pymongo command
  monitoring against `benchmarks/wire_server.py` (mockupdb on the socket, each command answered from an
  in-memory store in MongoDB's reply shapes): the per-turn cost, the wire cost against the unit's size, the
  peers (langchain-mongodb, LangGraph and the raw driver; `pip install -e '.[bench]'` installs them), and
  the library's CPU over the raw driver (this process's CPU is the library's and the driver's only).
- **In memory**: counts only (collection calls, documents, the largest document), never a latency or a
  throughput; and LoCoMo's evidence recall, which is quality, not speed. The embedded backend is
  mongomock, which tests every document and copies what it answers: it is there for the demo, trying the
  CLI and the MCP server, and tests. The in-memory section times it only to say up to which size it stays
  comfortable (a usability bound, not a performance claim).

From the repository root:

```bash
python -m benchmarks              # full run on a throwaway SecantusDB; writes benchmarks/results/*.json
python -m benchmarks --quick      # tiny sizes, seconds: every path, no meaningful figures
python -m benchmarks --no-server  # no server: in memory (counts only) and the scripted server
python -m benchmarks --uri mongodb://...   # that server instead (or MONGODB_URI=...)
python -m benchmarks --quick-sections recall-scale   # those sections quick, the others full
python -m benchmarks --sections wire,overhead --output out.json --check  # 1 if a target is missed
python -m benchmarks --sections recall-locomo --check   # LoCoMo; --locomo PATH: read it there
python -m benchmarks --sections recall-locomo --recall-doc docs/recall.md  # its table, there
```

The output names the server it measured on. A server given with `--uri` is also measured beside the
scripted server by the sections that count commands and bytes; a started SecantusDB is left to the
sections that time. `--markdown docs/benchmarks.md --readme README.md` rewrites this page and the README's
headline table (a few rows of the table below). The default test command does not run the benchmarks;
`tests/test_benchmarks_smoke.py` runs each section once at the tiny size without a server (counts only, and
the scripted server), so they do not rot.""".splitlines()
"""The page's opening: what is measured where, and how to run it."""

_SECTION_TEXT = """\
Where: **server** = the server of the run (`--uri`, `MONGODB_URI`, or the throwaway SecantusDB the command
starts); **scripted** = the real driver against the scripted server of `benchmarks/wire_server.py`, which
counts commands and bytes exactly; **in memory** = the embedded backend (mongomock), counts only.

0. **Per turn of a conversation, rolls included** (scripted; and a server given with `--uri`): one session
   holds 10, 100, 1,000 and 5,000 stored messages and the window its last roll kept; turns of two
   200-character messages are recorded until whole roll cycles have passed (default `trigger_limit` 36),
   through `RollingService.record_and_roll` (recommended) and through `record` + `maybe_roll` (0.2's two
   calls): round trips and BSON bytes per turn, and a roll's commands. Targets (issue 19): at most 1.25 round
   trips and 2,500 bytes per turn at every size, flat within 1.1x; a roll in at most 3 commands (4 for the
   first roll of a process, which reads the unit's head first).
1. **Wire cost vs unit size** (scripted; and a server given with `--uri`): pymongo command monitoring, units
   of 10, 1,000 and 10,000 messages; per operation the command sequence and the BSON bytes of commands and
   replies (the scripted server refuses what its store cannot answer faithfully). `get` is a control: it
   reads the whole unit on purpose, so its bytes must grow, which shows the meter would catch an O(unit)
   operation. Target: the same commands at every size, bytes within 1.1x.
2. **Library CPU vs the raw driver** (scripted; and a server given with `--uri`): library call and
   hand-written driver call alternated in batches, ratio of this process's CPU time per round, median and
   interquartile range; against the scripted server in a child process this process's CPU is only library
   and driver. Not in memory: there mongomock's scans and copies are in-process CPU on both sides and would
   make the ratio mongomock's. `append` is optimistic (a push guarded by the unit's version: no lock); a
   repository remembers the heads it saw, so its writer's append is one guarded push: the *append* row
   measures that steady state (before each round, untimed, the unit is deleted, seeded again, and its head
   read once). *append, first from a new repository* is the cold path (head read, then push) against a raw
   side doing the same two round trips. `get` validates every message as strictly as a write does; the
   library pauses the garbage collector while it builds a unit of 1,000+ messages, and *unit load, collector
   paused* pauses it for the whole timed batches. On a 2-CPU machine the scripted server shares the CPUs
   with the measured process: read a PASS or FAIL near the line across several runs.
3. **Listener** (server, the sizes below divided by 10 at the full scale, as SecantusDB answers one command
   at a time; in memory, counts): the polling path with a no-op consumer: backfill throughput of
   a new group (2,000 slices in 10 units) and its commands a slice, and append-to-consume latency at 100
   slices/s polling every 100 ms. *Parallel delivery*: a consumer that sleeps 50 ms a slice (an I/O-bound
   consumer), 2,000 slices over 200 units: backfill throughput at concurrency 1, 8, 32 and 128 and the ratio
   to concurrency 1 (target: >= 20x at 32; one slice at a time, 50 ms caps a consumer at 20 slices/s), and
   append-to-consume latency at a steady 100 slices/s with concurrency 32, through the server's change
   stream. Every row checks that each slice was delivered exactly once, each unit's slices in append order
   and never two of a unit at once, and fails otherwise. SecantusDB answers one command at a time, so at
   high concurrency the listener's own reads and writes (about two commands a slice), not the consumer,
   bound the throughput. In memory: the backfill's collection calls a slice, and the parallel backfill at
   the largest concurrency, checked; nothing timed.
4. **Concurrency** (scripted and server; in memory, counts): 1, 8 and 32 writers appending to one unit, each
   through its own repository (as separate processes would: only the version guard orders them), the same
   32 writers as tasks sharing one repository (which queues appends to a unit, so they never race), and 32
   writers on 32 units: appends per second and retries (update commands - appends); each writer appends 25
   turns (5 on the server: every lost race costs it a read and an update). In memory every call yields to
   the event loop (as a round trip would, otherwise writers could not interleave) and only the retries are
   counted. Each run checks that every message is stored once and the slices tile the unit; an append that
   kept losing for the library's patience (10 s) is refused with `ConflictError` and fails its row. Rows of
   one unit are not comparable in absolute terms: the unit grows with the number of writers.
5. **Admin query scale** (server; in memory, counts; the sizes below divided by 10 at the full scale:
   10,000 slices in 200 units, depth 1,000): 100,000 slices in 2,000 units of 100 cores, seeded in bulk, one
   slice a second overall, in two layouts: *sessions* (each core's units follow one another, as
   Partner's sessions do) and *interleaved* (every unit holds slices of the whole period: the worst case). A
   walk to depth 10,000 checks every slice comes once and in order; first page vs the page at depth 10,000
   (target: deep/first <= 1.5x), and the first page when the collection held only the oldest tenth of the
   units (how a page's cost grows with history); the unit documents a page's aggregations select (what a
   server reads). A page reads windows of creation time next to where it starts and unwinds only the units
   holding slices there: in the sessions layout that is a few units whatever the history; in the
   interleaved layout every unit holds slices of every window. In memory: the walk, checked, and the unit
   documents selected; nothing timed.
6. **Peers** (scripted): the same meter as section 1, one session through each store a service could pick
   instead: partner-repo's recommended per-turn call, langchain-mongodb's `MongoDBChatMessageHistory`, a
   LangGraph `MessagesState` graph checkpointed by `MongoDBSaver` (one `invoke` a turn) and the raw driver
   (one document, `$push`/`$each`). Turns of 2 messages of 200 characters; the session grows to about 10,
   100, 1,000 and 5,000 messages: partner-repo leads to its first roll at or after each size, the others
   store the same turns. There the whole-history and last-20 reads are measured, then the next whole roll
   cycle, the same turns for every peer, divided by its turns. Per operation: round trips, BSON bytes sent
   and received, client process CPU, and each over partner-repo's. The peers install with
   `pip install -e '.[bench]'`; one that is not installed is skipped with the reason.
7. **Recall on LoCoMo** (in memory, quality; server, latency; Maharana et al., "Evaluating Very Long-Term
   Conversational Memory of LLM Agents", ACL 2024; read from `../shared/data/locomo/`, `--locomo PATH` or
   `PARTNER_REPO_LOCOMO`, never copied into the repository): each conversation is recorded through the
   public API into a core of its own, on a fresh database, each session's turns at that session's date
   (`speaker_a` as the user, `speaker_b` as the assistant, named; a shared photo's caption appended; the
   turn's `dia_id` in the metadata, for scoring only), `RollingService.record_and_roll` with the
   `ExtractiveSummarizer` and `trigger_limit` 36, an idle roll at each session gap and one after the last
   session, every roll through `RecallIndexer.consume`. Every question of categories 1-4 that names evidence
   is asked with `recall(limit=10, max_messages=20 or 60)`; evidence recall is the share of its evidence turns
   among the returned messages (targets: >= 0.70 at 20, >= 0.85 at 60), measured in memory. The baselines
   run in the same process on the same turn texts with the same tokenizer: the last N turns, BM25 over single
   turns, BM25 over 12-turn windows (k1 1.2, b 0.75). On the server the first conversation is ingested and
   asked again, timed: ingest per turn, recall p50/p95. `--recall-doc docs/recall.md` writes the table into
   that page. Without the data the quick scale runs a tiny synthetic conversation instead (and says so);
   the full scale fails its targets.
8. **Recall cost vs history** (server; in memory, counts): one core grown, in place, to 1,000 and 10,000
   slices, 8 messages of Zipf-vocabulary words a slice, units stored with `insert_many` and every slice
   indexed through `RecallIndexer.consume`, one at a time. At each size, 10 real rolls of the core
   (`RollingService.roll` of 8 recorded messages), each indexed: the roll's and the index write's latency and
   commands; then 20 recalls of the same queries (two rare words of the first unit, two of the 50 most
   common, a filler): latency p50/p95 and commands; and the largest document of `recall_index`. Every read
   of each recall and index write is asked again as `explain` (`executionStats`): the documents examined, and
   any collection scan. Targets (issue 31): the documents examined and the p50 latency of a recall and of an
   index write within 1.3x from the smallest size to the largest, no collection scan, no document reaching
   64 KiB; the roll's own latency is shown beside them (it reads and writes no recall data, so its growth is
   the server's). SecantusDB plans every one of those reads from an index, but does not stop an index scan
   at a `$limit`: a common query term's count reads every slice holding it there, where MongoDB stops at
   513 (`tests/emulator_gaps.py`). In memory (1,000 and 5,000 slices): the collection calls of an index
   write (target: at most 4), of a recall and of a roll, and the largest document; the history is built by
   `MemoryHistory` (each slice still indexed by `consume`, on a scratch database holding what an index write
   reads: mongomock copies a whole collection to answer an aggregation, so indexing in place would take
   hours).
9. **The in-memory default** (in memory: a usability bound of the demo backend, not a performance claim):
   the history of section 8 at 100, 1,000 and 5,000 slices of one core, in a fresh in-memory database each:
   a recall's latency p50/p95 (the same recall as section 8), a roll's latency (`RollingService.roll` after
   recording 8 messages) and its index write's (`RecallIndexer.consume`), and the collection calls of each.
   Target: a recall's p95 under 1 s at 1,000 slices. docs/operations.md ("The in-memory default") quotes it.
10. **Import time** (fresh interpreters): `python -X importtime -c "import partner_repo"` against
   `python -X importtime -c "import beanie, pymongo"` in the same run, interleaved, medians of several
   interpreters of the cumulative import time of each statement's top-level entries (the modules a bare
   interpreter imports at startup left out; the driver stack counts its `beanie` and `pymongo` entries):
   target at most 1.3x; and the same ratio, no target, for the everyday API (`from partner_repo import
   MemoryCoreRepository, MemoryRecall, RollingListener, RollingService, connect`), with how many
   `partner_repo` modules each loads.
""".splitlines()


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
    }


def versions() -> dict[str, str | None]:
    return package_versions(PACKAGES)


def document(
    results: list[SectionResult], scales: dict[str, str], server: str, started: datetime, seconds: float
) -> dict[str, Any]:
    """The JSON file: every raw figure, with what and where it was measured (``scales``: the scale each
    section ran at; ``server``: the server of the run, or none)."""
    sections: dict[str, list[dict[str, Any]]] = {}
    for result in results:
        sections.setdefault(result.key, []).append(result.as_dict())
    checks = [(r.title, r.backend, row.measurement, row.passed) for r in results for row in r.rows]
    return {
        "generated_at": started.isoformat(),
        "duration_seconds": seconds,
        "scale": _scale_text(scales),
        "scales": scales,
        "server": server,
        "note": NOTE,
        "command": " ".join(["python -m benchmarks", *sys.argv[1:]]),
        "machine": machine(),
        "versions": versions(),
        "backends": sorted({r.backend for r in results}),
        "targets": _targets(checks),
        "sections": sections,
    }


def combined(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One run's JSON made of several (``--from-json A B``): each section from the last run that measured
    it, in the first run's order; the targets counted again; the command says which run gave which
    sections, and the date, machine and versions are the last run's (the page says so)."""
    if len(runs) == 1:
        return runs[0]
    sections: dict[str, list[dict[str, Any]]] = {}
    source: dict[str, int] = {}
    for number, run in enumerate(runs):
        for key, measured in run["sections"].items():
            sections[key] = measured
            source[key] = number
    origins = [
        f"{run['generated_at'][:16].replace('T', ' ')} `{run['command']}`: {', '.join(keys)}"
        for number, run in enumerate(runs)
        if (keys := [key for key in sections if source[key] == number])
    ]
    scales = {key: value for run in runs for key, value in run.get("scales", {}).items() if key in sections}
    checks = [
        (section["title"], section["backend"], row["measurement"], row.get("passed"))
        for measured in sections.values()
        for section in measured
        for row in section.get("rows", [])
    ]
    last = runs[-1]
    return {
        **last,
        "duration_seconds": sum(float(run["duration_seconds"]) for run in runs),
        "scale": _scale_text(scales),
        "scales": scales,
        "command": "; ".join(origins),
        "runs": len(origins),
        "backends": sorted({section["backend"] for measured in sections.values() for section in measured}),
        "targets": _targets(checks),
        "sections": sections,
    }


def _targets(checks: list[tuple[str, str, str, bool | None]]) -> dict[str, Any]:
    """How many judged rows met their target, and which missed (``title [backend]: measurement``); a row
    judged by nothing (``None``) is neither."""
    return {
        "met": sum(1 for *_, passed in checks if passed),
        "missed": [
            f"{title} [{backend}]: {measurement}"
            for title, backend, measurement, passed in checks
            if passed is False
        ],
    }


def _scale_text(scales: dict[str, str]) -> str:
    """``full scale``, or ``full scale; in-memory at the quick scale`` when some sections ran at another."""
    counted = Counter(scales.values())
    if not counted:
        return "full scale"
    most = counted.most_common(1)[0][0]
    others = {
        scale: [key for key, chosen in scales.items() if chosen == scale]
        for scale in counted
        if scale != most
    }
    return f"{most} scale" + "".join(
        f"; {', '.join(keys)} at the {scale} scale" for scale, keys in others.items()
    )


def print_tables(console: Console, results: list[SectionResult]) -> None:
    for result in results:
        table = Table(
            title=f"{result.title}\n[dim]{result.backend}[/dim]", title_justify="left", expand=False
        )
        table.add_column("Measurement", overflow="fold")
        table.add_column("Result", overflow="fold")
        table.add_column("Target")
        table.add_column("", justify="center")
        for row in result.rows:
            # escaped: a figure's text is never markup (an install hint like '.[bench]' would vanish)
            table.add_row(escape(row.measurement), escape(row.value), escape(row.target), _styled(row))
        console.print(table)
        for note in result.notes:
            console.print(f"  [dim]{note}[/dim]")
        console.print()


def markdown(results: list[SectionResult], data: dict[str, Any]) -> str:
    """The whole docs/benchmarks.md page: how to run, the latest table, how each figure is measured."""
    missed = data["targets"]["missed"]
    lines = [
        *_INTRO,
        "",
        "## Latest run",
        "",
        summary_line(data),
        "",
        f"> {NOTE}",
        "",
        table_markdown(results),
        "",
        f"Targets met: {data['targets']['met']}, missed: {len(missed)}.",
        *(f"- Missed: {item}" for item in missed),
        "",
        "Versions: " + ", ".join(f"{name} {v}" for name, v in data["versions"].items() if v) + ".",
        "",
        *_peers_part(results, "## Peers"),
        *_locomo_part(results, data),
        "## What each section measures",
        "",
        *_SECTION_TEXT,
        "",
        "## Notes from the run",
        "",
    ]
    seen: set[str] = set()
    for result in results:
        for note in result.notes:
            line = f"- {result.title} ({_short_backend(result.backend)}): {note}"
            if note not in seen:
                seen.add(note)
                lines.append(line)
    return "\n".join(lines) + "\n"


def readme_excerpt(results: list[SectionResult], data: dict[str, Any]) -> str:
    """What the README shows between its benchmark markers: when and where the run was measured, the
    headline rows (:data:`HEADLINES`) as one short table, the run's verdict, and a link to docs/benchmarks.md,
    which has every row, the peers' wide table and how each figure is measured."""
    missed = data["targets"]["missed"]
    return "\n".join(
        [
            summary_line(data),
            f"{NOTE} Every figure, the peers side by side, and how each is measured: "
            "[docs/benchmarks.md](docs/benchmarks.md).",
            "",
            table_markdown(headline(results)),
            "",
            f"Targets met in the whole run: {data['targets']['met']}, missed: {len(missed)}"
            + (" (see docs/benchmarks.md)." if missed else "."),
        ]
    )


def headline(results: list[SectionResult]) -> list[SectionResult]:
    """The results cut to their headline rows (sections with none left out), in the run's order."""
    cut = []
    for result in results:
        rows = [row for row in result.rows if any(h.selects(result, row) for h in HEADLINES)]
        if rows:
            cut.append(replace(result, rows=rows))
    return cut


def _peers_part(results: list[SectionResult], heading: str) -> list[str]:
    """The peers section's wide table under ``heading`` (nothing when the run has no peers section)."""
    tables = peers_report.markdown_tables(results, _short_backend)
    return [heading, "", tables, ""] if tables else []


def _locomo_part(results: list[SectionResult], data: dict[str, Any]) -> list[str]:
    """The LoCoMo table between its markers (nothing when the run has no recall-locomo section)."""
    table = locomo_table(results, data)
    return ["## Recall on LoCoMo", "", LOCOMO_START, table, LOCOMO_END, ""] if table else []


MODEL_START = "<!-- protocol-model:start -->"
MODEL_END = "<!-- protocol-model:end -->"


def keep_protocol_model_section(old_page: str, new_page: str) -> str:
    """``new_page`` with the protocol model check's section of ``old_page`` (between :data:`MODEL_START` and
    :data:`MODEL_END`, recorded by hand after a long run, docs/testing.md) appended: not a benchmark's."""
    if MODEL_START not in old_page or MODEL_END not in old_page:
        return new_page
    section = old_page[old_page.index(MODEL_START) : old_page.index(MODEL_END) + len(MODEL_END)]
    return new_page.rstrip("\n") + "\n\n" + section + "\n"


def replace_between_markers(text: str, body: str, start: str = README_START, end: str = README_END) -> str:
    """``text`` with what lies between the two marker lines replaced by ``body``."""
    if start not in text or end not in text or text.index(start) > text.index(end):
        raise ValueError(f"the markers {start} and {end} are missing or out of order")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body.strip()}\n{end}{tail}"


def locomo_table(results: list[SectionResult], data: dict[str, Any]) -> str | None:
    """The run's LoCoMo table (None: the run measured no LoCoMo)."""
    return recall_report.markdown_table(results, summary_line(data))


def replace_locomo_table(text: str, table: str) -> str:
    """``text`` with what lies between its LoCoMo markers (:data:`LOCOMO_START`, :data:`LOCOMO_END`)
    replaced by ``table`` (docs/recall.md's ``## LoCoMo`` section has them)."""
    return replace_between_markers(text, table, LOCOMO_START, LOCOMO_END)


def summary_line(data: dict[str, Any]) -> str:
    info = data["machine"]
    scale = str(data["scale"])
    scale = scale if "scale" in scale else f"{scale} scale"  # a file written before the scales per section
    server = f" Server: {data['server']}." if data.get("server") else ""
    return (
        f"Measured {data['generated_at'][:10]} {_how(data)} ({scale}, "
        f"{_duration(data['duration_seconds'])}) on {info['cpu'] or info['machine']} "
        f"({info['cpu_count']} CPUs shared with other work, {info['memory_gib']} GiB), {info['python']}."
        + server
    )


def _how(data: dict[str, Any]) -> str:
    """The command of one run, or each run of a combined page with the sections it gave."""
    if data.get("runs", 1) > 1:
        return f"in {data['runs']} runs ({data['command']})"
    return f"with `{data['command']}`"


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 60 else f"{seconds / 60:.0f} min"


def table_markdown(results: list[SectionResult]) -> str:
    """One markdown table of every row, with its section and backend."""
    lines = ["| Section | Backend | Measurement | Result | Target | |", "|---|---|---|---|---|---|"]
    for result in results:
        for row in result.rows:
            cells = [result.title, _short_backend(result.backend), row.measurement, row.value, row.target]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + f" | {verdict(row.passed)} |")
    return "\n".join(lines)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def default_output(started: datetime) -> Path:
    stamp = started.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    return Path(__file__).resolve().parent / "results" / f"benchmark-{stamp}.json"


def _styled(row: Row) -> str:
    if row.passed is None:
        return ""
    return "[green]PASS[/green]" if row.passed else "[red]FAIL[/red]"


def _short_backend(backend: str) -> str:
    if backend.startswith("embedded"):
        return "embedded" + (" (yielding)" if "yielding" in backend else "")
    if " driver -> " in backend:
        return backend.split(" driver -> ", 1)[0] + " -> scripted server"
    return backend


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None

"""Every benchmark runs once at a tiny size, so the suite cannot rot between full runs.

No server is started or used here: each section runs as with ``--no-server`` (in memory, counts only, and
the scripted server), whatever ``MONGODB_URI`` says. Times are not asserted (performance claims live in the
benchmark output, not in tests). What the benchmarks check that is not a timing is asserted: an operation's
command sequence and bytes do not grow with the unit, concurrent writers leave every message stored once, an
index write makes three calls whatever the history, and the in-memory history builder leaves the index that
indexing in place leaves. The scripted server the wire benchmarks talk to is checked to answer as MongoDB
does, and to refuse what its store cannot answer faithfully.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pymongo.errors import DuplicateKeyError, OperationFailure

from benchmarks import import_time, peers, recall_locomo, recall_scale
from benchmarks.backends import memory_database, scripted_server
from benchmarks.common import QUICK, SectionResult
from benchmarks.locomo_data import ENVIRONMENT, data_path, files
from benchmarks.peer_drivers import PartnerRepoPeer, RawDriverPeer, Stores
from benchmarks.peers_report import markdown_tables
from benchmarks.report import combined, locomo_table, replace_locomo_table
from benchmarks.run import SECTIONS
from partner_repo.mongo import RECALL_INDEX, UNITS, driver
from partner_repo.recall import RecallIndexer
from partner_repo.recall import _store as recall_store

pytestmark = pytest.mark.benchmark_smoke

ROOT = Path(__file__).resolve().parent.parent
_RUNS: dict[str, list[SectionResult]] = {}


@pytest.fixture(autouse=True)
def no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sections measure in memory and on the scripted server only, as with ``--no-server``."""
    monkeypatch.delenv("MONGODB_URI", raising=False)


async def run_once(section: str) -> list[SectionResult]:
    """Each section runs once per session at the tiny size; the tests below read its figures."""
    if section not in _RUNS:
        _RUNS[section] = await SECTIONS[section](QUICK)
    return _RUNS[section]


@pytest.mark.parametrize("section", list(SECTIONS))
async def test_each_benchmark_runs_once_at_tiny_size(section: str) -> None:
    results = await run_once(section)

    assert results
    for result in results:
        assert result.rows, f"{section} on {result.backend} measured nothing"
        assert all(row.value for row in result.rows)
        json.dumps(result.as_dict(), default=str)  # the raw figures can be written out


async def test_wire_cost_does_not_grow_with_the_unit_at_tiny_size() -> None:
    [result] = [r for r in await run_once("wire") if " driver -> scripted" in r.backend]

    assert [row.measurement for row in result.rows if row.passed is False] == []
    assert result.raw["operations"]["get (control)"]["bytes_growth"] > 1.5  # the meter sees O(unit) reads


async def test_concurrent_writers_leave_every_message_stored_once() -> None:
    for result in await run_once("concurrency"):
        assert all(run["units_intact"] for run in result.raw["runs"].values()), result.backend


def test_one_command_prints_the_table_and_writes_the_json(tmp_path: Path) -> None:
    output = tmp_path / "results.json"
    page = tmp_path / "benchmarks.md"
    readme = tmp_path / "README.md"
    readme.write_text("# A readme\n\n<!-- benchmarks:start -->\n<!-- benchmarks:end -->\n\nThe end.\n")

    completed = subprocess.run(
        [
            *(sys.executable, "-m", "benchmarks", "--quick", "--no-server", "--sections", "admin,import"),
            *("--output", str(output), "--markdown", str(page), "--readme", str(readme)),
        ],
        cwd=ROOT,
        env={**os.environ, "MONGODB_URI": "mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=100"},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert completed.returncode == 0, completed.stderr
    assert "Admin find" in completed.stdout and "Import time" in completed.stdout
    # --no-server: no server started, MONGODB_URI ignored, and the output says so
    assert "server: none (--no-server)" in completed.stdout and "SecantusDB" not in completed.stdout
    data = json.loads(output.read_text())
    assert {"machine", "versions", "backends", "sections", "targets", "generated_at"} <= set(data)
    assert data["versions"]["partner-repo"] and data["machine"]["python"]
    assert set(data["sections"]) == {"admin", "import"}
    assert data["scales"] == {"admin": "quick", "import": "quick"} and data["server"].startswith("none")
    assert not [backend for backend in data["backends"] if "SecantusDB" in backend or "MongoDB at" in backend]
    assert "| Section |" in page.read_text() and "ratios" in page.read_text()
    assert "Server: none (--no-server)" in page.read_text()
    # the README gets the headline rows of the page's full table, and a link to the page
    headline = [line for line in readme.read_text().splitlines() if line.startswith("| ")]
    full = [line for line in page.read_text().splitlines() if line.startswith("| ")]
    assert headline[0] == "| Section | Backend | Measurement | Result | Target | |"
    assert 1 < len(headline) < len(full) and set(headline) <= set(full)
    assert "(docs/benchmarks.md)" in readme.read_text() and readme.read_text().endswith("The end.\n")


def test_unknown_section_is_a_usage_error() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--sections", "nope"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert completed.returncode == 2
    assert "unknown sections" in completed.stderr


@pytest.fixture(scope="module")
def scripted_uri() -> Iterator[str]:
    with scripted_server() as uri:
        yield uri


async def test_the_scripted_server_answers_projections_as_mongodb_does(scripted_uri: str) -> None:
    client: Any = driver.new_client(scripted_uri, serverSelectionTimeoutMS=5000)
    try:
        collection = client.bench_check.units
        await collection.insert_one({"_id": "u", "items": list(range(10)), "other": "x"})

        document = await collection.find_one({"_id": "u"}, {"items": {"$slice": -3}})

        assert document == {"_id": "u", "items": [7, 8, 9], "other": "x"}
        with pytest.raises(DuplicateKeyError):
            await collection.insert_one({"_id": "u"})
    finally:
        await driver.close_client(client)


async def test_the_scripted_server_refuses_what_it_cannot_answer_faithfully(scripted_uri: str) -> None:
    client: Any = driver.new_client(scripted_uri, serverSelectionTimeoutMS=5000)
    try:
        collection = client.bench_check.units
        await collection.insert_one({"_id": "p", "items": [1]})

        with pytest.raises(OperationFailure, match="pipeline"):
            await collection.update_one(
                {"_id": "p"}, [{"$set": {"items": {"$concatArrays": ["$items", [2]]}}}]
            )
        with pytest.raises(OperationFailure, match="replica sets"):
            stream = await driver.watch(collection)  # PyMongo async opens it here, Motor on next()
            await stream.next()

        assert await collection.find_one({"_id": "p"}) == {"_id": "p", "items": [1]}
    finally:
        await driver.close_client(client)


def _missing_peer_packages() -> list[str]:
    missing = []
    for module in ("langchain_mongodb", "langgraph.graph", "langgraph.checkpoint.mongodb"):
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    return missing


async def test_peers_measure_every_peer_on_the_same_turns_at_tiny_size() -> None:
    missing = _missing_peer_packages()
    if missing:
        pytest.skip(f"the bench extra is not installed (no {', '.join(missing)}): pip install -e '.[bench]'")
    [result] = [r for r in await run_once("peers") if " driver -> scripted" in r.backend]
    peers = {peer["key"]: peer for peer in result.raw["peers"]}
    stored = [str(point["stored"]) for point in result.raw["points"]]

    assert {key: peer["skipped"] for key, peer in peers.items()} == dict.fromkeys(peers)
    assert list(peers) == ["partner-repo", "langchain-mongodb", "langgraph", "raw-driver"]
    for peer in peers.values():
        assert peer["versions"][next(iter(peer["versions"]))], peer["key"]
        for operation in ("turn", "whole", "last"):
            assert list(peer["operations"][operation]) == stored, (peer["key"], operation)
        # every peer stores the same turns: partner-repo's roll cycle
        assert [peer["operations"]["turn"][s]["turns"] for s in stored] == [
            point["cycle_turns"] for point in result.raw["points"]
        ]
    floor = peers["raw-driver"]["operations"]
    assert {floor[op][s]["round_trips"] for op in ("turn", "whole", "last") for s in stored} == {1}
    assert peers["langgraph"]["ratios"]["turn"][stored[-1]]["bytes"] > 1  # a checkpoint holds the whole state
    table = markdown_tables([result])
    assert table.count("| turn write") == len(stored) and "LangGraph MongoDBSaver" in table


async def test_peers_skip_a_peer_that_is_not_installed_and_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    class Absent(RawDriverPeer):
        key = "absent"
        label = "Absent peer"
        packages = ("no-such-distribution",)

        def __init__(self, stores: Stores) -> None:
            raise ImportError("No module named 'absent'")

    monkeypatch.setattr(peers, "PEERS", (PartnerRepoPeer, Absent, RawDriverPeer))

    [result, *_] = await peers.run(replace(QUICK, peer_sizes=(10,)))

    [skipped] = [row for row in result.rows if "Absent peer" in row.measurement]
    assert "not installed (No module named 'absent')" in skipped.value and "[bench]" in skipped.value
    assert "Skipped Absent peer: not installed" in markdown_tables([result])
    assert [p["key"] for p in result.raw["peers"] if p["operations"]] == ["partner-repo", "raw-driver"]


async def test_recall_on_locomo_scores_recall_and_the_baselines_on_the_same_questions() -> None:
    [result] = await run_once("recall-locomo")
    recall = result.raw["recall"]

    assert list(recall) == [
        "partner-repo recall",
        "recency (last N turns)",
        "BM25, single turns",
        "BM25, 12-turn windows",
    ]
    counts = {method: [recall[method][str(b)]["n"] for b in (20, 60)] for method in recall}
    assert len({tuple(c) for c in counts.values()}) == 1 and counts["partner-repo recall"][0] > 0
    assert all(0.0 <= recall[m][b]["all"] <= 1.0 for m in recall for b in ("20", "60"))
    assert "Maharana et al." in result.raw["citation"] and "ACL 2024" in result.raw["citation"]
    if not files(data_path()):  # the tiny synthetic stand-in ran: say so, judge nothing
        assert "synthetic" in result.raw["source"] and result.raw["judged"] is False


async def test_recall_on_locomo_runs_on_a_synthetic_conversation_without_the_data(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(ENVIRONMENT, str(tmp_path / "absent"))

    [result] = await recall_locomo.run(QUICK)

    assert "synthetic" in result.raw["source"] and not result.raw["judged"]
    assert [row.passed for row in result.rows] == [None] * len(result.rows)
    # the synthetic conversation is shorter than 60 turns: its last 60 hold every evidence turn
    assert result.raw["recall"]["recency (last N turns)"]["60"]["all"] == 1.0
    assert result.raw["recall"]["partner-repo recall"]["20"]["n"] == 4


async def test_without_the_data_a_full_run_misses_the_locomo_targets_and_says_where_it_looked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(ENVIRONMENT, str(tmp_path / "absent"))

    [result] = await recall_locomo.run(replace(QUICK, name="full"))

    assert [row.passed for row in result.rows] == [False, False]
    assert all(str(tmp_path / "absent") in row.value for row in result.rows)


async def test_the_locomo_table_goes_between_its_markers() -> None:
    [result] = await run_once("recall-locomo")
    data = {"generated_at": "2026-01-01T00:00:00", "command": "python -m benchmarks", "scale": "quick"}
    data |= {"duration_seconds": 1.0, "machine": {"cpu": "x", "machine": "x", "cpu_count": 2}}
    data["machine"] |= {"memory_gib": 1, "python": "CPython"}
    table = locomo_table([result], data)
    page = "# Recall\n\n## LoCoMo\n\n<!-- locomo-table:start -->\nold\n<!-- locomo-table:end -->\n\nAfter.\n"

    written = replace_locomo_table(page, table or "")

    assert table is not None and "| **partner-repo recall** | 20 |" in table
    assert "old" not in written and written.endswith("<!-- locomo-table:end -->\n\nAfter.\n")
    assert "LoCoMo (Maharana et al., " in written


async def test_the_locomo_table_has_the_rows_with_the_model_judged_by_their_own_targets() -> None:
    [result] = await run_once("recall-locomo")
    figures = {"all": 0.9, "n": 4} | {
        name: {"mean": 0.5, "n": 1} for name in result.raw["categories"].values()
    }
    modelled = {"model": "a-model", "licence": "MIT", "weights": "PyPI", "judged": True}
    modelled |= {"targets": {"20": 0.84, "60": 0.93}, "category_targets": {"20": {"multi-hop": 0.6}}}
    modelled["recall"] = {"20": figures, "60": figures}
    data = {"generated_at": "2026-01-01T00:00:00", "command": "python -m benchmarks", "scale": "quick"}
    data |= {"duration_seconds": 1.0, "machine": {"cpu": "x", "machine": "x", "cpu_count": 2}}
    data["machine"] |= {"memory_gib": 1, "python": "CPython"}
    modelled_run = replace(result, raw={**result.raw, "with_model": modelled})

    table = locomo_table([modelled_run], data) or ""

    assert "with a-model (MIT; PyPI) given to `RecallIndexer` and `MemoryRecall`" in table
    assert "| **partner-repo recall, a-model** | 20 | " in table
    assert "**0.900** | >= 0.84; multi-hop >= 0.60: FAIL |" in table  # multi-hop 0.5, under its target
    assert "**0.900** | >= 0.93: FAIL |" in table


async def test_recall_scale_indexes_every_write_in_four_calls_whatever_the_history() -> None:
    """The slice and its core, the core's last slices, the bulk, the unit's erasure fence."""
    [result] = await run_once("recall-scale")

    points = result.raw["points"]
    assert [point["slices"] for point in points] == list(QUICK.recall_scale_sizes)
    assert {calls for point in points for calls in point["write_calls"]} == {4}
    assert len({round(sum(point["recall_calls"]) / len(point["recall_calls"]), 1) for point in points}) == 1
    assert all(point["largest"] < 64 * 1024 for point in points)


async def test_in_memory_only_counts_are_reported_outside_the_in_memory_section() -> None:
    """In memory, no row of a section other than the in-memory one (a usability bound) and the import one
    shows a time or a rate: ``--no-server`` measures counts."""
    timed = re.compile(r"\d\s*(ms|s|us/op|/s)\b|slices/s|appends/s|latency")
    for section in SECTIONS:
        if section in ("in-memory", "import"):
            continue
        for result in await run_once(section):
            if not result.backend.startswith("embedded"):
                continue
            shown = [f"{row.measurement} {row.value} {row.target}" for row in result.rows]
            assert [line for line in shown if timed.search(line)] == [], (section, result.backend)


async def test_the_memory_history_leaves_the_index_that_indexing_in_place_leaves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MemoryHistory indexes each slice on a scratch database holding only what an index write reads (the
    core's document and its last WINDOW slices): the index it copies out is the one indexing every slice in
    place leaves. A window of 8 makes 50 slices move slices out as well as nodes."""
    monkeypatch.setattr(recall_store, "WINDOW", 8)
    monkeypatch.setattr(recall_scale, "WINDOW", 8)
    async with memory_database() as scratch, memory_database() as copied, memory_database() as in_place:
        built = recall_scale.MemoryHistory(scratch)
        await built.grow(50)
        await built.copy_into(copied)
        await recall_scale.grow(in_place, RecallIndexer(in_place), recall_scale.History(), 0, 50)

        def index(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
            kept = [{k: v for k, v in document.items() if k != "indexed_at"} for document in documents]
            return sorted(kept, key=lambda document: document["_id"])

        expected = index(await in_place[RECALL_INDEX].find({}).to_list(None))
        assert index(await copied[RECALL_INDEX].find({}).to_list(None)) == expected
        assert await copied[UNITS].count_documents({}) == await in_place[UNITS].count_documents({}) == 1
        assert len(expected) > 50 + 1  # the slices, the core, and nodes that were moved out and back


def test_the_import_report_counts_the_statements_own_top_level_entries() -> None:
    report = import_time.parse(
        "import time: self [us] | cumulative | imported package\n"
        "import time:       100 |        100 | site\n"
        "import time:        50 |         50 |     pymongo.errors\n"
        "import time:       300 |        400 |   pymongo\n"
        "import time:       200 |       1000 | beanie\n"
        "import time:        10 |         10 | partner_repo.cores\n"
    )

    assert report.cost_us({"site"}) == 1010 and report.package_modules() == 1
    assert report.top_level == {"site": 100, "beanie": 1000, "partner_repo.cores": 10}


def test_several_runs_render_as_one_page_each_section_from_the_last_run_that_measured_it() -> None:
    def run(at: str, command: str, sections: dict[str, bool]) -> dict[str, Any]:
        rows = {
            key: [{"measurement": f"{key} row", "value": "1", "target": "", "passed": ok}]
            for key, ok in sections.items()
        }
        return {
            "generated_at": at,
            "duration_seconds": 60,
            "scales": dict.fromkeys(sections, "full"),
            "command": command,
            "sections": {
                key: [{"title": key, "backend": "b", "rows": rows[key], "raw": {}, "notes": []}]
                for key in sections
            },
        }

    data = combined(
        [
            run("2026-12-07T06:00", "first", {"turn": True, "admin": False}),
            run("2026-12-07T08:00", "second", {"admin": True}),
        ]
    )

    assert data["sections"]["admin"][0]["rows"][0]["passed"] is True and set(data["sections"]) == {
        "turn",
        "admin",
    }
    assert data["targets"] == {"met": 2, "missed": []} and data["duration_seconds"] == 120
    assert data["command"] == "2026-12-07 06:00 `first`: turn; 2026-12-07 08:00 `second`: admin"

"""README.md and the docs cannot drift from the code: every Python block runs unless it is marked as a
fragment (and a marked one cannot run on its own), every command line names a real command with real options,
the generated sections (CLI reference in docs/cli.md, settings table in docs/operations.md) are current, and
the README's benchmark table is the headline of docs/benchmarks.md's."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from benchmarks.common import Row, SectionResult
from benchmarks.report import README_END, README_START, headline, table_markdown
from benchmarks.run import SECTIONS
from partner_repo.cli import main
from partner_repo.cli.reference import (
    CLI_SECTION,
    DOCUMENTS,
    EXIT_CODES_SECTION,
    SETTINGS_SECTION,
    cli_reference,
    current_section,
    markers,
    regenerate,
    settings_table,
)
from tests.unit.cli.support import parse_cli

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
CLI_DOC = ROOT / "docs" / "cli.md"
SETTINGS_DOC = ROOT / "docs" / "operations.md"
BENCHMARKS_DOC = ROOT / "docs" / "benchmarks.md"
ALL_DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
MAX_HEADLINE_ROWS = 20
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
FRAGMENT = "<!-- fragment -->"
PYTHON_FENCE = re.compile(rf"^({re.escape(FRAGMENT)}\n)?```python\n(.*?)^```", re.S | re.M)
TOOLS = {"python3", "python", "pip", ".", "partner-repo", "pytest", "docker", "export", "beanie", "mongodump",
         "scripts/test-server",
         "mongorestore", "mongosh", "ruff", "mypy"}  # fmt: skip
RUN_THE_DEMO = "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && partner-repo demo"
RUN_THE_TESTS = "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[dev]' && pytest"


def blocks(path: Path, language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(path.read_text()) if lang == language]


def snippets(paths: list[Path], *, fragments: bool = False) -> list[Any]:
    """The Python blocks of ``paths``: the runnable ones, or with ``fragments`` those marked as fragments.

    A fragment is marked by an HTML comment on the line before its fence, ``<!-- fragment -->``: invisible
    in every renderer, and it leaves the fence's info string (``python``) alone, so every renderer still
    highlights it (some, Python-Markdown among them, no longer recognise a fence whose info string has a
    second word such as ``python fragment``).
    """
    return [
        pytest.param(code, id=f"{path.name}:{number}")
        for path in paths
        for number, (marker, code) in enumerate(PYTHON_FENCE.findall(path.read_text()), 1)
        if bool(marker) == fragments
    ]


def command_lines(paths: list[Path]) -> list[Any]:
    found = []
    for path in paths:
        for body in blocks(path, "bash"):
            for line in body.replace("\\\n", " ").splitlines():
                for command in re.split(r"&&|\|\||;|\|", line.split(" #")[0]):
                    if command.strip():
                        found.append(pytest.param(command.strip(), id=f"{path.name}:{command.strip()[:40]}"))
    return found


# -- the quick start ---------------------------------------------------------------------------------------


def test_the_two_fresh_machine_commands_are_in_the_readme_as_ci_runs_them() -> None:
    readme = README.read_text()
    ci = (ROOT / ".ci" / "run").read_text()

    assert RUN_THE_DEMO in blocks(README, "bash")[0] and RUN_THE_TESTS in blocks(README, "bash")[1]
    assert readme.index(RUN_THE_DEMO) < readme.index("## Concepts")
    # the default stack installs the README's '.[dev]' (the motor stack adds the motor extra), then `pytest`
    assert (
        'pip install -q -e ".[$2]"' in ci and "install pymongo dev" in ci and "install motor dev,motor" in ci
    )
    assert 'unit_suite() { in_stack "$1" pytest; }' in ci and "partner-repo demo" in ci


# -- snippets ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", snippets(ALL_DOCS))
def test_every_python_block_not_marked_as_a_fragment_runs(code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Python block of README.md and docs/*.md runs here, on its own, unless the line before its fence
    is ``<!-- fragment -->``: the README's service, every complete program of docs/ (those that call
    ``asyncio.run``), and the blocks that only define something (a consumer, a lifespan, a history)."""
    monkeypatch.delenv("MONGODB_URI", raising=False)  # snippets run on the in-memory backend
    exec(compile(code, "<snippet>", "exec"), {"__name__": "__snippet__"})
    assert asyncio.get_event_loop_policy() is not None


@pytest.mark.parametrize("code", [s for s in snippets(ALL_DOCS) if "asyncio.run(" in s.values[0]])
def test_every_complete_program_runs_as_a_script_without_a_warning(code: str, tmp_path: Path) -> None:
    """What a reader sees running a complete program of the docs (``python example.py``): Python's own
    warning filters, and those the libraries install, decide what is shown, as they do for the reader."""
    script = tmp_path / "example.py"
    script.write_text(code)
    environment = {k: v for k, v in os.environ.items() if k != "MONGODB_URI" and not k.startswith("PYTHON")}

    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr, result.stderr


@pytest.mark.parametrize("code", snippets(ALL_DOCS, fragments=True))
def test_a_block_marked_as_a_fragment_cannot_run_on_its_own(
    code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The marker cannot hide a runnable block: a fragment awaits outside a function, or names what its page
    made before it (``database``, ``service``), or imports what the library does not need."""
    monkeypatch.delenv("MONGODB_URI", raising=False)
    with pytest.raises((SyntaxError, NameError, ImportError)):
        exec(compile(code, "<fragment>", "exec"), {"__name__": "__snippet__"})


def test_the_readme_has_the_example_of_a_service_and_a_consumer() -> None:
    (example,) = [code for code in blocks(README, "python") if "RollingListener" in code]

    assert "record_and_roll(" in example and "async def consume" in example
    assert len(example.strip().splitlines()) <= 40


@pytest.mark.parametrize("line", command_lines(ALL_DOCS))
def test_every_command_line_names_a_real_command(line: str) -> None:
    words = shlex.split(line)
    while re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):  # VARIABLE=value before the command
        words = words[1:]
    assert words[0] in TOOLS, f"unknown tool in {line!r}"
    if words[0] == "partner-repo":
        parse_cli(words[1:])
    if words[0] == "scripts/test-server":
        assert os.access(ROOT / words[0], os.X_OK), f"{words[0]} is not an executable file"
    if words[0] in ("python", "python3") and words[1] == "-m" and words[2] != "venv":
        assert importlib.util.find_spec(words[2]) is not None, line
    if words[:2] == ["docker", "compose"]:
        compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
        profiles = {p for service in compose["services"].values() for p in service.get("profiles", [])}
        for position, word in enumerate(words):
            if word == "--profile":
                assert words[position + 1] in profiles, line
        if "logs" in words:
            assert words[-1] in compose["services"], line


def test_parse_cli_refuses_an_unknown_option() -> None:
    with pytest.raises(click.UsageError):
        parse_cli(["migrate", "--sideways"])


# -- generated sections ------------------------------------------------------------------------------------


def test_the_cli_reference_is_the_clis_current_help() -> None:
    """Stale: run ``python -m partner_repo.cli.reference`` and commit docs/cli.md."""
    assert current_section(CLI_DOC.read_text(), CLI_SECTION) == cli_reference()


def test_the_cli_reference_covers_every_command() -> None:
    reference = current_section(CLI_DOC.read_text(), CLI_SECTION)

    for name in main.list_commands(click.Context(main)):
        assert f"#### `partner-repo {name}`" in reference, name


def test_the_settings_table_lists_every_setting_with_its_default() -> None:
    """Stale: run ``python -m partner_repo.cli.reference`` and commit docs/operations.md."""
    assert current_section(SETTINGS_DOC.read_text(), SETTINGS_SECTION) == settings_table()


def test_each_generated_section_lives_in_one_document_and_the_readme_links_it() -> None:
    assert {ROOT / path: sections for path, sections in DOCUMENTS.items()} == {
        CLI_DOC: (EXIT_CODES_SECTION, CLI_SECTION),
        SETTINGS_DOC: (SETTINGS_SECTION,),
    }
    for section in (CLI_SECTION, EXIT_CODES_SECTION, SETTINGS_SECTION):
        assert markers(section)[0] not in README.read_text(), section
    assert "(docs/cli.md)" in README.read_text() and "(docs/operations.md#settings)" in README.read_text()


@pytest.mark.parametrize("path", sorted(DOCUMENTS), ids=str)
def test_regenerating_an_up_to_date_document_changes_nothing(path: Path) -> None:
    text = (ROOT / path).read_text()

    assert regenerate(text, DOCUMENTS[path]) == text
    assert regenerate(text) == text  # the sections it holds are exactly the ones it must hold


def test_the_reference_script_checks_the_generated_documents_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from partner_repo.cli.reference import run

    monkeypatch.chdir(ROOT)

    assert run(["--check"]) == 0


def test_the_reference_script_refuses_a_document_without_markers(tmp_path: Path) -> None:
    from partner_repo.cli.reference import run

    document = tmp_path / "OTHER.md"
    document.write_text("# nothing generated here\n")

    with pytest.raises(ValueError, match="cli-reference"):
        run([str(document)])


# -- structure ---------------------------------------------------------------------------------------------


def test_the_concepts_have_diagrams_of_the_model_and_of_the_rolling_and_listener_flow() -> None:
    diagrams = blocks(README, "mermaid")

    model = next(d for d in diagrams if d.lstrip().startswith("classDiagram"))
    flow = next(d for d in diagrams if d.lstrip().startswith("sequenceDiagram"))
    assert all(name in model for name in ("MemoryCore", "MemoryUnit", "MemorySlice"))
    assert all(name in flow for name in ("RollingService", "RollingListener", "AfterRolling"))


def test_the_readme_covers_what_a_team_asks_before_adopting_it() -> None:
    headings = re.findall(r"^##+ (.+)$", README.read_text(), re.M)

    for heading in ("Quick start", "Concepts", "CLI reference", "Operations", "Running it", "Migrations",
                    "Settings", "Sharding", "Backups", "Benchmarks"):  # fmt: skip
        assert any(h.startswith(heading) for h in headings), heading


def test_the_benchmark_table_has_its_place() -> None:
    text = README.read_text()

    assert text.index("<!-- benchmarks:start") < text.index("<!-- benchmarks:end -->")


def full_benchmark_table() -> tuple[str, list[SectionResult]]:
    """The run's summary line and every row of docs/benchmarks.md's table, read back as section results."""
    latest = BENCHMARKS_DOC.read_text().split("## Latest run", 1)[1]
    summary = next(line for line in latest.splitlines() if line.startswith("Measured "))
    rows = latest.split("\n\n| Section |", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    results: list[SectionResult] = []
    for line in rows:
        cells = [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        title, backend, measurement, value, target, verdict = cells
        if not results or (results[-1].title, results[-1].backend) != (title, backend):
            key = list(SECTIONS)[int(title.split(".", 1)[0])]  # sections are numbered in run order
            results.append(SectionResult(key=key, title=title, backend=backend))
        results[-1].rows.append(Row(measurement, value, target, None if not verdict else verdict == "PASS"))
    assert table_markdown(results).splitlines()[2:] == rows  # read back exactly
    return summary, results


def test_the_readme_benchmark_table_is_the_headline_of_the_full_one() -> None:
    summary, results = full_benchmark_table()
    excerpt = README.read_text().split(README_START, 1)[1].split(README_END, 1)[0]
    table = "\n".join(line for line in excerpt.splitlines() if line.startswith("|"))

    assert excerpt.strip().splitlines()[0] == summary  # the same run
    assert table == table_markdown(headline(results))
    assert 0 < len(table.splitlines()) - 2 <= MAX_HEADLINE_ROWS < sum(len(r.rows) for r in results)
    assert "(docs/benchmarks.md)" in excerpt


@pytest.mark.parametrize("path", [*ALL_DOCS, ROOT / "CHANGELOG.md"], ids=lambda p: p.name)
def test_every_relative_link_points_at_a_file_that_exists(path: Path) -> None:
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", path.read_text()):
        assert (path.parent / target).exists(), f"{path.name} links to missing {target}"


def test_every_doc_page_is_linked_from_the_readme() -> None:
    readme = README.read_text()

    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in readme, page.name


def test_the_sharding_page_decides_for_every_collection_the_library_writes() -> None:
    from partner_repo.mongo import ALL_INDEXES

    table = (ROOT / "docs" / "sharding.md").read_text().split("## Shard key per collection", 1)[1]
    rows = [line for line in table.splitlines() if line.startswith("| `")]

    for collection in ALL_INDEXES:
        assert any(row.startswith(f"| `{collection}`") for row in rows), collection


def test_pytest_sums_up_skipped_tests_by_reason_as_the_readme_says() -> None:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]

    (report,) = [option for option in shlex.split(options["addopts"]) if option.startswith("-r")]
    assert "s" not in report and "f" in report  # no line per skipped test; failures still listed
    assert "skipped (their reasons summed up at the end)" in README.read_text()

"""The command line's modules form layers: the root group (``app``) imports the subcommands, the subcommands
import the shared plumbing, and nothing imports back up."""

from __future__ import annotations

import ast
from pathlib import Path

import partner_repo.cli

CLI = Path(partner_repo.cli.__file__).parent
ENTRY_POINTS = {"__init__", "__main__", "reference"}
"""What may import ``app``: the package (for ``partner_repo.cli:run``) and the reference generator."""


def cli_imports() -> dict[str, set[str]]:
    """For each module of ``partner_repo.cli``, the other modules of it that it imports (anywhere in it),
    named without the leading underscore of a private module (``_runtime`` is ``runtime``)."""
    graph: dict[str, set[str]] = {}
    for file in CLI.glob("*.py"):
        imported: set[str] = set()
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module.startswith("partner_repo.cli."):
                    imported.add(node.module.removeprefix("partner_repo.cli.").lstrip("_"))
                elif node.module == "partner_repo.cli":
                    imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.Import):
                imported |= {
                    alias.name.removeprefix("partner_repo.cli.").lstrip("_")
                    for alias in node.names
                    if alias.name.startswith("partner_repo.cli.")
                }
        names = {f.stem if f.stem.startswith("__") else f.stem.lstrip("_") for f in CLI.glob("*.py")}
        graph[file.stem if file.stem.startswith("__") else file.stem.lstrip("_")] = imported & names
    return graph


def test_no_subcommand_imports_the_root_group() -> None:
    importers = {module for module, imported in cli_imports().items() if "app" in imported}

    assert importers <= ENTRY_POINTS


def test_the_cli_modules_import_each_other_without_a_cycle() -> None:
    graph = cli_imports()
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, " -> ".join((*path, module))
        if module in done:
            return
        for imported in sorted(graph.get(module, set())):
            visit(imported, (*path, module))
        done.add(module)

    for module in sorted(graph):
        visit(module, ())


def test_the_shared_plumbing_imports_no_command() -> None:
    graph = cli_imports()

    assert graph["runtime"] <= {"output", "logs"}  # plumbing too: its failure line is JSON in a JSON log

"""The package's public surface: every public name importable from ``partner_repo``; the console script."""

from __future__ import annotations

import ast
import inspect
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from click.testing import CliRunner

import partner_repo
from partner_repo.cli import main

FOUNDATION_NAMES = {
    "ConflictError",
    "ConnectionFailed",
    "DEFAULT_CORE_ID",
    "DuplicateSliceId",
    "InvalidInput",
    "MAX_DOCUMENT_BYTES",
    "MemoryCore",
    "MemoryCoreRepository",
    "MemorySlice",
    "MemoryUnit",
    "MemoryUnitRepository",
    "Message",
    "MongoDatabase",
    "NotFound",
    "PartnerRepoError",
    "Role",
    "UnitHead",
    "UnitTooLarge",
    "__version__",
    "connect",
    "in_memory_database",
    "init_repository",
    "mask_uri",
    "new_slice_id",
    "normalize_unit",
    "to_utc_ms",
    "utc_now",
}


def _isort_key(name: str) -> tuple[int, str]:
    """Constants, then classes, then everything else; alphabetical within each group (ruff's RUF022 order)."""
    if name.isupper() and len(name) > 1:
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def test_all_is_explicit_sorted_and_without_duplicates() -> None:
    names = partner_repo.__all__
    assert names == sorted(names, key=_isort_key)
    assert len(set(names)) == len(names)


def test_every_name_in_all_is_importable_from_the_package() -> None:
    for name in partner_repo.__all__:
        assert hasattr(partner_repo, name), name


def test_the_foundation_api_is_exported() -> None:
    assert set(partner_repo.__all__) >= FOUNDATION_NAMES


def test_every_repository_takes_the_database_first() -> None:
    for cls in (partner_repo.MemoryUnitRepository, partner_repo.MemoryCoreRepository):
        parameters = list(inspect.signature(cls).parameters)
        assert parameters[0] == "database", cls


def test_every_library_error_derives_from_partner_repo_error() -> None:
    for name in (
        "ConflictError",
        "ConnectionFailed",
        "DuplicateSliceId",
        "InvalidInput",
        "NotFound",
        "UnitTooLarge",
    ):
        assert issubclass(getattr(partner_repo, name), partner_repo.PartnerRepoError), name


def test_cli_reports_its_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"partner-repo, version {partner_repo.__version__}"


def test_cli_help_lists_usage_and_options() -> None:
    result = CliRunner().invoke(main, ["--help"], prog_name="partner-repo")
    assert result.exit_code == 0
    assert result.output.startswith("Usage: partner-repo [OPTIONS] COMMAND [ARGS]...")
    assert "--uri" in result.output and "--version" in result.output


def test_the_console_script_is_installed_as_partner_repo() -> None:
    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "partner-repo"]
    assert script.value == "partner_repo.cli:run"


def test_the_front_loads_each_name_from_the_package_the_type_checker_reads_it_from() -> None:
    """The names are loaded on first use (PEP 562) from ``_EXPORTS``; a type checker reads them from the
    imports under ``TYPE_CHECKING``: both say the same, and say all of ``__all__``."""
    tree = ast.parse(Path(partner_repo.__file__).read_text(encoding="utf-8"))
    checked = {
        (node.module, alias.name)
        for block in tree.body
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    exports = {(module, name) for module, names in partner_repo._EXPORTS.items() for name in names}

    assert checked == exports
    assert {name for _, name in exports} | {"__version__"} == set(partner_repo.__all__)


def test_a_name_the_front_does_not_export_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'RollingServices'"):
        _ = partner_repo.RollingServices  # type: ignore[attr-defined]

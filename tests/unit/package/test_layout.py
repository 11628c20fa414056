"""The tree is the architecture: one package per concept behind its front module, every package shipped, the
ground at the root, every room named by the import contract, and the fronts' 0.4 names still exported.

Module length is a review signal (docs/architecture.md), not a test: a module is split when it holds a second
concept, never squeezed under a number.
"""

from __future__ import annotations

import ast
import importlib
import tomllib
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "partner_repo"
FRONT_NAMES_OF_0_4 = Path(__file__).with_name("front_names_0_4.txt")
"""Every name the front modules of partner-repo 0.4 exported, as ``front:name`` (read off the 0.4 tree)."""


def test_no_family_of_root_modules_is_spelled_as_a_name_prefix() -> None:
    """``core_lease`` beside ``core_state`` (or beside ``cores``) is a package in disguise."""
    stems = sorted(path.stem for path in PACKAGE.glob("*.py") if not path.stem.startswith("_"))
    heads = Counter(stem.split("_")[0].removesuffix("s") for stem in stems)
    families = {head: count for head, count in heads.items() if count > 1}
    assert families == {}


def test_every_package_of_the_tree_is_shipped() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = set(project["tool"]["setuptools"]["packages"])
    on_disk = {".".join(init.parent.relative_to(ROOT).parts) for init in PACKAGE.rglob("__init__.py")} | {
        "partner_repo.migrations"
    }
    assert shipped == on_disk


def _packages() -> list[str]:
    return [".".join(init.parent.relative_to(ROOT).parts) for init in PACKAGE.rglob("__init__.py")]


def _private_owner(module: str, packages: list[str]) -> str | None:
    """The package whose private module ``module`` is (``partner_repo.units._append``:
    ``partner_repo.units``)."""
    package, _, name = module.rpartition(".")
    return package if name.startswith("_") and not name.startswith("__") and package in packages else None


def test_no_package_imports_another_packages_private_modules() -> None:
    """A private module (``_name``) is reached through its package's front module by every other package;
    only its own package (and the packages inside it) import it directly."""
    packages = _packages()
    crossings = []
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        here = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                owner = _private_owner(node.module, packages)
                if owner is not None and here != owner and not here.startswith(owner + "."):
                    crossings.append(f"{module} imports {node.module}")
    assert crossings == []


def _front_names_of_0_4() -> list[tuple[str, str]]:
    lines = FRONT_NAMES_OF_0_4.read_text(encoding="utf-8").split()
    return [(module, name) for module, _, name in (line.partition(":") for line in lines)]


@pytest.mark.parametrize("front", sorted({front for front, _ in _front_names_of_0_4()}))
def test_every_name_a_front_exported_in_0_4_is_still_exported_there(front: str) -> None:
    """The public API is what the fronts export (``__all__``); 0.4's module paths behind them are not kept
    (0.x, never released: the CHANGELOG's table lists where each went)."""
    exported = set(importlib.import_module(front).__all__)

    assert [name for owner, name in _front_names_of_0_4() if owner == front and name not in exported] == []


def test_loggers_keep_their_0_4_names() -> None:
    """Operators filter logs by logger name: a module renamed private names its logger as 0.4 did
    (``logging.getLogger("partner_repo.rolling.service")``), a new private module by what it serves
    (``"partner_repo.mcp"``), never by ``__name__`` (``..._service``, a name that moves with the code)."""
    private = [
        str(path.relative_to(ROOT))
        for path in PACKAGE.rglob("_*.py")
        if not path.name.startswith("__") and "getLogger(__name__)" in path.read_text(encoding="utf-8")
    ]
    assert private == []


def _layers() -> list[str]:
    """The rooms the first import contract orders, top to bottom (``a | b`` is two rooms)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    layers = project["tool"]["importlinter"]["contracts"][0]["layers"]
    return [room.strip() for layer in layers for room in layer.split("|")]


def _rooms() -> set[str]:
    """The packages and modules directly under ``partner_repo`` (its front and ``__main__`` aside)."""
    return {
        f"partner_repo.{path.stem if path.is_file() else path.name}"
        for path in PACKAGE.iterdir()
        if (path.suffix == ".py" and not path.stem.startswith("__")) or (path / "__init__.py").exists()
    }


def test_every_room_of_the_tree_is_named_by_the_import_contract() -> None:
    assert sorted(_rooms()) == sorted(_layers())


def test_the_root_holds_at_most_twelve_modules_of_shared_ground() -> None:
    modules = sorted(path.stem for path in PACKAGE.glob("*.py") if not path.stem.startswith("__"))

    assert len(modules) <= 12, modules

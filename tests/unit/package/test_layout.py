"""The tree is the architecture: one package per concept behind its front module, every package shipped, and
every import path of 0.4 still working.

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
PUBLIC_NAMES_OF_0_4 = Path(__file__).with_name("public_names_0_4.txt")
"""Every public name each module of partner-repo 0.4 defined, as ``module:name`` (read off the 0.4 tree)."""


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


def _names_of_0_4() -> list[tuple[str, str]]:
    lines = PUBLIC_NAMES_OF_0_4.read_text(encoding="utf-8").split()
    return [(module, name) for module, _, name in (line.partition(":") for line in lines)]


REMOVED_IN_0_5 = {
    ("partner_repo.indexes", "RECALL_SLICES"),
    ("partner_repo.indexes", "RECALL_SLICE_INDEXES"),
    ("partner_repo.indexes", "RECALL_VOCABULARY"),
    ("partner_repo.indexes", "RECALL_VOCABULARY_INDEXES"),
    ("partner_repo.recall.store", "PENDING"),
    ("partner_repo.recall.store", "TERM"),
    ("partner_repo.recall.store", "vocabulary_id"),
    ("partner_repo.driver", "Update"),
    ("partner_repo.driver", "update_each"),
}
"""Names whose concept 0.5 removed, each named in the CHANGELOG: 0.4's recall collections and the vocabulary's
write protocol (issue 31 replaced them with ``recall_index``, and its migration moves the data), and the
driver's per-update helper that served only them (``driver.bulk_write`` instead)."""


@pytest.mark.parametrize(
    "module", sorted({module for module, _ in _names_of_0_4()}), ids=lambda module: str(module)
)
def test_every_public_name_of_0_4_is_importable_from_where_it_was(module: str) -> None:
    names = [
        name for owner, name in _names_of_0_4() if owner == module and (owner, name) not in REMOVED_IN_0_5
    ]

    imported = importlib.import_module(module)

    assert [name for name in names if not hasattr(imported, name)] == []


def test_an_old_path_is_the_module_that_holds_its_names_now() -> None:
    """``partner_repo.database`` is ``partner_repo.mongo._database`` itself, not a copy: patching one patches
    the other, and the module keeps its own spec."""
    old = importlib.import_module("partner_repo.database")
    new = importlib.import_module("partner_repo.mongo._database")

    assert old is new
    assert new.__spec__ is not None and new.__spec__.name == "partner_repo.mongo._database"


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

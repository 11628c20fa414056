"""The tree is the architecture: one package per concept, small modules, every package shipped."""

from __future__ import annotations

import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "partner_repo"
MAX_LINES = 400


def test_no_module_is_longer_than_the_limit() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


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

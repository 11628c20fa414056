"""The package as pip installs it: the migrations ship inside it, from their one copy in the top-level
``migrations/``, and are found from any working directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MIGRATION_NAMES = sorted(p.name for p in (ROOT / "migrations").glob("[!_]*.py"))
SOURCES = ("pyproject.toml", "README.md", "partner_repo", "migrations")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the sources (building in place would leave build/ in the checkout)."""
    work = tmp_path_factory.mktemp("build")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, work / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, work / name)
    out = work / "dist"
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", str(work), "--wheel-dir", str(out)]
    subprocess.run(pip, check=True, capture_output=True, timeout=300)
    (built,) = out.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel (and its dependencies) installed; returns its bin directory."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "pip"), "install", "--quiet", str(wheel)]
    subprocess.run(pip, check=True, capture_output=True, timeout=300)
    return venv / "bin"


@pytest.mark.packaging
def test_the_installed_cli_finds_the_migrations_from_any_directory(installed: Path, tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "MONGODB_URI" and not k.startswith("PYTHON")}

    result = subprocess.run(
        [str(installed / "partner-repo"), "--in-memory", "migrate", "--status"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    assert "site-packages/partner_repo/migrations" in result.stdout
    assert [line.split()[-1] for line in result.stdout.splitlines() if "pending" in line] == MIGRATION_NAMES


@pytest.mark.packaging
def test_the_wheel_holds_each_migration_once_inside_the_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()

    assert sorted(n.rsplit("/", 1)[1] for n in names if "/migrations/" in n) == MIGRATION_NAMES
    assert all(n.startswith(("partner_repo/", "partner_repo-")) for n in names)


def test_the_migrations_have_one_copy_in_the_source_tree() -> None:
    assert MIGRATION_NAMES and not (ROOT / "partner_repo" / "migrations").exists()


def test_pyproject_lists_every_package_of_the_source_tree() -> None:
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    found = {
        ".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "partner_repo").rglob("__init__.py")
    }

    assert set(listed) == found | {"partner_repo.migrations"}

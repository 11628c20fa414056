"""The version has one source, pyproject.toml, read back from the package metadata (``__version__``,
``partner-repo --version``), and it agrees with the CHANGELOG's newest heading: ``## X (unreleased)`` is a
development build of X (``X.devN``), ``## X`` is X itself."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

from click.testing import CliRunner
from packaging.version import Version

import partner_repo
from partner_repo.cli import main

ROOT = Path(__file__).resolve().parents[3]
HEADING = re.compile(r"^## (?P<version>\S+)(?P<unreleased> \(unreleased\))?", re.M)


def pyproject_version() -> Version:
    return Version(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def newest_changelog_heading() -> tuple[Version, bool]:
    """The version of the CHANGELOG's first ``## `` heading and whether it is marked unreleased."""
    found = HEADING.search((ROOT / "CHANGELOG.md").read_text())
    assert found is not None, "the CHANGELOG has no '## X' heading"
    return Version(found["version"]), found["unreleased"] is not None


def test_pyproject_s_version_is_the_changelog_s_newest_heading() -> None:
    heading, unreleased = newest_changelog_heading()
    declared = pyproject_version()

    assert declared.base_version == heading.base_version, (declared, heading)
    assert declared.is_devrelease == unreleased, (
        f"pyproject says {declared}: an unreleased heading wants {heading}.dev0, a released one {heading}"
    )


def test_the_package_reports_the_version_pyproject_declares() -> None:
    """A stale install (pyproject changed since ``pip install -e .``) fails here: reinstall."""
    assert Version(version("partner-repo")) == pyproject_version()
    assert partner_repo.__version__ == version("partner-repo")


def test_partner_repo_version_prints_the_package_s_version() -> None:
    result = CliRunner().invoke(main, ["--version"])

    assert result.exit_code == 0
    assert result.output == f"partner-repo, version {version('partner-repo')}\n"

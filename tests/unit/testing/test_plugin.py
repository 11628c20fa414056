"""What partner-repo ships for testing a service that uses it: the pytest plugin (loaded on its own, through
the ``pytest11`` entry point) with the ``partner_repo_database`` fixture, and the test server runnable from
the installed package (``python -m partner_repo.testing.server``), which ``scripts/test-server`` runs."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import partner_repo.testing.plugin as plugin

ROOT = Path(__file__).resolve().parents[3]
SECTION = "## Testing a service that uses partner-repo"


def readme_example() -> str:
    """The Python block of the documented section on testing a service (docs/testing.md; the README points
    there)."""
    section = (ROOT / "docs" / "testing.md").read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
    return code


@pytest.mark.parametrize("mode", ["auto", "strict"])
def test_an_app_uses_the_readme_example_with_the_plugin_loaded_on_its_own(
    pytester: pytest.Pytester, mode: str
) -> None:
    pytester.makeini(f"[pytest]\nasyncio_mode = {mode}\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_app=readme_example())

    result = pytester.runpytest("-p", "no:cacheprovider")

    result.assert_outcomes(passed=2)


def readme_configuration() -> str:
    """The ``toml`` block of the documented section on testing a service: the pytest configuration it
    wants."""
    section = (ROOT / "docs" / "testing.md").read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    (configuration,) = re.findall(r"^```toml\n(.*?)^```", section, re.S | re.M)
    return configuration


def test_the_readme_example_as_the_readme_configures_it_passes_without_a_warning(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyprojecttoml(readme_configuration())
    pytester.makepyfile(test_app=readme_example())

    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")  # as the application runs it

    result.assert_outcomes(passed=2, warnings=0)
    assert "Warning" not in result.stdout.str() + result.stderr.str()


def test_each_test_gets_a_database_of_its_own_closed_after_it(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        test_app="""
        from partner_repo import MemoryCoreRepository
        seen = []

        async def test_one(partner_repo_database):
            seen.append(partner_repo_database)
            await MemoryCoreRepository(partner_repo_database).get_or_create("alice")

        async def test_two(partner_repo_database):
            assert partner_repo_database.name != seen[0].name
            assert await MemoryCoreRepository(partner_repo_database).get("alice") is None
        """
    )

    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_the_plugin_defines_only_fixtures_named_partner_repo() -> None:
    tree = ast.parse(Path(plugin.__file__).read_text())
    public = [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_")
    ]

    assert public == ["partner_repo_database"]


def test_scripts_test_server_runs_the_packaged_server_module_with_a_bare_python() -> None:
    """``python -S``: no site-packages, so nothing but the standard library can be imported."""
    result = subprocess.run(
        [sys.executable, "-S", str(ROOT / "scripts" / "test-server"), "--help"],
        capture_output=True,
        text=True,
        check=True,
    )

    assert result.stdout.startswith("usage: scripts/test-server")
    script = (ROOT / "scripts" / "test-server").read_text()
    assert "partner_repo" in script and "def install" not in script and "secantusdb" not in script


def test_the_server_module_is_runnable_from_the_installed_package() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "partner_repo.testing.server", "--help"], capture_output=True, text=True
    )

    assert result.returncode == 0 and "python -m partner_repo.testing.server" in result.stdout


def test_the_server_runs_the_integration_suite_with_the_pytest_of_its_own_python() -> None:
    from partner_repo.testing.server import DEFAULT_COMMAND

    assert DEFAULT_COMMAND[:3] == [sys.executable, "-m", "pytest"] and "integration" in DEFAULT_COMMAND

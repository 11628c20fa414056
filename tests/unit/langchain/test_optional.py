"""langchain-core is optional: the library and its CLI never import it, and partner_repo.langchain says which
extra to install when it is missing (issue 20)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
WITHOUT_LANGCHAIN = "import sys\nsys.modules['langchain_core'] = None  # as if it were not installed\n"


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_LANGCHAIN + code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_library_and_its_cli_import_without_langchain_core() -> None:
    result = run("import partner_repo, partner_repo.cli._app  # an import of langchain_core would raise")

    assert result.returncode == 0, result.stderr


def test_the_langchain_package_names_the_extra_when_langchain_core_is_missing() -> None:
    result = run("import partner_repo.langchain")

    assert result.returncode == 1
    assert "pip install 'partner-repo[langchain]'" in result.stderr

"""Importing the library changes nothing in the process and loads only its front: the application owns its
logging, its import system and its warnings, and pays for the parts of the library it uses, when it uses them.

Each test runs in a fresh interpreter, since this one has imported everything long ago."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

STATE = textwrap.dedent(
    """
    import json, logging, sys, warnings

    def state():
        return {
            "record factory": repr(logging.getLogRecordFactory()),
            "meta path": [repr(finder) for finder in sys.meta_path],
            "path hooks": [repr(hook) for hook in sys.path_hooks],
            "root handlers": [repr(handler) for handler in logging.getLogger().handlers],
            "root level": logging.getLogger().level,
            "warnings filters": [repr(entry) for entry in warnings.filters],
            "logger class": repr(logging.getLoggerClass()),
        }

    before = state()
    {statement}
    after = state()
    loaded = sorted(name for name in sys.modules if name.split(".")[0] == "partner_repo")
    print(json.dumps({"before": before, "after": after, "loaded": loaded}))
    """
)


def imported(statement: str) -> dict[str, Any]:
    """What ``statement`` changed and loaded, run in a fresh interpreter."""
    script = STATE.replace("{statement}", statement)
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


def test_importing_the_package_leaves_logging_the_import_system_and_warnings_as_they_were() -> None:
    result = imported("import partner_repo")

    assert result["after"] == result["before"]


def test_importing_the_package_loads_its_front_and_nothing_of_the_cli_mcp_or_langchain() -> None:
    loaded = imported("import partner_repo")["loaded"]

    print(f"import partner_repo loads {len(loaded)} partner_repo module(s): {loaded}")
    assert loaded == ["partner_repo"]


def test_using_the_everyday_api_loads_no_cli_mcp_langchain_or_test_helper_and_changes_nothing() -> None:
    result = imported(
        "from partner_repo import MemoryCoreRepository, MemoryRecall, RollingListener, RollingService,"
        " connect"
    )

    print(f"the everyday API loads {len(result['loaded'])} partner_repo modules")
    assert result["after"] == result["before"]
    assert [
        name
        for name in result["loaded"]
        if name.startswith(
            ("partner_repo.cli", "partner_repo.mcp", "partner_repo.langchain", "partner_repo.testing")
        )
    ] == []


def test_the_version_is_read_when_asked() -> None:
    result = imported("import partner_repo; print(partner_repo.__version__, file=sys.stderr)")

    assert result["loaded"] == ["partner_repo"]

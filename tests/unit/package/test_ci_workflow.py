"""The GitHub Actions workflow cannot run here, so its wiring is checked as data: every job exists, runs what
it claims, and the integration job really points the ``integration`` tests at a MongoDB replica set."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    loaded: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text())
    return loaded


def scripts(job: dict[str, Any]) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_it_runs_on_pushes_and_pull_requests(workflow: dict[str, Any]) -> None:
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "push" in triggers and "pull_request" in triggers


def test_lint_types_and_unit_jobs_run_the_project_checks(workflow: dict[str, Any]) -> None:
    jobs = workflow["jobs"]

    assert "ruff check ." in scripts(jobs["lint"])
    assert "mypy --strict partner_repo" in scripts(jobs["types"])
    assert 'pytest -q -m "not integration"' in scripts(jobs["unit"])
    assert "3.11" in jobs["unit"]["strategy"]["matrix"]["python"]


def test_every_job_installs_the_package_as_the_readme_does(workflow: dict[str, Any]) -> None:
    for name in ("lint", "types", "unit", "integration"):
        assert "pip install -e '.[dev]'" in scripts(workflow["jobs"][name]), name


def test_types_unit_and_integration_run_once_per_driver_stack(workflow: dict[str, Any]) -> None:
    for name in ("types", "unit", "integration"):
        job = workflow["jobs"][name]
        assert job["strategy"]["matrix"]["stack"] == ["pymongo", "motor"], name
        assert "pip install -e '.[dev,motor]'" in scripts(job), name


def test_integration_runs_against_mongodb_7_and_8(workflow: dict[str, Any]) -> None:
    job = workflow["jobs"]["integration"]

    assert job["strategy"]["matrix"]["mongodb"] == ["7.0", "8.0"]
    assert job["strategy"]["fail-fast"] is False


def test_each_mongodb_is_a_single_node_replica_set_that_is_initiated_before_the_tests(
    workflow: dict[str, Any],
) -> None:
    steps = workflow["jobs"]["integration"]["steps"]
    start = next(i for i, step in enumerate(steps) if "docker run" in step.get("run", ""))
    tests = next(i for i, step in enumerate(steps) if "pytest -m integration" in step.get("run", ""))
    script = steps[start]["run"]

    assert start < tests
    assert '"mongo:${{ matrix.mongodb }}"' in script and "--replSet rs0" in script
    assert "rs.initiate(" in script and "isWritablePrimary" in script


def test_the_integration_tests_get_the_uri_and_fail_rather_than_skip(workflow: dict[str, Any]) -> None:
    job = workflow["jobs"]["integration"]
    uri = job["env"]["MONGODB_URI"]
    script = scripts(job)

    assert uri.startswith("mongodb://127.0.0.1:27017/") and "directConnection=true" in uri
    assert "pytest -m integration" in script and "skipped" in script and "exit 1" in script
    assert "partner-repo --db ci_migrations migrate" in script


def test_the_integration_marker_and_variable_are_the_ones_the_tests_use() -> None:
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    conftest = (ROOT / "tests" / "conftest.py").read_text()

    assert any(marker.startswith("integration:") for marker in markers)
    assert 'os.environ.get("MONGODB_URI")' in conftest and "pytest.mark.integration" in conftest


def test_the_image_job_builds_the_dockerfile_and_checks_the_compose_profiles(
    workflow: dict[str, Any],
) -> None:
    script = scripts(workflow["jobs"]["image"])

    assert "docker build" in script and "docker compose --profile services config" in script


def test_the_sharded_job_shards_before_migrate_and_runs_the_suite_and_the_routing_checks(
    workflow: dict[str, Any],
) -> None:
    """The real-cluster check of docs/sharding.md: its recipe, in its order, then the checks."""
    steps = [step.get("run", "") for step in workflow["jobs"]["sharded"]["steps"]]
    order = [
        "scripts/sharded-cluster up",
        "scripts/sharded-cluster shard partner",
        "partner-repo --db partner migrate",
        "scripts/sharded-checks explain partner",
        "scripts/sharded-checks move-chunk partner",
        "pytest -m integration",
    ]

    positions = [next(i for i, run in enumerate(steps) if command in run) for command in order]
    assert positions == sorted(positions)
    job = workflow["jobs"]["sharded"]
    suite = next(step for step in job["steps"] if "pytest -m integration" in step.get("run", ""))
    assert suite["env"]["PARTNER_REPO_TEST_SHARDED"] == "1"
    assert workflow["jobs"]["sharded"]["env"]["MONGODB_URI"].startswith("mongodb://127.0.0.1:27017")


def test_the_sharded_jobs_scripts_parse(tmp_path: Path) -> None:
    import py_compile
    import subprocess

    subprocess.run(["bash", "-n", str(ROOT / "scripts" / "sharded-cluster")], check=True)
    py_compile.compile(str(ROOT / "scripts" / "sharded-checks"), cfile=str(tmp_path / "c.pyc"), doraise=True)

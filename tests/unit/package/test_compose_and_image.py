"""docker-compose.yml and the Dockerfile cannot run here, so they are checked as data: MongoDB stays the
default service, the long-running processes sit under the ``services`` profile and run real CLI commands."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.cli.support import parse_cli

ROOT = Path(__file__).resolve().parents[3]
PROCESSES = ("migrate", "listener", "roller")


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    compose: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return dict(compose["services"])


def test_mongodb_is_the_default_service_and_a_single_node_replica_set(services: dict[str, Any]) -> None:
    mongo = services["mongo"]

    assert "profiles" not in mongo
    assert mongo["command"][:3] == ["mongod", "--replSet", "rs0"]
    assert "rs.initiate(" in " ".join(mongo["healthcheck"]["test"])


@pytest.mark.parametrize("name", PROCESSES)
def test_each_process_is_under_the_services_profile_and_built_from_the_dockerfile(
    services: dict[str, Any], name: str
) -> None:
    service = services[name]

    assert service["profiles"] == ["services"]
    assert service["build"] == "."
    assert service["depends_on"]["mongo"]["condition"] == "service_healthy"


@pytest.mark.parametrize("name", PROCESSES)
def test_each_process_reaches_mongodb_by_its_service_name_directly(
    services: dict[str, Any], name: str
) -> None:
    assert services[name]["environment"]["MONGODB_URI"] == "mongodb://mongo:27017/?directConnection=true"


@pytest.mark.parametrize("name", PROCESSES)
def test_each_process_runs_a_real_command_with_real_options(services: dict[str, Any], name: str) -> None:
    parse_cli(list(services[name]["command"]))


def test_the_listener_and_the_roller_start_after_the_migrations_and_leave_indexes_to_them(
    services: dict[str, Any],
) -> None:
    assert services["migrate"]["command"] == ["migrate"] and services["migrate"]["restart"] == "no"
    for name in ("listener", "roller"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert services[name]["environment"]["PARTNER_REPO_CREATE_INDEXES"] == "false"
    assert services["listener"]["command"][0] == "listen" and services["roller"]["command"] == ["roll-idle"]


def test_the_listeners_example_consumer_exists_and_is_a_consumer(services: dict[str, Any]) -> None:
    command = services["listener"]["command"]
    module_name, _, attribute = command[command.index("--consumer") + 1].partition(":")

    consumer = getattr(importlib.import_module(module_name), attribute)

    assert isinstance(consumer.name, str) and callable(consumer.consume)


def test_the_dockerfile_installs_the_package_with_its_migrations_and_runs_the_cli() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()

    copied = re.findall(r"^COPY (.+) \S+$", dockerfile, re.M)
    for sources in copied:
        for source in sources.split():
            assert (ROOT / source).exists(), source
    assert any("migrations" in c for c in copied) and 'RUN pip install ".[metrics]"' in dockerfile
    assert 'ENTRYPOINT ["partner-repo"]' in dockerfile
    assert re.search(r"^USER (?!root)\w+", dockerfile, re.M)


def test_the_compose_listener_serves_its_metrics_on_loopback() -> None:
    listener = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["listener"]

    port = listener["command"][listener["command"].index("--metrics-port") + 1]
    assert listener["ports"] == [f"127.0.0.1:{port}:{port}"]


def test_the_build_context_leaves_out_what_the_image_does_not_need() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()

    assert {".git", ".venv", "tests"} <= set(ignored)

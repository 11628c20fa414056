"""The rules the console and the MCP server share (partner_repo.serving): loopback by default, a token for
anything other machines reach, and the Host and Origin headers a server answers."""

from __future__ import annotations

import pytest

from partner_repo.console import http_problem
from partner_repo.serving import HeaderRules


def test_a_loopback_console_needs_no_token() -> None:
    assert http_problem("127.0.0.1", None) is None and http_problem("::1", None) is None


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.7", "console.example.com"])
def test_a_console_beyond_loopback_refuses_to_start_without_a_token(host: str) -> None:
    problem = http_problem(host, None)

    assert problem is not None and "PARTNER_REPO_CONSOLE_TOKEN" in problem


def test_a_loopback_console_a_proxy_names_for_other_machines_needs_a_token() -> None:
    problem = http_problem("127.0.0.1", None, ["https://console.example.com"])

    assert problem is not None and "console.example.com" in problem
    assert http_problem("127.0.0.1", None, ["localhost:8080"]) is None


def test_a_weak_token_is_refused_without_being_quoted() -> None:
    problem = http_problem("0.0.0.0", "short")

    assert problem is not None and "at least 16" in problem and "short" not in problem.split("(")[0][-8:]


def test_a_loopback_server_answers_loopback_host_names_on_any_port_and_nothing_else() -> None:
    rules = HeaderRules.for_host("127.0.0.1")

    assert rules.host_allowed("127.0.0.1:8080") and rules.host_allowed("localhost:3000")
    assert rules.host_allowed("[::1]:8080") and rules.host_allowed("127.0.0.1")
    assert not rules.host_allowed("attacker.example:8080") and not rules.host_allowed(None)


def test_a_server_on_another_loopback_address_answers_that_address_too() -> None:
    assert HeaderRules.for_host("127.0.0.5").host_allowed("127.0.0.5:9000")


def test_beyond_loopback_any_host_is_answered_unless_names_are_given() -> None:
    assert HeaderRules.for_host("0.0.0.0").host_allowed("anything.example")
    named = HeaderRules.for_host("0.0.0.0", hosts=["console.example.com"])
    assert named.host_allowed("console.example.com") and named.host_allowed("console.example.com:443")
    assert not named.host_allowed("other.example")


def test_an_origin_is_answered_when_it_is_the_servers_own_or_a_named_one() -> None:
    rules = HeaderRules.for_host("0.0.0.0", origins=["https://console.example.com"])

    assert rules.origin_allowed(None, "x") and rules.origin_allowed("https://x:8080", "x:8080")
    assert rules.origin_allowed("https://console.example.com", "127.0.0.1:8080")
    assert not rules.origin_allowed("https://attacker.example", "x:8080")
    assert not rules.origin_allowed("null", "x:8080")

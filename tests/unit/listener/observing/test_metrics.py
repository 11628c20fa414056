"""What a listener reports to its observer, the counts ListenerMetrics keeps of it, and the Prometheus
endpoint that serves them (scraped over HTTP here; skipped, saying why, without the ``metrics`` extra)."""

from __future__ import annotations

import asyncio
import logging
import sys
import urllib.request
from typing import Any

import pytest

from partner_repo import InvalidInput, MemoryUnitRepository
from partner_repo.listener import _listener as listener_module
from partner_repo.listener.observing import (
    ListenerMetrics,
    ListenerObserver,
    MetricsUnavailable,
    serve_metrics,
)
from tests.conftest import until
from tests.unit.listener.support import Recorder, append, quick_listener, registry_of


@pytest.fixture(autouse=True)
def quick_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listener_module, "SAMPLE_INTERVAL", 0.01)


class Events(ListenerObserver):
    """Remembers every event by name."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def lease_changed(self, group: str, active: bool) -> None:
        self.seen.append(("lease", group, active))

    def attempt_failed(self, group: str, consumer: str, slice_id: str, attempt: int, retrying: bool) -> None:
        self.seen.append(("failed", consumer, attempt, retrying))

    def delivery_finished(self, group: str, consumer: str, slice_id: str, outcome: Any) -> None:
        self.seen.append(("finished", consumer, outcome))


async def test_the_observer_hears_attempts_outcomes_and_the_lease(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    bad = await append(units, "u1")
    await append(units, "u2")
    events = Events()
    failing = Recorder("failing", fail_slices={bad.id or ""})

    async with quick_listener(memory_db, registry_of(failing), observer=events, max_attempts=2) as listener:
        await listener.flush()

    assert events.seen[0] == ("lease", "default", True) and events.seen[-1] == ("lease", "default", False)
    assert sorted(e for e in events.seen if e[0] != "lease") == [
        ("failed", "failing", 1, True),
        ("failed", "failing", 2, False),
        ("finished", "failing", "dead_lettered"),
        ("finished", "failing", "delivered"),
    ]


async def test_metrics_count_deliveries_failures_retries_and_dead_letters_per_consumer(
    memory_db: Any,
) -> None:
    units = MemoryUnitRepository(memory_db)
    pieces = [await append(units, f"u{n}") for n in range(3)]
    metrics = ListenerMetrics()
    failing, fine = Recorder("failing", fail_slices={pieces[0].id or ""}), Recorder("fine")

    async with quick_listener(
        memory_db, registry_of(failing, fine), group="g", observer=metrics, max_attempts=3
    ) as listener:
        await listener.flush()

    figures = metrics.snapshot().consumers
    assert (figures["g", "failing"].deliveries, figures["g", "failing"].dead_letters) == (2, 1)
    assert (figures["g", "failing"].failures, figures["g", "failing"].retries) == (3, 2)
    assert (figures["g", "fine"].deliveries, figures["g", "fine"].failures) == (3, 0)
    assert figures["g", "fine"].in_flight == 0


async def test_metrics_gauge_what_is_in_flight_pending_and_how_far_behind(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    for n in range(3):
        await append(units, f"u{n}")
    metrics = ListenerMetrics()
    held = Recorder("held", gate=asyncio.Event())

    async with quick_listener(memory_db, registry_of(held), observer=metrics, concurrency=2):
        await until(lambda: metrics.snapshot().consumers.get(("default", "held"), None) is not None)
        await until(lambda: metrics.snapshot().consumers["default", "held"].pending == 3)
        figures = metrics.snapshot().consumers["default", "held"]
        assert metrics.snapshot().lease_active == {"default": True}
        assert held.gate is not None
        held.gate.set()

    assert figures.in_flight == 2
    assert figures.lag_seconds > 3600  # the slices were created at T0, long ago
    assert metrics.snapshot().lease_active == {"default": False}


async def test_an_observer_that_raises_is_logged_once_and_delivery_goes_on(
    memory_db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(ListenerObserver):
        def delivery_finished(self, group: str, consumer: str, slice_id: str, outcome: Any) -> None:
            raise RuntimeError("observer bug")

    units = MemoryUnitRepository(memory_db)
    pieces = [await append(units, "u1") for _ in range(3)]
    recorder = Recorder()

    async with quick_listener(memory_db, registry_of(recorder), observer=Broken()) as listener:
        await listener.flush()

    assert recorder.slice_ids == [p.id for p in pieces]
    assert caplog.text.count("failed in delivery_finished; ignored") == 1


def test_an_observer_must_be_a_listener_observer(memory_db: Any) -> None:
    with pytest.raises(InvalidInput, match="ListenerObserver"):
        quick_listener(memory_db, registry_of(Recorder()), observer=print)


# -- the Prometheus endpoint --------------------------------------------------------------------------------


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``/metrics`` parsed: (sample name, sorted labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_the_prometheus_endpoint_serves_the_listener_metrics(memory_db: Any) -> None:
    pytest.importorskip("prometheus_client", reason="the metrics extra (prometheus_client) is not installed")
    units = MemoryUnitRepository(memory_db)
    bad = await append(units, "u1")
    await append(units, "u2")
    metrics = ListenerMetrics()
    server = serve_metrics(metrics, 0, host="127.0.0.1")
    failing = Recorder("indexer", fail_slices={bad.id or ""})
    try:
        async with quick_listener(
            memory_db, registry_of(failing), group="search", observer=metrics, max_attempts=2
        ) as listener:
            await listener.flush()
            await until(lambda: metrics.snapshot().consumers["search", "indexer"].pending == 0)
            during = await asyncio.to_thread(scrape, server.port)
        after = await asyncio.to_thread(scrape, server.port)
    finally:
        server.close()

    labels = (("consumer", "indexer"), ("group", "search"))
    assert during["partner_repo_listener_deliveries_total", labels] == 1
    assert during["partner_repo_listener_failures_total", labels] == 2
    assert during["partner_repo_listener_retries_total", labels] == 1
    assert during["partner_repo_listener_dead_letters_total", labels] == 1
    assert during["partner_repo_listener_in_flight", labels] == 0
    assert during["partner_repo_listener_pending_slices", labels] == 0
    assert during["partner_repo_listener_lag_seconds", labels] == 0
    assert during["partner_repo_listener_lease_active", (("group", "search"),)] == 1
    assert after["partner_repo_listener_lease_active", (("group", "search"),)] == 0
    assert any(name == "process_cpu_seconds_total" for name, _ in during) or sys.platform != "linux"


def test_serving_metrics_without_the_extra_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import fails as if not installed

    with pytest.raises(MetricsUnavailable, match=r"pip install 'partner-repo\[metrics\]'"):
        serve_metrics(ListenerMetrics(), 0)


def test_a_port_already_taken_is_a_clear_error(caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("prometheus_client", reason="the metrics extra (prometheus_client) is not installed")
    caplog.set_level(logging.CRITICAL)
    first = serve_metrics(ListenerMetrics(), 0, host="127.0.0.1")
    try:
        with pytest.raises(Exception, match=f"cannot serve metrics on 127.0.0.1:{first.port}"):
            serve_metrics(ListenerMetrics(), first.port, host="127.0.0.1")
    finally:
        first.close()

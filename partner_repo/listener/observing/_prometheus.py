"""A Prometheus endpoint for listener metrics: ``partner-repo listen --metrics-port P`` serves ``/metrics``.

Needs the ``metrics`` extra (``pip install 'partner-repo[metrics]'``, i.e. ``prometheus_client``), imported
only when an endpoint is served: without it :func:`serve_metrics` raises :class:`MetricsUnavailable` saying
so, and nothing else of the listener needs it. Every family is rendered at scrape time from a
:class:`~partner_repo.listener.observing._metrics.ListenerMetrics` snapshot (labels ``group`` and
``consumer``):

- ``partner_repo_listener_deliveries_total``, ``_failures_total`` (failed attempts), ``_retries_total``,
  ``_dead_letters_total``, ``_skipped_total`` (slices gone before delivery): counters;
- ``partner_repo_listener_in_flight`` (slices being consumed now), ``_pending_slices`` (found, not yet
  finished), ``_lag_seconds`` (age of the oldest pending slice, 0 when none): gauges;
- ``partner_repo_listener_lease_active{group}``: 1 while this process holds the group and delivers, 0 while
  it stands by.

The endpoint's registry also has the client's usual process, platform and garbage-collector collectors.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from threading import Thread
from typing import Any

from partner_repo.errors import PartnerRepoError
from partner_repo.listener.observing._metrics import ConsumerMetrics, ListenerMetrics

PREFIX = "partner_repo_listener"

_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("deliveries", "deliveries", "Slices the consumer finished successfully."),
    ("failures", "failures", "Failed attempts to deliver a slice to the consumer (retried or not)."),
    ("retries", "retries", "Attempts retried after a failure."),
    ("dead_letters", "dead_letters", "Slices the consumer failed every attempt at (a dead letter written)."),
    ("skipped", "skipped", "Slices gone (unit deleted or rewritten) before they could be delivered."),
)
_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("in_flight", "in_flight", "Slices being handed to the consumer right now (at most its concurrency)."),
    ("pending_slices", "pending", "Slices found and not yet finished by the consumer."),
    ("lag_seconds", "lag_seconds", "Age of the oldest slice the consumer has pending (0 when none is)."),
)


class MetricsUnavailable(PartnerRepoError, ImportError):
    """The ``metrics`` extra (prometheus_client) is not installed."""


def _client() -> Any:
    try:
        import prometheus_client
        import prometheus_client.core
    except ImportError as exc:
        raise MetricsUnavailable(
            "metrics need prometheus_client: pip install 'partner-repo[metrics]'"
        ) from exc
    return prometheus_client


class ListenerCollector:
    """A Prometheus collector rendering a :class:`ListenerMetrics` snapshot at each scrape."""

    def __init__(self, metrics: ListenerMetrics) -> None:
        self._metrics = metrics
        self._families = _client().core

    def describe(self) -> list[Any]:
        return []  # families are only known at collect time (groups and consumers come and go)

    def collect(self) -> Iterator[Any]:
        core = self._families
        snapshot = self._metrics.snapshot()
        labels = ["group", "consumer"]
        for name, attribute, text in _COUNTERS:
            family = core.CounterMetricFamily(f"{PREFIX}_{name}", text, labels=labels)
            for (group, consumer), figures in sorted(snapshot.consumers.items()):
                family.add_metric([group, consumer], _value(figures, attribute))
            yield family
        for name, attribute, text in _GAUGES:
            family = core.GaugeMetricFamily(f"{PREFIX}_{name}", text, labels=labels)
            for (group, consumer), figures in sorted(snapshot.consumers.items()):
                family.add_metric([group, consumer], _value(figures, attribute))
            yield family
        lease = core.GaugeMetricFamily(
            f"{PREFIX}_lease_active",
            "1 while this process holds the group's lease and delivers, 0 while it stands by.",
            labels=["group"],
        )
        for group, active in sorted(snapshot.lease_active.items()):
            lease.add_metric([group], 1.0 if active else 0.0)
        yield lease


@dataclass
class MetricsServer:
    """A running ``/metrics`` endpoint (a thread of its own); :meth:`close` stops it."""

    port: int
    _server: Any
    _thread: Thread

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def require_prometheus() -> None:
    """:class:`MetricsUnavailable` unless the ``metrics`` extra is installed (checked before starting)."""
    _client()


def serve_metrics(metrics: ListenerMetrics, port: int, host: str = "0.0.0.0") -> MetricsServer:
    """Serve ``metrics`` at ``http://host:port/metrics`` (``port=0``: a free port, see ``.port``)."""
    client = _client()
    registry = client.CollectorRegistry()
    registry.register(ListenerCollector(metrics))
    client.ProcessCollector(registry=registry)
    client.PlatformCollector(registry=registry)
    client.GCCollector(registry=registry)
    try:
        server, thread = client.start_http_server(port, addr=host, registry=registry)
    except OSError as exc:  # the port is taken, the address is not ours
        raise PartnerRepoError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from None
    return MetricsServer(port=int(server.server_port), _server=server, _thread=thread)


def _value(figures: ConsumerMetrics, attribute: str) -> float:
    return float(getattr(figures, attribute))


__all__ = [
    "ListenerCollector",
    "MetricsServer",
    "MetricsUnavailable",
    "require_prometheus",
    "serve_metrics",
]

"""Observing a running listener: what it reports, counted, and served to Prometheus.

- ``_observer``: :class:`ListenerObserver`, the hooks a listener calls as things happen, and the guard that
  keeps a failing observer from stopping deliveries;
- ``_metrics``: :class:`ListenerMetrics`, the counters and gauges in plain Python;
- ``_prometheus``: :func:`serve_metrics` (the ``metrics`` extra; nothing imports ``prometheus_client`` until
  it is called).
"""

from partner_repo.listener.observing._metrics import ListenerMetrics
from partner_repo.listener.observing._observer import (
    SAMPLE_INTERVAL,
    GuardedObserver,
    ListenerObserver,
    Outcome,
)
from partner_repo.listener.observing._prometheus import MetricsUnavailable, require_prometheus, serve_metrics

__all__ = [
    "GuardedObserver",
    "ListenerMetrics",
    "ListenerObserver",
    "MetricsUnavailable",
    "Outcome",
    "SAMPLE_INTERVAL",
    "require_prometheus",
    "serve_metrics",
]

"""``partner_repo.listener.observing``: what a listener reports; metrics, Prometheus."""

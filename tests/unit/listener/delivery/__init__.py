"""``partner_repo.listener.delivery``: the registry, attempts, backoff, lanes, erasures."""

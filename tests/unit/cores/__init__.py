"""``partner_repo.cores``: the ``memory_cores`` repository, the chat window, retention, the lease."""

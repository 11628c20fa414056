"""``partner_repo.listener``: the listener as a whole; a folder per part (stream, delivery, ...)."""

"""``partner_repo.erasure``: forgetting a core, its units before a date, or its window; tombstones."""

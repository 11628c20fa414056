"""``partner_repo.units``: the ``memory_units`` repository, fenced appends, heads, claims, the feed."""

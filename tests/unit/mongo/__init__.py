"""``partner_repo.mongo``: the driver adapter, connection, database lifecycle, indexes and masking."""

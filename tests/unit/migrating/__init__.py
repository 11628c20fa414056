"""``partner_repo.migrating``: the runner that applies the migrations."""

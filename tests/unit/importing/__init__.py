"""``partner_repo.importing``: importing Partner's on-disk state."""

"""``partner_repo.recall``: terms, cues, the indexer, the store, scoring and the recall service."""

"""``partner_repo.rolling``: the rolling service, triggers, summarizing, background rolls, resummarize."""

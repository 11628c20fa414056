"""``partner_repo.admin``: slice queries, pages and their cursors, stats, check and repair."""

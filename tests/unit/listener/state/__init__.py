"""``partner_repo.listener.state``: the group's lease, dead letters, the status."""

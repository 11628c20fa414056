"""``partner_repo.listener.stream``: change events, polling, units no repository wrote."""

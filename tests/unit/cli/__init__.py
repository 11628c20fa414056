"""``partner_repo.cli``: every command through click's test runner, its output, logs and exit codes."""

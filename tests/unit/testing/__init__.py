"""``partner_repo.testing``: the pytest plugin and the test server shipped for applications' tests."""

"""The unit layer, on the in-memory backend: one folder per package of ``partner_repo`` (docs/testing.md)."""

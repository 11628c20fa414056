"""The shipped migrations (``migrations/``, installed as ``partner_repo.migrations``): one file each."""

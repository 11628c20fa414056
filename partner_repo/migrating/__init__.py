"""Running the schema migrations (the scripts in the top-level ``migrations/``, shipped as
``partner_repo.migrations``): the runner (``_runner``), which also says how a failed one is to be finished.
"""

from partner_repo.migrating._runner import (
    MigrationRun,
    MigrationStatus,
    default_migrations_path,
    migration_status,
    run_migrations,
)

__all__ = ["MigrationRun", "MigrationStatus", "default_migrations_path", "migration_status", "run_migrations"]

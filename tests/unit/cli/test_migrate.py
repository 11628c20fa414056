"""``partner-repo migrate``: status, forward (without a transaction unless asked), backward, and the way out
when transactions are unavailable."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from partner_repo.cli import main
from tests.unit.migrations.support import INDEXES, NORMALIZE, SHIPPED

IN_MEMORY = {"MONGODB_URI": "", "PARTNER_REPO_DB": ""}


def migrate(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["--in-memory", "migrate", *args], env=IN_MEMORY)
    return result.exit_code, result.output


def test_status_lists_each_migration_as_pending_on_a_new_database() -> None:
    code, output = migrate("--status")

    assert code == 0
    assert f"pending  {NORMALIZE.name}" in output and f"pending  {INDEXES.name}" in output
    assert "current: (none applied)" in output


def test_by_default_every_migration_is_applied_without_a_transaction_and_named() -> None:
    code, output = migrate()

    assert code == 0
    assert all(f"applied  {m.name}" in output for m in SHIPPED)
    assert f"current: {SHIPPED[-1].name}" in output


def test_no_transaction_is_still_accepted_and_is_the_default() -> None:
    quietly = ["--log-level", "WARNING", "--in-memory", "migrate"]
    explicit = CliRunner().invoke(main, [*quietly, "--no-transaction"], env=IN_MEMORY)
    default = CliRunner().invoke(main, quietly, env=IN_MEMORY)

    assert (explicit.exit_code, explicit.output) == (default.exit_code, default.output)


def test_a_distance_limits_how_many_run() -> None:
    code, output = migrate("--distance", "1")

    assert code == 0
    assert NORMALIZE.name in output and INDEXES.name not in output.split("current:")[0]


def test_backward_on_a_new_database_has_nothing_to_revert() -> None:
    code, output = migrate("--backward")

    assert code == 0
    assert "nothing to run" in output


def test_asking_for_transactions_where_there_are_none_explains_and_says_to_run_without() -> None:
    code, output = migrate("--transaction")

    assert code == 1
    assert "has no transactions" in output and "run without --transaction" in output
    assert "Traceback" not in output


def test_a_negative_distance_is_a_usage_error() -> None:
    code, output = migrate("--distance", "-1")

    assert code == 2
    assert "--distance" in output


def test_a_missing_migrations_directory_is_one_clear_line_and_a_usage_error(tmp_path: Path) -> None:
    code, output = migrate("--path", str(tmp_path / "nowhere"))

    assert code == 2  # a bad option value, as import-state's DIRECTORY that is not one
    assert output == f"error: --path: no migrations directory at {tmp_path / 'nowhere'}\n"

"""The ``partner-repo`` command line. Each command group lives in its own module and registers on ``main``."""

from __future__ import annotations

from partner_repo.cli._app import main, run

__all__ = ["main", "run"]

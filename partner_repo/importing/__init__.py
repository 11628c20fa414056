"""Importing Partner's state: its on-disk format (``_state_format``) and the resumable importer
(``_importer``).

The front door is :func:`import_partner_state`.
"""

from partner_repo.importing._importer import ImportReport, import_partner_state
from partner_repo.importing._state_format import ImportIssue, partner_unit, state_directory_problem

__all__ = ["ImportIssue", "ImportReport", "import_partner_state", "partner_unit", "state_directory_problem"]

"""Importing Partner's state: its on-disk format (``state_format``) and the resumable importer (``importer``).

The front door is :func:`import_partner_state`.
"""

from partner_repo.importing.importer import ImportReport, import_partner_state
from partner_repo.importing.state_format import ImportIssue, partner_unit

__all__ = ["ImportIssue", "ImportReport", "import_partner_state", "partner_unit"]

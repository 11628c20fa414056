"""The units a listener skips because they cannot be read as units, each logged once per state.

Another tool's document (an ``ObjectId`` id, a slice that is not one) must not stop the listener: walks skip
it and go on. It is logged at WARNING when first met, and again only when it changes (another fingerprint)
or fails for another reason, not at every polling pass; a repaired unit is delivered like any other.
"""

from __future__ import annotations

from partner_repo.errors import UnreadableUnit
from partner_repo.mongo import library_logger
from partner_repo.units import UnitFingerprint

logger = library_logger("partner_repo.listener")

UnitKey = str | tuple[str, str]
"""A hashable key for any stored ``_id``: the id itself when it is a string (as units have), else its type
and ``repr`` (an ``ObjectId``, a number, even an embedded document)."""


def unit_key(unit_id: object) -> UnitKey:
    return unit_id if isinstance(unit_id, str) else (type(unit_id).__name__, repr(unit_id))


class UnreadableUnits:
    """What one listener knows about the unreadable units it met: fingerprint and reason, by unit key."""

    def __init__(self, group: str) -> None:
        self._group = group
        self._units: dict[UnitKey, tuple[UnitFingerprint | None, str]] = {}

    def skip(self, error: UnreadableUnit, fingerprint: UnitFingerprint | None = None) -> None:
        """Record that the unit was skipped (at ``fingerprint``, when the walk knows it); log it if new."""
        key = unit_key(error.unit_id)
        known = self._units.get(key)
        if fingerprint is None and known is not None:
            fingerprint = known[0]  # a change event carries no fingerprint: the unit is as last seen
        self._units[key] = (fingerprint, error.reason)
        if known == (fingerprint, error.reason):
            logger.debug(
                "listener group %r: unit %r is still unreadable; skipped", self._group, error.unit_id
            )
            return
        logger.warning(
            "listener group %r: skipping unit %r, which cannot be read as a memory unit (%s); the others are "
            "delivered as usual, and this one once it is repaired (fix or delete the document by hand)",
            self._group,
            error.unit_id,
            error.reason,
        )

    def fingerprint(self, key: UnitKey) -> UnitFingerprint | None:
        """The fingerprint at which the unit was found unreadable (None when unknown or not unreadable)."""
        known = self._units.get(key)
        return None if known is None else known[0]

    def __contains__(self, key: object) -> bool:
        return key in self._units

    def readable(self, key: UnitKey) -> None:
        """The unit was read after all (repaired, or deleted): forget it."""
        self._units.pop(key, None)

    def known(self) -> list[UnitKey]:
        """The units known to be unreadable (a copy)."""
        return list(self._units)

    def fingerprints(self) -> list[UnitFingerprint]:
        """The known fingerprints (for the polling probe's totals)."""
        return [fingerprint for fingerprint, _ in self._units.values() if fingerprint is not None]


__all__: list[str] = []  # internal to the listener: nothing here is public API

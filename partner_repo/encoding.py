"""Storable text: BSON strings are UTF-8, so a string that cannot be encoded is refused before any write.

Its own module because both the model's validators and the boundary checks in ``validation`` need it, and the
model sits below ``validation``.
"""

from __future__ import annotations

from partner_repo.errors import InvalidInput


def require_encodable(text: str, what: str) -> str:
    """``text`` if it can be stored (BSON strings are UTF-8), else :class:`InvalidInput`.

    Python strings may hold lone surrogates (half of an emoji's UTF-16 pair, as ``json.loads`` yields from
    ``"\\ud83d"``); the driver cannot encode them, so they are refused here, before anything is written.
    """
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInput(
                f"{what} is not valid Unicode text: a lone surrogate at position {exc.start}"
            ) from None
    return text

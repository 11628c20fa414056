"""Which messages of a snapshot are new to the unit: Partner's ``resolveChatIncrement``, as a pure function.

The window keeps some already-rolled messages as context, so a snapshot usually starts with messages the
unit already ends with. The increment is what follows the longest such overlap.
"""

from __future__ import annotations

from collections.abc import Sequence

from partner_repo.models import Message


def resolve_chat_increment(stored_tail: Sequence[Message], snapshot: Sequence[Message]) -> list[Message]:
    """``snapshot[k:]`` for the largest ``k`` with ``stored_tail[-k:] == snapshot[:k]``; all of it when none.

    ``stored_tail`` only needs the unit's last ``len(snapshot)`` messages: no longer overlap is possible.
    """
    for k in range(min(len(stored_tail), len(snapshot)), 0, -1):
        if list(stored_tail[-k:]) == list(snapshot[:k]):
            return list(snapshot[k:])
    return list(snapshot)


__all__ = ["resolve_chat_increment"]

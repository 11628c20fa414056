"""MemoryCore: per agent, the current memory session and the live chat window.

The front door is :class:`MemoryCoreRepository` (``_repository``); beside it the helpers it owns: the window's
arithmetic (``_window``), the state a turn answers with (``_state``), the rolling lease (``_lease``), the trim
a roll ends with (``_trim``) and the erasure's hold on a core (``_hold``).
"""

from partner_repo.cores._hold import CoreHold
from partner_repo.cores._lease import CoreLease
from partner_repo.cores._repository import DEFAULT_CORE_ID, MemoryCoreRepository, new_session_id
from partner_repo.cores._state import WindowState
from partner_repo.cores._trim import RollFinish
from partner_repo.cores._window import dropped_count, roll_chat_messages

__all__ = [
    "CoreHold",
    "CoreLease",
    "DEFAULT_CORE_ID",
    "MemoryCoreRepository",
    "RollFinish",
    "WindowState",
    "dropped_count",
    "new_session_id",
    "roll_chat_messages",
]

"""MemoryCore: per agent, the current memory session and the live chat window.

The front door is :class:`MemoryCoreRepository` (``repository``); beside it the helpers it owns: the window's
arithmetic (``window``), the state a turn answers with (``state``), the rolling lease (``lease``), the trim a
roll ends with (``trim``) and the erasure's hold on a core (``hold``).
"""

from partner_repo.cores.repository import DEFAULT_CORE_ID, MemoryCoreRepository
from partner_repo.cores.state import WindowState
from partner_repo.cores.window import roll_chat_messages

__all__ = ["DEFAULT_CORE_ID", "MemoryCoreRepository", "WindowState", "roll_chat_messages"]

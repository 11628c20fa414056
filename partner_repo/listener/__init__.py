"""AfterRolling dispatch: the consumer registry and the listener that delivers every roll to it."""

from partner_repo.listener.checkpoints import GroupCheckpoint, ListenerCheckpoints, UnitProgress
from partner_repo.listener.dead_letters import (
    DeadLetter,
    DeadLetterRepository,
    ReplayReport,
    replay_dead_letters,
)
from partner_repo.listener.examples import LoggingConsumer, PrintConsumer
from partner_repo.listener.listener import RollingListener
from partner_repo.listener.loading import load_consumer
from partner_repo.listener.metrics import ListenerMetrics
from partner_repo.listener.observer import ListenerObserver
from partner_repo.listener.progress import ListenerLag
from partner_repo.listener.registry import AfterRolling, AfterRollingRegistry
from partner_repo.listener.retry import Backoff
from partner_repo.listener.status import ConsumerStatus, GroupStatus, listener_status

__all__ = [
    "AfterRolling",
    "AfterRollingRegistry",
    "Backoff",
    "ConsumerStatus",
    "DeadLetter",
    "DeadLetterRepository",
    "GroupCheckpoint",
    "GroupStatus",
    "ListenerCheckpoints",
    "ListenerLag",
    "ListenerMetrics",
    "ListenerObserver",
    "LoggingConsumer",
    "PrintConsumer",
    "ReplayReport",
    "RollingListener",
    "UnitProgress",
    "listener_status",
    "load_consumer",
    "replay_dead_letters",
]

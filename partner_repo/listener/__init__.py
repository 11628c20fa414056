"""AfterRolling dispatch: the consumer registry and the listener that delivers every roll to it."""

from partner_repo.listener._listener import DEFAULT_POLL_INTERVAL, RollingListener
from partner_repo.listener.delivery import (
    AfterRolling,
    AfterRollingRegistry,
    Backoff,
    ReplayReport,
    load_consumer,
    replay_dead_letters,
)
from partner_repo.listener.examples import LoggingConsumer, PrintConsumer
from partner_repo.listener.observing import ListenerMetrics, ListenerObserver
from partner_repo.listener.state import (
    ConsumerStatus,
    DeadLetter,
    DeadLetterRepository,
    ErasureLog,
    GroupCheckpoint,
    GroupStatus,
    ListenerCheckpoints,
    ListenerLag,
    UnitProgress,
    listener_status,
)

__all__ = [
    "AfterRolling",
    "AfterRollingRegistry",
    "Backoff",
    "ConsumerStatus",
    "DEFAULT_POLL_INTERVAL",
    "DeadLetter",
    "DeadLetterRepository",
    "ErasureLog",
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

"""Delivering: handing each slice (and each erasure) to every consumer, in order, at least once.

- ``_registry``: :class:`AfterRolling`, the consumer protocol, and :class:`AfterRollingRegistry` (how each
  consumer is called: a plain ``def`` in a worker thread), and consumers named by import path;
- ``_pipeline``: :class:`DeliveryPipeline`, which drops what the checkpoints say is delivered and feeds each
  consumer's lanes (its deliveries, in slice order per unit, several units at once), and runs the checkpoint
  steps in offer order, never ahead of an undelivered slice;
- ``_results``: a stored slice turned back into the :class:`~partner_repo.events.RollingResult` of its roll;
- ``_attempts``: a delivery's attempts with ``_retry``'s :class:`Backoff`, the dead letter after the last;
- ``_erasures``: the erasure log handed to consumers with ``on_erased``; ``_replay``: dead letters delivered
  again.
"""

from partner_repo.listener.delivery._erasures import ErasureDelivery
from partner_repo.listener.delivery._pipeline import DeliveryPipeline
from partner_repo.listener.delivery._registry import (
    AfterRolling,
    AfterRollingRegistry,
    load_consumer,
    registry_from_paths,
)
from partner_repo.listener.delivery._replay import ReplayReport, replay_dead_letters
from partner_repo.listener.delivery._retry import Backoff

__all__ = [
    "AfterRolling",
    "AfterRollingRegistry",
    "Backoff",
    "DeliveryPipeline",
    "ErasureDelivery",
    "ReplayReport",
    "load_consumer",
    "registry_from_paths",
    "replay_dead_letters",
]

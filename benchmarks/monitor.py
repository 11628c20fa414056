"""Counting what crosses the wire, with pymongo's command monitoring.

A :class:`WireMeter` is registered on the client (``event_listeners=[meter]``); between ``start()`` and
``stop()`` it records every command the driver sends: its name, the BSON size of the command document and
of the server's reply (a failed command's error document counts as its reply). Handshakes and heartbeats
are not commands and are not counted.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import bson
from pymongo import monitoring


@dataclass
class WireCost:
    """What one operation cost on the wire."""

    commands: list[str] = field(default_factory=list)
    request_bytes: int = 0
    reply_bytes: int = 0
    failed: list[str] = field(default_factory=list)

    @property
    def command_count(self) -> int:
        return len(self.commands)

    @property
    def total_bytes(self) -> int:
        return self.request_bytes + self.reply_bytes

    def as_dict(self) -> dict[str, Any]:
        return {
            "commands": list(self.commands),
            "command_count": self.command_count,
            "request_bytes": self.request_bytes,
            "reply_bytes": self.reply_bytes,
            "total_bytes": self.total_bytes,
            "failed": list(self.failed),
        }


class WireMeter(monitoring.CommandListener):
    """Records commands and their request/reply BSON sizes while recording is on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._recording = False
        self._cost = WireCost()

    def start(self) -> None:
        with self._lock:
            self._recording = True
            self._cost = WireCost()

    def stop(self) -> WireCost:
        with self._lock:
            self._recording = False
            return self._cost

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        with self._lock:
            if self._recording:
                self._cost.commands.append(event.command_name)
                self._cost.request_bytes += len(bson.encode(event.command))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        with self._lock:
            if self._recording:
                self._cost.reply_bytes += len(bson.encode(event.reply))

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        with self._lock:
            if self._recording:
                self._cost.failed.append(f"{event.command_name}: {event.failure.get('errmsg', '')}")
                self._cost.reply_bytes += len(bson.encode(event.failure))

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

ENVELOPE = frozenset(
    {
        "$clusterTime",
        "operationTime",
        "lsid",
        "txnNumber",
        "$db",
        "$readPreference",
        "readConcern",
        "writeConcern",
        "ok",
        "lastErrorObject",
        "electionId",
        "opTime",
        "autocommit",
        "startTransaction",
    }
)
"""Top-level fields the driver and the server add to every command or reply: the session, the cluster time
gossip of a replica set, the write concern, the acknowledgement."""


@dataclass
class WireCost:
    """What one operation cost on the wire, and of what: ``parts`` splits the bytes into the messages'
    own documents (anywhere in a command or reply), the driver's and server's envelope (:data:`ENVELOPE`)
    and the rest, the library's own (command names, filters, operators, counters, states)."""

    commands: list[str] = field(default_factory=list)
    request_bytes: int = 0
    reply_bytes: int = 0
    failed: list[str] = field(default_factory=list)
    parts: dict[str, int] = field(default_factory=dict)

    def add_parts(self, document: Any) -> None:
        for name, size in split(document).items():
            self.parts[name] = self.parts.get(name, 0) + size

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
                self._cost.add_parts(event.command)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        with self._lock:
            if self._recording:
                self._cost.reply_bytes += len(bson.encode(event.reply))
                self._cost.add_parts(event.reply)

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        with self._lock:
            if self._recording:
                self._cost.failed.append(f"{event.command_name}: {event.failure.get('errmsg', '')}")
                self._cost.reply_bytes += len(bson.encode(event.failure))


def split(document: Any) -> dict[str, int]:
    """The BSON bytes of a command or reply by part: ``messages`` (every ``{role, content}`` document in it,
    with its key), ``envelope`` (:data:`ENVELOPE`'s fields) and ``library`` (the rest)."""
    total = len(bson.encode(document))
    envelope = sum(_field_size(name, value) for name, value in document.items() if name in ENVELOPE)
    messages = _messages_size(document)
    return {"messages": messages, "envelope": envelope, "library": total - envelope - messages}


def _field_size(name: str, value: Any) -> int:
    """What a field adds to its document: its BSON size in a document of its own, less that document's."""
    return len(bson.encode({name: value})) - len(bson.encode({}))


def _messages_size(value: Any) -> int:
    if isinstance(value, dict):
        return sum(
            _field_size(str(name), item) if _is_message(item) else _messages_size(item)
            for name, item in value.items()
        )
    if isinstance(value, list):
        return sum(
            _field_size(str(index), item) if _is_message(item) else _messages_size(item)
            for index, item in enumerate(value)
        )
    return 0


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and "role" in value and isinstance(value.get("content"), str)

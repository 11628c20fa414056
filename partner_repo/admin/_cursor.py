"""Opaque keyset cursors for slice pages: signed, and bound to the query that issued them.

A cursor names the last slice of a page by its sort key (creation time, slice id, unit id) so the next page
starts strictly after it, whatever was appended meanwhile. It also carries a fingerprint of the query's
filters and order, and an HMAC over both: a cursor that was edited, or that belongs to another query or
another database, is refused with :class:`partner_repo.InvalidCursor` instead of silently returning a wrong
page. Pass your own secret to make cursors unforgeable by clients who know this library's default key.

Every id the API accepts (at most :data:`~partner_repo.models.MAX_ID_LENGTH` characters) fits: the payload is
JSON in UTF-8 without ASCII escapes, and :data:`MAX_CURSOR_LENGTH` is derived from the longest possible one.

A cursor also carries the cluster time its page was read at (:class:`ReadTime`, where the deployment reports
one), so the next page reads no older data than this one did, whichever member serves it (see
:mod:`partner_repo.admin._queries`). Cursors without one (older releases, standalone servers) are valid.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import bson
from bson import Timestamp

from partner_repo.clock import to_utc_ms
from partner_repo.errors import InvalidCursor, InvalidInput
from partner_repo.models import MAX_ID_LENGTH

CURSOR_VERSION = 2
"""2: the walk orders ties of creation time by position (1's cursors, ordered by id, start the walk again)."""
DEFAULT_CURSOR_SECRET = b"partner-repo:slice-cursor:v1"
"""Used when no secret is configured: it detects edits and foreign cursors, not a determined forger."""

_MAC_BYTES = 16
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


MAX_CLUSTER_TIME_BYTES = 512
"""A ``$clusterTime`` document larger than this (BSON) is left out of a cursor (MongoDB's are ~80 bytes)."""


@dataclass(frozen=True)
class ReadTime:
    """When a page was read: the reply's ``operationTime`` and the signed ``$clusterTime`` gossiped with it
    (which lets a member that has not heard of that time yet accept ``afterClusterTime``)."""

    operation_time: Timestamp
    cluster_time: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class SliceKey:
    """Where a slice sits in the walk order: creation time, then its first message's position in the core,
    then its start in its unit (-1 where a slice has none), then slice id, then unit id (the tie-breakers)."""

    created_at: datetime
    slice_id: str
    unit_id: str
    read_at: ReadTime | None = None
    """When the page ending here was read (None: the deployment reported no time)."""
    position: int = -1
    start: int = -1

    @property
    def resumable(self) -> bool:
        """Whether a cursor can name this position: its ids are within the id limit (a longer one can only
        have been written by another tool)."""
        return all(not isinstance(i, str) or len(i) <= MAX_ID_LENGTH for i in (self.slice_id, self.unit_id))


def query_fingerprint(filters: Mapping[str, Any]) -> str:
    """A stable digest of a query's filters and order (datetimes as epoch milliseconds)."""
    canonical = json.dumps(
        {name: _plain(value) for name, value in filters.items()}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


class CursorCodec:
    """Encodes and verifies cursors for one database (its name is part of the signing key)."""

    def __init__(self, scope: str, secret: bytes | str | None = None) -> None:
        raw = secret.encode() if isinstance(secret, str) else secret
        if raw is not None and not raw:
            raise InvalidInput("the cursor secret must not be empty")
        self._key = hmac.new(raw or DEFAULT_CURSOR_SECRET, scope.encode(), hashlib.sha256).digest()

    def encode(self, key: SliceKey, fingerprint: str) -> str:
        fields: dict[str, Any] = {
            "v": CURSOR_VERSION,
            "f": fingerprint,
            "t": _epoch_ms(key.created_at),
            "s": key.slice_id,
            "u": key.unit_id,
            "p": key.position,
            "i": key.start,
        }
        if key.read_at is not None:
            fields.update(_read_time_fields(key.read_at))
        payload = json.dumps(
            fields,
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def decode(self, token: object, fingerprint: str) -> SliceKey:
        """The position a cursor names, after checking it is intact and was issued for this query."""
        if not isinstance(token, str):
            raise InvalidCursor(f"a cursor is a string, got {type(token).__name__}")
        if len(token) > MAX_CURSOR_LENGTH or token.count(".") != 1:
            raise InvalidCursor("malformed cursor: pass back the next_cursor of a page unchanged")
        body, signature = token.split(".")
        payload, mac = _unb64(body), _unb64(signature)
        if payload is None or mac is None or not hmac.compare_digest(mac, self._mac(payload)):
            raise InvalidCursor("invalid cursor: it was altered, or was not issued for this database")
        data = json.loads(payload)
        if data.get("v") != CURSOR_VERSION:
            raise InvalidCursor("cursor from an incompatible version of partner-repo; start the walk again")
        if data.get("f") != fingerprint:
            raise InvalidCursor(
                "cursor belongs to another query (different filters or order); start the walk again"
            )
        return SliceKey(
            created_at=_EPOCH + timedelta(milliseconds=data["t"]),
            slice_id=data["s"],
            unit_id=data["u"],
            read_at=_read_time(data),
            position=data["p"],
            start=data["i"],
        )

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()[:_MAC_BYTES]


def _read_time_fields(read_at: ReadTime) -> dict[str, Any]:
    moment = read_at.operation_time
    fields: dict[str, Any] = {"o": [moment.time, moment.inc]}
    cluster = None if read_at.cluster_time is None else bson.encode(read_at.cluster_time)
    if cluster is not None and len(cluster) <= MAX_CLUSTER_TIME_BYTES:
        fields["k"] = _b64(cluster)
    return fields


def _read_time(data: Mapping[str, Any]) -> ReadTime | None:
    """The read time of a verified payload (issued by this library, so well-formed), if it has one."""
    if "o" not in data:
        return None
    cluster = _unb64(data["k"]) if "k" in data else None
    return ReadTime(Timestamp(*data["o"]), None if cluster is None else bson.decode(cluster))


def _longest_cursor() -> int:
    """The length of the longest cursor :meth:`CursorCodec.encode` makes for ids within the limit: both ids of
    the character JSON spells longest (a control character, ``\\u0001``: 6 bytes; astral ones take 4), at
    the widest time. Older cursors (ASCII-escaped, at most 2048 characters) stay within it."""
    codec = CursorCodec("")
    widest = "\x01" * MAX_ID_LENGTH
    latest = Timestamp(2**32 - 1, 2**32 - 1)
    padding = MAX_CLUSTER_TIME_BYTES - len(bson.encode({"p": b""}))
    read_at = ReadTime(latest, {"p": b"\x00" * padding})  # a cluster time of the largest size a cursor holds
    return max(
        len(codec.encode(SliceKey(moment, widest, widest, read_at, -(2**63), -(2**63)), "0" * 32))
        for moment in (datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC))
    )


def _plain(value: Any) -> Any:
    return _epoch_ms(value) if isinstance(value, datetime) else value


def _epoch_ms(value: datetime) -> int:
    return (to_utc_ms(value) - _EPOCH) // timedelta(milliseconds=1)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes | None:
    """Strict decoding: only the one canonical spelling of the bytes is accepted."""
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if _b64(raw) == text else None


MAX_CURSOR_LENGTH = _longest_cursor()
"""Longer tokens are refused before any decoding: no cursor this library issues is longer."""


def slice_key(document: Mapping[str, Any], read_at: ReadTime | None = None) -> SliceKey:
    """The cursor key of a slice document of the slices aggregation (``slices`` unwound)."""
    piece = document["slices"]
    moment = to_utc_ms(piece["created_at"])
    return SliceKey(
        created_at=moment,
        slice_id=piece["id"],
        unit_id=document["_id"],
        read_at=read_at,
        position=document.get("position", -1),
        start=document.get("start", -1),
    )


def resumable_end(documents: Sequence[Mapping[str, Any]]) -> int:
    """How many of a full page's slices to return: all of them, unless the last ones have ids over the id
    limit (written by another tool), which no cursor can name; the page then ends at the last slice one can
    name, and the next page starts there. A page of nothing but such slices cannot be continued:
    :class:`InvalidInput`."""
    for end in range(len(documents), 0, -1):
        if slice_key(documents[end - 1]).resumable:
            return end
    last = documents[-1]
    raise InvalidInput(
        f"cannot page past slice {last['slices']['id']!r} of unit {last['_id']!r}: ids longer than "
        f"{MAX_ID_LENGTH} characters (written by another tool) cannot be held in a cursor; ask for a larger "
        "limit, and rename them (partner-repo check lists them)"
    )


__all__ = [
    "MAX_CURSOR_LENGTH",
    "CursorCodec",
    "ReadTime",
    "SliceKey",
    "query_fingerprint",
    "resumable_end",
    "slice_key",
]

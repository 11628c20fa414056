"""Storable values: BSON strings are UTF-8, so a string that cannot be encoded is refused before any write;
a message's metadata is a small JSON object BSON stores as it is.

Its own module because both the model's validators and the boundary checks in ``validation`` need it, and the
model sits below ``validation``.
"""

from __future__ import annotations

import json
import math
from typing import Any

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


MAX_METADATA_BYTES = 16 * 1024
"""The largest ``Message.metadata`` accepted: its compact JSON (UTF-8) in bytes."""

MAX_METADATA_DEPTH = 32
"""How deeply ``Message.metadata`` may nest objects and arrays (BSON documents nest at most 100 deep)."""

_INT64 = (-(2**63), 2**63 - 1)


def storable_json_object(value: object, what: str) -> dict[str, Any]:
    """A copy of ``value`` if it is a small JSON object that BSON stores as it is, else :class:`InvalidInput`.

    Accepted: a ``dict`` with string keys, holding ``None``, booleans, strings, 64-bit integers, finite
    floats, lists (or tuples, stored as lists) and such objects, at most :data:`MAX_METADATA_DEPTH` deep and
    :data:`MAX_METADATA_BYTES` of compact JSON. Keys may not start with ``$`` nor hold ``.`` or NUL (MongoDB
    reads those as operators and paths). The copy is what is kept, so changing ``value`` afterwards changes
    nothing stored.
    """
    if not isinstance(value, dict):
        raise InvalidInput(f"{what} must be a JSON object (a dict), got {type(value).__name__}")
    _check_json(value, what, 0)
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    size = len(text.encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise InvalidInput(f"{what} is {size} bytes of JSON; at most {MAX_METADATA_BYTES} are stored")
    copy: dict[str, Any] = json.loads(text)
    return copy


def _check_json(value: object, where: str, depth: int) -> None:
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        require_encodable(value, where)
    elif isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise InvalidInput(f"{where} holds an integer BSON cannot store (beyond 64 bits)")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"{where} holds {value!r}, which is not JSON")
    elif isinstance(value, list | tuple | dict):
        if depth >= MAX_METADATA_DEPTH:
            raise InvalidInput(f"{where} nests deeper than {MAX_METADATA_DEPTH} levels")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InvalidInput(f"{where} has a key that is not a string: {key!r}")
                if key.startswith("$") or "." in key or "\x00" in key:
                    raise InvalidInput(f"{where} has the key {key[:64]!r}: no leading '$', '.' or NUL")
                require_encodable(key, where)
                _check_json(item, f"{where}.{key[:64]}", depth + 1)
        else:
            for index, item in enumerate(value):
                _check_json(item, f"{where}[{index}]", depth + 1)
    else:
        raise InvalidInput(f"{where} holds a {type(value).__name__}, which is not JSON")

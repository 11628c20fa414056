"""Vectors: what an embedder makes of a slice, how recall stores them, and how it finds the nearest ones.

No model ships with the library (the defaults stay offline and lexical). A service that has one passes the
same :class:`Embedder` to :class:`~.indexer.RecallIndexer` and to :class:`~.service.MemoryRecall`, and
recall gains a ``vector`` channel that finds slices on its own, and a similarity for every message it
weighs (``docs/recall.md``, "The vector channel").

**What is stored, per slice** (on the slice's own document, so whatever removes the slice removes them):

- ``vector``: the slice's vector, the normalized mean of its messages' vectors, quantized to int8 (a BSON
  vector, subtype 9: what a ``vectorSearch`` index reads too);
- ``mvectors``: each message's vector, int8, one after the other (what ranks the messages of a slice);
- ``vcode``: the slice's sequence number (4 bytes) and a 256-bit sign code of its vector (32 bytes): what
  the exact search reads for every slice of the core, from an index alone;
- ``vtag``: which embedder made them (:class:`Identity`); the core's document records the embedder its
  vectors are from, and a recall with another one is refused (:class:`~partner_repo.errors.EmbedderMismatch`).

**The exact search without MongoDB Vector Search** reads the ``vcode`` of every slice of the core (one
covered read of the ``core_vectors`` index: 41 bytes a slice on the wire, about 460 KB at 10,000 slices),
scores each against the query's full vector (asymmetric: the query's projection on the code's signs), and
reads the :data:`RESCORED` best with their int8 vectors to rank them by cosine similarity. The code is a
count sketch of the vector (each dimension adds, with a fixed sign, to one of 256 coordinates): cheap to
compute for any dimension, and the asymmetric score keeps what the query knows; on LoCoMo's messages the
true 20 nearest are among the 100 best by code 92 to 94% of the time (docs/recall.md). Where the server
has MongoDB Vector Search (a ``vectorSearch`` index, :mod:`.search`), ``$vectorSearch`` does the finding.
"""

from __future__ import annotations

import math
import numbers
import operator
import random
import zlib
from array import array
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from partner_repo.callables import call
from partner_repo.errors import InvalidInput
from partner_repo.mongo import Binary, BinaryVectorDtype

MAX_DIMENSIONS = 8192
CODE_BITS = 256
"""The bits of a slice's sign code."""
SEQ_BYTES = 4
"""A code begins with the slice's sequence number, big-endian: the scan reads codes alone."""
RESCORED = 64
"""How many slices the exact search reads again with their full vectors, the best by code first."""
_INT8 = 127


@runtime_checkable
class Embedder(Protocol):
    """Texts to vectors of one dimension each: a coroutine function, or a plain one (run in a worker
    thread). An optional ``name`` attribute names the model (``"all-mpnet-base-v2"``); without one the
    embedder is named by its module and qualified name."""

    def __call__(
        self, texts: Sequence[str], /
    ) -> Sequence[Sequence[float]] | Awaitable[Sequence[Sequence[float]]]: ...


@dataclass(frozen=True)
class Identity:
    """Which embedder made a core's vectors: its name and its vectors' dimension; ``tag`` is what each
    slice's vectors are marked with (a vector of another tag is never compared with this one's)."""

    name: str
    dimensions: int

    @property
    def tag(self) -> str:
        return f"{zlib.crc32(f'{self.name}/{self.dimensions}'.encode()):08x}"

    def describe(self) -> str:
        return f"{self.name!r} ({self.dimensions} dimensions)"

    def as_document(self) -> dict[str, Any]:
        return {"name": self.name, "dimensions": self.dimensions, "tag": self.tag}

    @classmethod
    def stored(cls, value: object) -> Identity | None:
        """The identity a core's document records, or None (no vectors yet, or a value no writer of this
        library left: read as none, as every stored value is read)."""
        if not isinstance(value, dict):
            return None
        name, dimensions = value.get("name"), value.get("dimensions")
        if not isinstance(name, str) or not isinstance(dimensions, int) or isinstance(dimensions, bool):
            return None
        return cls(name, dimensions)


def embedder_name(embedder: Embedder) -> str:
    """The name an embedder's vectors are recorded under: its ``name``, or its module and qualified name."""
    name = getattr(embedder, "name", None)
    if isinstance(name, str) and name.strip():
        return name.strip()
    target = embedder if hasattr(embedder, "__qualname__") else type(embedder)
    return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', type(embedder).__name__)}"


def checked_embedder(embedder: Embedder | None) -> Embedder | None:
    """``embedder`` as given to the indexer or recall: None, or a callable (else :class:`InvalidInput`)."""
    if embedder is not None and not callable(embedder):
        raise InvalidInput(f"embedder must be callable, got {type(embedder).__name__}")
    return embedder


async def embed(embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
    """The vectors of ``texts``, checked: one per text, the same dimension, finite numbers."""
    outcome = await call(embedder, list(texts))
    vectors = [list(vector) for vector in outcome]
    if len(vectors) != len(texts):
        raise InvalidInput(
            f"embedder {embedder_name(embedder)!r} returned {len(vectors)} vector(s) for {len(texts)} text(s)"
        )
    sizes = {len(vector) for vector in vectors}
    if len(sizes) > 1 or (sizes and not 0 < next(iter(sizes)) <= MAX_DIMENSIONS):
        name = embedder_name(embedder)
        raise InvalidInput(f"embedder {name!r} must return vectors of one dimension, 1 to {MAX_DIMENSIONS}")
    for vector in vectors:
        if not all(  # numbers.Real: numpy's scalars too, as a model hands them over
            isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x) for x in vector
        ):
            raise InvalidInput(
                f"embedder {embedder_name(embedder)!r} returned a vector that is not all finite numbers"
            )
    return [[float(x) for x in vector] for vector in vectors]


def normalized(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else [0.0] * len(vector)


def mean_vector(vectors: Sequence[Sequence[float]]) -> list[float]:
    """The normalized mean of normalized ``vectors``: a slice's vector from its messages'."""
    if not vectors:
        return []
    units = [normalized(vector) for vector in vectors]
    return normalized([sum(column) / len(units) for column in zip(*units, strict=True)])


def quantized(vector: Sequence[float]) -> list[int]:
    """``vector`` as int8, scaled so its largest coordinate is 127 (a cosine similarity does not see the
    scale)."""
    largest = max((abs(x) for x in vector), default=0.0)
    if not largest:
        return [0] * len(vector)
    return [round(x * _INT8 / largest) for x in vector]


def int8_vector(vector: Sequence[float]) -> Binary:
    """A BSON int8 vector (binary subtype 9): how a slice's vector is stored."""
    return Binary.from_vector(quantized(vector), BinaryVectorDtype.INT8)


def packed_int8(vectors: Iterable[Sequence[float]]) -> Binary:
    """Several int8 vectors one after the other (a slice's messages')."""
    packed = array("b")
    for vector in vectors:
        packed.extend(quantized(vector))
    return Binary(packed.tobytes())


def read_int8(value: object) -> list[float]:
    """A stored int8 vector (a BSON vector, or a plain list of numbers 0.4 wrote); [] when unreadable."""
    if isinstance(value, Binary) and value.subtype == 9:
        try:
            return [float(x) for x in value.as_vector().data]
        except (ValueError, TypeError):
            return []
    if isinstance(value, list) and all(isinstance(x, int | float) and not isinstance(x, bool) for x in value):
        return [float(x) for x in value]
    return []


def read_packed(value: object, dimensions: int) -> list[Sequence[int]]:
    """The vectors :func:`packed_int8` stored (each of ``dimensions``, as signed bytes); [] when
    unreadable."""
    if not isinstance(value, bytes) or dimensions <= 0 or len(value) % dimensions:
        return []
    flat = memoryview(bytes(value)).cast("b")
    return [flat[i : i + dimensions] for i in range(0, len(flat), dimensions)]


def cosine(first: Sequence[float], second: Sequence[float]) -> float:
    """Cosine similarity (0 for vectors of different dimensions or a zero vector)."""
    return Similarity(first)(second)


class Similarity:
    """The cosine similarity of vectors to one vector, its norm computed once (recall compares the query
    with a few hundred message vectors)."""

    def __init__(self, vector: Sequence[float]) -> None:
        self._vector = vector
        self._norm = math.sqrt(sum(map(operator.mul, vector, vector)))

    def __call__(self, other: Sequence[float]) -> float:
        if len(other) != len(self._vector) or not self._norm:
            return 0.0
        norm = math.sqrt(sum(map(operator.mul, other, other)))
        return sum(map(operator.mul, self._vector, other)) / (self._norm * norm) if norm else 0.0


@dataclass(frozen=True)
class _Sketch:
    """The count sketch of a dimension: each coordinate adds, with its sign, to one of the code's bits."""

    buckets: tuple[int, ...]
    signs: tuple[float, ...]

    def project(self, vector: Sequence[float]) -> list[float]:
        sums = [0.0] * CODE_BITS
        for bucket, sign, x in zip(self.buckets, self.signs, vector, strict=True):
            sums[bucket] += sign * x
        return sums


_SKETCHES: dict[int, _Sketch] = {}


def _sketch(dimensions: int) -> _Sketch:
    """The fixed sketch of ``dimensions`` (the same in every process: a seeded generator)."""
    found = _SKETCHES.get(dimensions)
    if found is None:
        chosen = random.Random(f"partner-repo sketch {dimensions}")  # a fixed projection, not a secret
        buckets = tuple(chosen.randrange(CODE_BITS) for _ in range(dimensions))
        signs = tuple(chosen.choice((-1.0, 1.0)) for _ in range(dimensions))
        found = _SKETCHES[dimensions] = _Sketch(buckets, signs)
    return found


def vector_code(seq: int, vector: Sequence[float]) -> Binary:
    """A slice's ``vcode``: its sequence number, then the signs of its vector's sketch (1 for positive)."""
    bits = 0
    for index, value in enumerate(_sketch(len(vector)).project(vector)):
        if value > 0:
            bits |= 1 << index
    return Binary(seq.to_bytes(SEQ_BYTES, "big") + bits.to_bytes(CODE_BITS // 8, "little"))


@dataclass(frozen=True)
class SliceVectors:
    """A slice's vectors as one embedder call made them: its messages' (or, for a slice without messages,
    its summary's) and theirs normalized mean."""

    identity: Identity
    vector: list[float]
    messages: list[list[float]]

    def fields(self, seq: int) -> dict[str, Any]:
        """What the slice's document stores of them, under sequence number ``seq``."""
        return {
            "vtag": self.identity.tag,
            "vcode": vector_code(seq, self.vector),
            "vector": int8_vector(self.vector),
            "mvectors": packed_int8(self.messages),
        }


async def slice_vectors(embedder: Embedder, summary: str, texts: Sequence[str]) -> SliceVectors:
    """Embed a slice's messages (``texts``) in one call; a slice without messages is its summary."""
    return (await slices_vectors(embedder, [(summary, texts)]))[0]


async def slices_vectors(
    embedder: Embedder, slices: Sequence[tuple[str, Sequence[str]]]
) -> list[SliceVectors]:
    """Embed several slices' messages (each a summary and its messages' texts) in one call."""
    asked = [list(texts) or [summary] for summary, texts in slices]
    vectors = await embed(embedder, [text for texts in asked for text in texts])
    identity = Identity(embedder_name(embedder), len(vectors[0])) if vectors else None
    made: list[SliceVectors] = []
    first = 0
    for (_, texts), own in zip(slices, asked, strict=True):
        part = vectors[first : first + len(own)]
        first += len(own)
        assert identity is not None
        made.append(SliceVectors(identity, mean_vector(part), part if texts else []))
    return made


def with_seq(code: bytes, seq: int) -> Binary:
    """``code`` renumbered: the same bits under sequence number ``seq``."""
    return Binary(seq.to_bytes(SEQ_BYTES, "big") + bytes(code[SEQ_BYTES:]))


class CodeScorer:
    """Scores codes against a query vector: the sum of the query's sketch coordinates, each signed by the
    code's bit (asymmetric: the query keeps its magnitudes). One table per code byte makes a code 32
    lookups."""

    def __init__(self, query: Sequence[float]) -> None:
        projected = _sketch(len(query)).project(query)
        self._tables: list[list[float]] = []
        for first in range(0, CODE_BITS, 8):
            part = projected[first : first + 8]
            self._tables.append(
                [sum(v if byte >> bit & 1 else -v for bit, v in enumerate(part)) for byte in range(256)]
            )

    def best(self, codes: Iterable[object], count: int) -> list[int]:
        """The sequence numbers of the ``count`` best codes, best first (codes not of this shape skipped)."""
        scored: list[tuple[float, int]] = []
        tables = self._tables
        size = SEQ_BYTES + CODE_BITS // 8
        for code in codes:
            if not isinstance(code, bytes) or len(code) != size:
                continue
            seq = int.from_bytes(code[:SEQ_BYTES], "big")
            signs = code[SEQ_BYTES:]
            scored.append((sum(table[byte] for table, byte in zip(tables, signs, strict=True)), seq))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [seq for _, seq in scored[:count]]


__all__ = [
    "CODE_BITS",
    "RESCORED",
    "CodeScorer",
    "Similarity",
    "SliceVectors",
    "Embedder",
    "Identity",
    "checked_embedder",
    "cosine",
    "embed",
    "embedder_name",
    "int8_vector",
    "mean_vector",
    "normalized",
    "packed_int8",
    "quantized",
    "read_int8",
    "read_packed",
    "slice_vectors",
    "slices_vectors",
    "vector_code",
    "with_seq",
]

"""What the position tests share: a database that logs its writes and can cut a roller off right after its
append, monotonic clocks a test moves (or that jump at random), and the exactly-once oracle.

The oracle (:func:`storage_problems`) knows, per core, every message recorded in record order (each with a
unique content, so a content is a position), every clear (which positions it took out of the window, and
where its window-emptying write sits among all writes) and every write to the units. From the stored units
it checks, exactly:

- slices tile their unit: sorted by start, ``[start_index, end_index)`` contiguous from 0 to its size;
- a session is a unit and the units continuing it (``previous_unit_id``); within it, messages are in record
  order, none twice. Sessions are ordered by their first write;
- a session after the first starts with exactly the retained context of the session before: Partner's rule
  (``partner_repo/cores/_window.py``) applied to the roll that stored the previous session's last slice, i.e.
  the last ``rolling_size // max(retain_divisor, 1)`` positions that slice ends, unless a clear took them out
  of the window before the session stored anything (then nothing is repeated; either, when that clear and the
  session's first write overlap on the wire). Rolls that stored nothing keep the window as it was (Partner's
  ``triggerRolling`` does not trim on an empty increment);
- apart from that context, every position is stored once across all sessions, sessions in record order, and
  every position is stored unless a clear took it out of the window;
- no write sent after a clear's window-emptying write was answered stores a position that clear took out of
  the window (erased text never comes back), and every stored position a clear took is explained by a write
  sent before that.

On the in-memory backend nothing runs between a write's ``start`` and ``end``, so the order of writes is
exact; on a server, writes whose intervals overlap may have landed in either order, and the oracle accepts
both.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pymongo.errors import ConnectionFailure

from partner_repo import MemorySlice, MemoryUnit, Message

CORES, UNITS = "memory_cores", "memory_units"
STALL_S = 0.2
"""A stall of an :class:`ObservedDatabase` call, in real seconds (``clear_window`` polls every 0.05 s)."""
CURSOR_METHODS = frozenset({"find", "aggregate", "watch", "list_indexes"})
WRITE_METHODS = frozenset(
    {
        "insert_one",
        "insert_many",
        "update_one",
        "update_many",
        "replace_one",
        "delete_one",
        "delete_many",
        "find_one_and_update",
        "find_one_and_replace",
        "find_one_and_delete",
        "bulk_write",
    }
)


# -- clocks ------------------------------------------------------------------------------------------------


class Ticks:
    """A monotonic clock (seconds) the test moves with ``now += ...``; ``reads`` counts how often it was read.

    Given ``rng``, each read also jumps forward, with probability ``chance``, by up to ``jump`` seconds: a
    process whose clock jumps sees other processes' leases go silent (and its own summaries look slow).
    """

    def __init__(self, rng: random.Random | None = None, *, jump: float = 0.0, chance: float = 0.0) -> None:
        self.now = 1000.0
        self.reads = 0
        self._rng, self._jump, self._chance = rng, jump, chance

    def __call__(self) -> float:
        self.reads += 1
        if self._rng is not None and self._rng.random() < self._chance:
            self.now += self._rng.uniform(0, self._jump)
        return self.now


# -- a database that logs its writes ---------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    """One write as seen from the client: where it sits in the order of all observed calls (``start``: just
    before it was sent, ``end``: just after its answer; on the in-memory backend nothing runs in between),
    the unit or core it addressed, the message contents it carried, whether it named the chat window, and
    whether it changed anything."""

    collection: str
    target: Any
    contents: tuple[str, ...]
    touches_window: bool
    start: int = -1
    end: int = -1
    applied: bool = False


WriteHook = Callable[[Write], Awaitable[None]]


class Wire:
    """One clock and one log of writes shared by every :class:`ObservedDatabase` of a test. The clock is a
    counter, or ``clock`` (``time.monotonic_ns``: one clock for every process of a machine)."""

    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        self._clock = clock if clock is not None else itertools.count().__next__
        self.writes: list[Write] = []

    def tick(self) -> int:
        return self._clock()

    def sending(self, write: Write) -> None:
        """``write`` is about to be sent (its ``end`` not known yet): a process that may be killed logs it."""

    def landed(self, write: Write) -> None:
        self.writes.append(write)


class ObservedDatabase:
    """Pass it where a database is expected: every write is logged on ``wire``; with ``rng`` every call first
    yields to the event loop a few times (mongomock answers without yielding, so without it concurrent tasks
    would never interleave between a read and a write), and with ``stall_chance`` it sometimes stalls
    (:data:`STALL_S`) as a paused process would.

    :meth:`cut_after_next_append` simulates a connection that drops (or a process that dies) right after a
    roll's append lands: once a write carrying messages lands in the units, every later call through this
    database raises ``ConnectionFailure`` without reaching the server, until :meth:`reconnect`.
    """

    def __init__(
        self, database: Any, wire: Wire, rng: random.Random | None = None, *, stall_chance: float = 0.0
    ) -> None:
        self._database = database
        self.wire = wire
        self._rng = rng
        self._stall_chance = stall_chance
        self._armed = False
        self.cut = False
        self.before: WriteHook | None = None
        """Awaited before each write is sent (a process script stalls or hangs there)."""
        self.after: WriteHook | None = None
        """Awaited after each write's answer."""
        self._collections: dict[str, ObservedCollection] = {}

    def __getitem__(self, name: str) -> ObservedCollection:
        if name not in self._collections:
            self._collections[name] = ObservedCollection(self, self._database[name], name)
        return self._collections[name]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)

    def cut_after_next_append(self) -> None:
        self._armed = True

    def reconnect(self) -> None:
        self._armed = self.cut = False

    async def pause(self) -> None:
        if self._rng is None:
            return
        if self._rng.random() < self._stall_chance:
            await asyncio.sleep(STALL_S)  # long enough for a waiting clear to look at the lease twice
        for _ in range(self._rng.choice((0, 0, 1, 2, 3, 5))):
            await asyncio.sleep(0)

    def check_connected(self) -> None:
        if self.cut:
            raise ConnectionFailure("connection lost (injected by the test)")

    def landed(self, write: Write) -> None:
        self.wire.landed(write)
        if self._armed and write.collection == UNITS and write.applied and write.contents:
            self.cut = True


class ObservedCollection:
    """A collection of an :class:`ObservedDatabase`."""

    def __init__(self, owner: ObservedDatabase, collection: Any, name: str) -> None:
        self._owner = owner
        self._collection = collection
        self._name = name

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._collection, name)
        if not callable(attribute) or name == "with_options":
            return attribute
        if name in CURSOR_METHODS:

            def cursor(*args: Any, **kwargs: Any) -> ObservedCursor:
                return ObservedCursor(self._owner, attribute(*args, **kwargs))

            return cursor
        owner = self._owner

        async def call(*args: Any, **kwargs: Any) -> Any:
            await owner.pause()
            owner.check_connected()
            if name not in WRITE_METHODS:
                result = await attribute(*args, **kwargs)
                await owner.pause()
                return result
            write = self._write(name, args, kwargs)
            if owner.before is not None:
                await owner.before(write)
            write = replace(write, start=owner.wire.tick())
            owner.wire.sending(write)
            try:
                result = await attribute(*args, **kwargs)
            except Exception:
                owner.landed(replace(write, end=owner.wire.tick()))
                raise
            write = replace(write, end=owner.wire.tick(), applied=_applied(result))
            owner.landed(write)
            if owner.after is not None:
                await owner.after(write)
            await owner.pause()
            return result

        return call

    def _write(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Write:
        if method.startswith("insert"):
            payload: Any = args[0] if args else kwargs.get("document", kwargs.get("documents"))
            target = payload.get("_id") if isinstance(payload, dict) else None
        else:
            query = args[0] if args else kwargs.get("filter", {})
            payload = [*args[1:], *(v for k, v in kwargs.items() if k in {"update", "replacement"})]
            target = query.get("_id") if isinstance(query, dict) else None
        return Write(
            collection=self._name,
            target=target,
            contents=tuple(_contents(payload)),
            touches_window=_names(payload, "chat_messages"),
        )


class ObservedCursor:
    """A cursor that yields first and refuses to run once its database is cut off."""

    def __init__(self, owner: ObservedDatabase, cursor: Any) -> None:
        self._owner = owner
        self._cursor = cursor

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._cursor, name)
        if name in {"sort", "skip", "limit", "max_time_ms", "batch_size", "hint"}:
            return lambda *a, **k: ObservedCursor(self._owner, attribute(*a, **k))
        return attribute

    async def to_list(self, length: int | None = None) -> list[Any]:
        await self._owner.pause()
        self._owner.check_connected()
        return list(await self._cursor.to_list(length))

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        await self._owner.pause()
        self._owner.check_connected()
        async for document in self._cursor:
            yield document


def _applied(result: Any) -> bool:
    """Whether a write's answer says it changed (or inserted, or returned) a document."""
    if result is None or isinstance(result, dict):  # find_one_and_*: the document, or None
        return result is not None
    if hasattr(result, "inserted_id") or hasattr(result, "inserted_ids"):
        return True
    if getattr(result, "upserted_id", None) is not None:
        return True
    return any(getattr(result, counter, 0) > 0 for counter in ("modified_count", "deleted_count"))


def _contents(value: Any) -> Iterable[str]:
    """The contents of every message (a ``{role, content}`` mapping) anywhere in ``value``."""
    if isinstance(value, dict):
        if isinstance(value.get("content"), str) and "role" in value:
            yield value["content"]
            return
        for item in value.values():
            yield from _contents(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _contents(item)


def _names(value: Any, key: str) -> bool:
    """Whether ``key`` is a field name (or a dotted path's first part) anywhere in ``value``."""
    if isinstance(value, dict):
        return any(str(k).split(".")[0] == key or _names(v, key) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_names(item, key) for item in value)
    return False


# -- what the test knows about each core ------------------------------------------------------------------


@dataclass(frozen=True)
class Clear:
    """A clear of the window: the positions it took out, and where its window-emptying write sits."""

    positions: range
    start: int
    end: int


@dataclass
class CoreHistory:
    """Every message recorded into one core, in record order (``recorded[p]`` is the content at position p),
    and every clear. Records into the core are serialized by ``lock`` so the record order is known."""

    core_id: str
    recorded: list[str] = field(default_factory=list)
    clears: list[Clear] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def next_messages(self, count: int) -> list[Message]:
        start = len(self.recorded)
        return [
            Message(role="user" if n % 2 == 0 else "assistant", content=f"{self.core_id} #{n}")
            for n in range(start, start + count)
        ]

    def cleared(self, count: int, writes: Sequence[Write], start: int, end: int) -> Clear:
        """Note a clear that took ``count`` messages (the window's last: every record had landed), sent
        between ``start`` and ``end`` (see :func:`emptying_write`)."""
        total = len(self.recorded)
        clear = Clear(range(total - count, total), *emptying_write(writes, start, end))
        self.clears.append(clear)
        return clear


def emptying_write(writes: Sequence[Write], start: int, end: int) -> tuple[int, int]:
    """Where a clear sent between ``start`` and ``end`` emptied the window: the interval of its last write
    naming the chat window in that span (the whole span when no write shows)."""
    emptying = [w for w in writes if start <= w.start <= end and w.collection == CORES and w.touches_window]
    emptying = [w for w in emptying if w.applied] or emptying
    return (emptying[-1].start, emptying[-1].end) if emptying else (start, end)


# -- the oracle -------------------------------------------------------------------------------------------


def slice_problems(unit: MemoryUnit) -> list[str]:
    """Problems with ``unit``'s slices: sorted by start they must cover ``[0, message_count)`` exactly."""
    pieces = sorted(unit.complete_slices(), key=lambda s: s.start_index or 0)
    bounds = [(p.start_index, p.end_index) for p in pieces]
    edge = 0
    for start, end in bounds:
        if start != edge or end is None or end <= start:
            return [
                f"unit {unit.id}: slices {bounds} do not tile its {len(unit.conversation_messages)} messages"
            ]
        edge = end
    if edge != len(unit.conversation_messages):
        return [f"unit {unit.id}: slices {bounds} do not tile its {len(unit.conversation_messages)} messages"]
    return []


def sessions_of(units: Sequence[MemoryUnit]) -> tuple[list[list[MemoryUnit]], list[str]]:
    """A core's units as sessions: each a unit followed by the units continuing it."""
    problems: list[str] = []
    ids = {unit.id for unit in units}
    following: dict[str, MemoryUnit] = {}
    for unit in units:
        if unit.previous_unit_id is None:
            continue
        if unit.previous_unit_id not in ids:
            problems.append(f"unit {unit.id} continues {unit.previous_unit_id}, which is not stored")
        elif unit.previous_unit_id in following:
            problems.append(
                f"units {following[unit.previous_unit_id].id} and {unit.id} continue the same unit"
            )
        following[unit.previous_unit_id] = unit
    sessions = []
    for unit in units:
        if unit.previous_unit_id is not None and unit.previous_unit_id in ids:
            continue
        chain = [unit]
        while chain[-1].id in following and len(chain) <= len(units):
            chain.append(following[chain[-1].id])
        sessions.append(chain)
    return sessions, problems


def last_slice(session: Sequence[MemoryUnit]) -> MemorySlice | None:
    for unit in reversed(session):
        pieces = unit.complete_slices()
        if pieces:
            return max(pieces, key=lambda s: s.end_index or 0)
    return None


def spans(positions: Sequence[int]) -> str:
    """``[0, 1, 2, 5, 6]`` as ``0-2 5-6``: a session's positions, readable in a failure message."""
    out = []
    for _, group in itertools.groupby(enumerate(positions), key=lambda item: item[1] - item[0]):
        run = [p for _, p in group]
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return " ".join(out) or "(none)"


@dataclass(frozen=True)
class StoredSession:
    """A session as stored: its positions in unit order, the slice that ends it, and the first write that
    stored messages in it (None when no observed write did)."""

    positions: list[int]
    last: MemorySlice | None
    began: Write | None


def retained_contexts(
    previous: StoredSession | None,
    session: StoredSession,
    clears: Sequence[Clear],
    *,
    shortened: bool = False,
) -> list[list[int]]:
    """What ``session`` may start with, repeated from ``previous``: the retained context of the roll that
    stored ``previous``'s last slice (Partner: the last ``rolling_size // max(retain_divisor, 1)`` positions
    it ends), or nothing once a clear took that context out of the window before ``session`` stored anything.
    Two answers only when that clear and the session's first write overlap on the wire (either came first)."""
    if previous is None or previous.last is None or previous.last.rolling_size is None:
        return [[]]
    kept = previous.last.rolling_size // max(previous.last.retain_divisor or 0, 1)
    end = previous.positions[-1] + 1
    retained = list(range(end - kept, end))
    if shortened:  # a turn too large for the window had the front of the context dropped: any suffix of it
        return [retained[cut:] for cut in range(len(retained) + 1)]
    touching = [clear for clear in clears if not set(clear.positions).isdisjoint(retained)]
    if not retained or not touching:
        return [retained]
    began = session.began
    if began is not None and any(clear.end < began.start for clear in touching):
        return [[]]
    if began is None or any(clear.start <= began.end for clear in touching):
        return [retained, []]
    return [retained]


def storage_problems(
    history: CoreHistory,
    units: Sequence[MemoryUnit],
    writes: Sequence[Write],
    *,
    pending: Iterable[int] = (),
    shortened: bool = False,
) -> list[str]:
    """Everything wrong with how ``units`` store ``history`` (empty: exactly once, as the module says).

    In the middle of a run (the protocol model checks after every step): ``pending`` are the positions still
    waiting in the window to be stored (not missing yet), and ``shortened`` accepts a session that starts
    with only the end of the retained context (a turn the window could not take had the rest dropped)."""
    core = history.core_id
    position = {content: p for p, content in enumerate(history.recorded)}
    problems = [problem for unit in units for problem in slice_problems(unit)]
    chains, chain_problems = sessions_of(units)
    problems += chain_problems
    began: dict[Any, Write] = {}
    for write in sorted(writes, key=lambda w: w.start):
        if write.collection == UNITS and write.applied and write.contents:
            began.setdefault(write.target, write)

    sessions = []
    for chain in chains:
        seq = []
        for unit in chain:
            for message in unit.conversation_messages:
                if message.content not in position:
                    problems.append(f"unit {unit.id} holds {message.content!r}, which was never recorded")
                else:
                    seq.append(position[message.content])
        if any(b <= a for a, b in itertools.pairwise(seq)):
            problems.append(f"a session stores positions out of record order or twice: {spans(seq)}")
        if seq:
            sessions.append(StoredSession(seq, last_slice(chain), began.get(chain[0].id)))
    sessions.sort(key=lambda s: (s.began.start if s.began else float("inf"), s.positions[-1], s.positions[0]))

    taken: list[int] = []
    layout = []
    previous = None
    for rank, session in enumerate(sessions):
        seq, choices = (
            session.positions,
            retained_contexts(previous, session, history.clears, shortened=shortened),
        )
        retained = next((r for r in choices if seq[: len(r)] == r), None)
        expected = " or ".join(spans(r) for r in choices)
        layout.append(f"session {rank}: {spans(seq)} (may repeat {expected})")
        if retained is None:
            problems.append(
                f"session {rank} starts with {spans(seq[: max(len(choices[0]), 1)])}, not with exactly the "
                f"retained context {expected}"
            )
            retained = choices[0] if seq[: len(choices[0])] == choices[0] else []
        taken += seq[len(retained) :]
        previous = session
    if any(b <= a for a, b in itertools.pairwise(taken)):
        repeated = sorted(p for p, n in _counts(taken).items() if n > 1)
        problems.append(
            f"positions stored in more than one session beyond the retained context: {spans(repeated)}"
            if repeated
            else "sessions are not in record order"
        )
    missing = sorted(
        set(range(len(history.recorded)))
        - set(taken)
        - {p for c in history.clears for p in c.positions}
        - set(pending)
    )
    if missing:
        problems.append(f"recorded, never cleared, not stored: {spans(missing)}")
    problems += erased_text_problems(history, units, writes)
    if problems:
        problems = [f"core {core}: {p}" for p in problems] + [f"core {core} {line}" for line in layout]
    return problems


def erased_text_problems(
    history: CoreHistory, units: Sequence[MemoryUnit], writes: Sequence[Write]
) -> list[str]:
    """Positions a clear took out of the window that a write sent after the clear's answer stored anyway, and
    stored positions no logged write explains."""
    position = {content: p for p, content in enumerate(history.recorded)}
    unit_ids = {unit.id for unit in units}
    held: dict[Any, set[int]] = defaultdict(set)
    stored_by: dict[int, list[Write]] = defaultdict(list)
    for write in sorted(writes, key=lambda w: w.start):
        if write.collection != UNITS or not write.applied or write.target not in unit_ids:
            continue
        new = {position[c] for c in write.contents if c in position} - held[write.target]
        held[write.target] |= new
        for p in new:
            stored_by[p].append(write)
    problems = []
    stored = {
        position[m.content] for unit in units for m in unit.conversation_messages if m.content in position
    }
    for clear in history.clears:
        back = sorted(
            p for p in clear.positions if p in stored and any(w.start > clear.end for w in stored_by[p])
        )
        if back:
            problems.append(f"erased text came back: {spans(back)} stored by a write sent after the clear")
        unexplained = sorted(p for p in clear.positions if p in stored and not stored_by[p])
        if unexplained:
            problems.append(f"cleared positions {spans(unexplained)} stored by no write the test saw")
    return problems


def _counts(values: Iterable[int]) -> dict[int, int]:
    counts: dict[int, int] = defaultdict(int)
    for value in values:
        counts[value] += 1
    return counts

"""What the position tests share besides the database that logs their writes (``observed.py``): monotonic
clocks a test moves (or that jump at random), and the exactly-once oracle.

The oracle (:func:`storage_problems`) knows, per core, every message recorded in record order (each with a
unique content, so a content is a position), every clear (which positions it took out of the window, and
where its window-emptying write sits among all writes) and every write to the units (as an
:class:`~tests.contract.observed.ObservedDatabase` logged them on its wire). From the stored units it checks,
exactly:

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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from partner_repo import MemorySlice, MemoryUnit, Message
from tests.contract.observed import CORES, UNITS, Write

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

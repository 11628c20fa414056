"""Section 6: partner-repo's per-turn path and reads, against the stores a service would pick instead.

One session grows through each peer (:mod:`benchmarks.peer_drivers`: partner-repo's recommended per-turn
path, langchain-mongodb's chat history, a LangGraph graph checkpointed by ``MongoDBSaver``, raw Motor) on the
scripted server of section 1, counted by the same command-monitoring meter. Every peer stores the same turns
(2 messages of about 200 characters each) and is measured at the same points: partner-repo leads, turn by
turn, to the first roll at or after each target size, so its unit then holds the whole history and its window
only the retained context; the others grow to the same turn through their own API (not measured). There the
reads are measured (median of a few), then the turns of the next whole roll cycle (partner-repo's next roll
included), the same turns for every peer: a turn's figures are the cycle's totals over its turns.

A peer whose package is not installed (the ``bench`` extra) is skipped with the reason; one that fails or
reads back a wrong count is dropped with the reason: no figure of it is reported.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from pymongo import MongoClient

from benchmarks.backends import motor_database, on_servers, server_version
from benchmarks.common import Scale, SectionResult, package_versions
from benchmarks.monitor import WireCost, WireMeter
from benchmarks.peer_drivers import LAST, PEERS, PartnerRepoPeer, Peer, Stores, Turn
from benchmarks.peers_report import section
from benchmarks.workload import conversation
from partner_repo.rolling import RollingConfig

OPERATIONS = {
    "turn": "turn write, amortized over a roll cycle",
    "whole": "whole-history read",
    "last": f"last-{LAST} read",
}
MESSAGE_CHARS = 200
REPEATS = 5
MAX_CYCLE_TURNS = 1_000
INSTALL_HINT = "pip install -e '.[bench]'"


def turn_at(index: int) -> Turn:
    """Turn ``index`` of the session, the same for every peer and run."""
    return conversation(2, seed=100_000 + index, chars=MESSAGE_CHARS)


async def run(scale: Scale) -> list[SectionResult]:
    return await on_servers(lambda uri, backend: _measure(scale, uri, backend))


@asynccontextmanager
async def _stores(uri: str, meter: WireMeter) -> AsyncIterator[Stores]:
    async with motor_database(uri, listeners=[meter]) as database:
        client: Any = MongoClient(uri, tz_aware=True, serverSelectionTimeoutMS=5000, event_listeners=[meter])
        try:
            yield Stores(database, client, database.name)
        finally:
            for suffix in ("langchain", "langgraph"):
                client.drop_database(f"{database.name}_{suffix}")
            client.close()


class _Session:
    """The peers growing one session each, in step, and their figures per operation and stored size."""

    def __init__(self, meter: WireMeter, peers: list[Peer], lost: dict[str, str]) -> None:
        self.meter = meter
        self.peers = peers
        self.lost = lost
        self.position = 0
        self.rolled = False
        self.points: list[dict[str, int]] = []
        self.figures: dict[str, dict[str, dict[str, dict[str, Any]]]] = {
            peer.key: {name: {} for name in OPERATIONS} for peer in peers
        }

    async def measure_at(self, target: int) -> None:
        partner, *others = self.peers
        start = self.position
        while not (self.rolled and self.stored >= target):  # partner-repo leads there (not measured)
            self.rolled = await partner.turn(partner.prepare([turn_at(self.position)]))
            self.position += 1
        grown = _turn_range(start, self.position)
        for peer in others if grown else []:
            await self._guarded(peer, self._grow, grown)
        stored = self.stored
        for peer in list(self.peers):
            await self._guarded(peer, self._reads, stored)
        cycle = await self._cycle(partner)
        for peer in list(self.peers[1:]):
            await self._guarded(peer, self._turns, stored, cycle)
        self.points.append({"target": target, "stored": stored, "cycle_turns": cycle})
        self.position += cycle
        self.rolled = True

    @property
    def stored(self) -> int:
        return 2 * self.position

    async def _grow(self, peer: Peer, turns: list[Turn]) -> None:
        await peer.grow(peer.prepare(turns))

    async def _reads(self, peer: Peer, stored: int) -> None:
        for name, read, expected in (("whole", peer.whole, stored), ("last", peer.last, min(LAST, stored))):
            runs = []
            for _ in range(REPEATS):
                count, cost, cpu = await self._metered(read)
                if count != expected:
                    raise RuntimeError(f"{name} read {count} messages where {expected} are expected")
                runs.append((cost, cpu))
            self.figures[peer.key][name][str(stored)] = {
                "round_trips": statistics.median(c.command_count for c, _ in runs),
                "bytes": statistics.median(c.total_bytes for c, _ in runs),
                "cpu_ms": statistics.median(cpu for _, cpu in runs) * 1e3,
                "commands": runs[0][0].commands,
                "messages": expected,
                "runs": [{**c.as_dict(), "cpu_ms": cpu * 1e3} for c, cpu in runs],
            }

    async def _cycle(self, partner: Peer) -> int:
        """partner-repo's turns from the roll just done to its next roll, measured; how many there were."""
        costs = []
        for index in range(self.position, self.position + MAX_CYCLE_TURNS):
            prepared = partner.prepare([turn_at(index)])
            rolled, cost, cpu = await self._metered(partial(partner.turn, prepared))
            costs.append((cost, cpu))
            if rolled:
                self._record_turns(partner, self.stored, costs)
                return len(costs)
        raise RuntimeError(f"partner-repo did not roll within {MAX_CYCLE_TURNS} turns")

    async def _turns(self, peer: Peer, stored: int, count: int) -> None:
        costs = []
        for index in range(self.position, self.position + count):
            prepared = peer.prepare([turn_at(index)])
            _, cost, cpu = await self._metered(partial(peer.turn, prepared))
            costs.append((cost, cpu))
        self._record_turns(peer, stored, costs)

    def _record_turns(self, peer: Peer, stored: int, costs: list[tuple[WireCost, float]]) -> None:
        count = len(costs)
        self.figures[peer.key]["turn"][str(stored)] = {
            "round_trips": sum(c.command_count for c, _ in costs) / count,
            "bytes": sum(c.total_bytes for c, _ in costs) / count,
            "cpu_ms": sum(cpu for _, cpu in costs) / count * 1e3,
            "commands": dict(Counter(name for c, _ in costs for name in c.commands)),
            "turns": count,
            "per_turn": [{"commands": c.commands, "total_bytes": c.total_bytes} for c, _ in costs],
        }

    async def _metered(self, action: Callable[[], Awaitable[Any]]) -> tuple[Any, WireCost, float]:
        """One measured call: its answer, wire cost and client CPU seconds (a failed command is an error)."""
        self.meter.start()
        started = time.process_time()
        try:
            answer = await action()
        finally:
            cpu = time.process_time() - started
            cost = self.meter.stop()
        if cost.failed:
            raise RuntimeError(f"the server refused {cost.failed}")
        return answer, cost, cpu

    async def _guarded(self, peer: Peer, step: Callable[..., Awaitable[None]], *arguments: Any) -> None:
        """``step(peer, *arguments)``; a failing peer (partner-repo aside) is dropped with the reason."""
        if peer not in self.peers:
            return
        if isinstance(peer, PartnerRepoPeer):
            await step(peer, *arguments)
            return
        try:
            await step(peer, *arguments)
        except Exception as exc:
            self.peers.remove(peer)
            self.figures.pop(peer.key)
            self.lost[peer.key] = f"failed at {self.stored:,} stored messages: {type(exc).__name__}: {exc}"


def _turn_range(start: int, end: int) -> list[Turn]:
    return [turn_at(index) for index in range(start, end)]


def _build(stores: Stores) -> tuple[list[Peer], dict[str, str]]:
    peers: list[Peer] = []
    lost: dict[str, str] = {}
    for kind in PEERS:
        try:
            peers.append(kind(stores))
        except ImportError as exc:
            lost[kind.key] = f"not installed ({exc}); {INSTALL_HINT}"
    return peers, lost


async def _measure(scale: Scale, uri: str, backend: str) -> SectionResult:
    meter = WireMeter()
    async with _stores(uri, meter) as stores:
        peers, lost = _build(stores)
        session = _Session(meter, peers, lost)
        for target in scale.peer_sizes:
            await session.measure_at(target)
        server = await server_version(stores.motor_database)
    return _report(backend, server, session)


def _report(backend: str, server: str | None, session: _Session) -> SectionResult:
    recommended = "RollingService.record_and_roll"
    raw: dict[str, Any] = {
        "server_version": server,
        "messages_per_turn": 2,
        "message_chars": MESSAGE_CHARS,
        "trigger_limit": RollingConfig().trigger_limit,
        "read_repeats": REPEATS,
        "partner_repo_per_turn_call": recommended,
        "operation_titles": OPERATIONS,
        "points": session.points,
        "peers": [
            {
                "key": kind.key,
                "label": kind.label,
                "versions": package_versions(kind.packages),
                "skipped": session.lost.get(kind.key),
                "operations": session.figures.get(kind.key, {}),
            }
            for kind in PEERS
        ],
    }
    result = section(backend, raw)
    targets = ", ".join(f"{p['target']:,} -> {p['stored']:,}" for p in session.points)
    result.notes.append(
        f"one session, turns of 2 messages of {MESSAGE_CHARS} characters; measured at partner-repo's first "
        f"roll at or after each target (target -> stored messages: {targets}), where its unit holds the "
        f"whole history; reads: median of {REPEATS}; a turn: the next whole roll cycle (default "
        f"trigger_limit {raw['trigger_limit']}, its roll included) over its turns, the same for every peer"
    )
    result.notes.append(
        f"partner-repo: {recommended} per turn, whole history = unit load (units.get), last {LAST} = "
        f"units.tail_messages; langchain-mongodb: add_messages, messages, history_size={LAST}; LangGraph: "
        f"one invoke per turn (the user message in, a node answers), get_state (last {LAST}: a slice of it); "
        f"raw Motor: $push/$each, find_one, $slice: -{LAST}; CPU = client process time per operation"
    )
    return result

"""The protocol model check (docs/protocol.md): a Hypothesis state machine over the public operations that
write, three simulated processes with crashes after any write, stalls across lease expiry, summarizer
failures and timeouts (:mod:`protocol_model` says what it explores and which invariants hold after every
step).

The budget here is small: it runs in ``.ci/run`` on the in-memory backend on both driver stacks (well under
a minute each) and, smaller still, on the SecantusDB server (marker ``integration``). The long run raises it
from the environment (docs/testing.md, "The protocol model check"):

    PARTNER_REPO_MODEL_EXAMPLES=200 PARTNER_REPO_MODEL_STEPS=50 PARTNER_REPO_MODEL_MINUTES=30 \\
        pytest tests/contract/test_protocol_model.py -k memory -p no:cacheprovider -s --timeout=0

A counterexample Hypothesis finds is printed as the steps that make it, and becomes a named regression test
in ``tests/contract/test_protocol_findings.py`` or below.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import os
import random
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    get_state_machine_test,
    initialize,
    invariant,
    precondition,
    rule,
)

from partner_repo import RecallIndexer, RollingConfig
from tests.contract.positions_support import storage_problems
from tests.contract.protocol_model import (
    ATTEMPTS,
    CORE_IDS,
    NEAR,
    PROCESSES,
    TRACE,
    TTL,
    Steps,
    World,
    budget,
)

PROCESS = st.integers(0, PROCESSES - 1)
CORE = st.sampled_from(CORE_IDS)
FAULT = st.one_of(
    st.none(),
    st.none(),
    st.none(),
    st.tuples(st.sampled_from(["die", "stall"]), st.integers(1, 6)),
)
SIZES = st.lists(st.sampled_from([0, 0, 0, 40, NEAR - 300, NEAR + 100]), min_size=1, max_size=3)
PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink, Phase.explain)
TOTALS: Counter[str] = Counter()
"""What the runs explored, summed (printed at the end)."""


async def record_and_index(process: Any, core_id: str, messages: Any, at: Any) -> Any:
    """A turn recorded and rolled, and the roll indexed for recall by the same process right after (the
    MCP server's ``record_turn``): the index write races erasures with no ``on_erased`` to follow it."""
    rolled = await process.service.record_and_roll(core_id, messages, at=at)
    if rolled is not None:
        await RecallIndexer(process.db).consume(rolled)
    return rolled


def traced(step: Any) -> Any:
    """With ``PARTNER_REPO_MODEL_TRACE=1``, print each rule as it runs, with its arguments (messages'
    sizes, faults): a failure that does not replay is read from the trace of the run that met it."""

    @functools.wraps(step)
    def run(self: ProtocolMachine, **arguments: Any) -> Any:
        if TRACE:
            shown = ", ".join(f"{name}={value!r}" for name, value in arguments.items())
            print(f"rule: {step.__name__}({shown})", flush=True)
        return step(self, **arguments)

    return run


class ProtocolMachine(RuleBasedStateMachine):
    """See :mod:`protocol_model`; ``backend`` is set by the test that runs it."""

    backend = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.world: World | None = None
        self.steps: Steps | None = None

    def do(self, work: Any) -> Any:
        return self.loop.run_until_complete(work)

    @initialize(
        divisor=st.sampled_from([0, 1, 6]),
        unit_limit=st.sampled_from([1, 700, 5000]),
        trigger=st.integers(2, 6),
    )
    @traced
    def build(self, divisor: int, unit_limit: int, trigger: int) -> None:
        config = RollingConfig(
            trigger_limit=trigger,
            trigger_bytes=NEAR,
            retain_divisor=divisor,
            unit_soft_limit_bytes=unit_limit,
            lease_duration=TTL,
            idle_after=timedelta(hours=1),
            summarize_timeout=timedelta(milliseconds=20),
            summarize_attempts=ATTEMPTS,
            summarize_backoff=timedelta(0),
        )
        self.world = self.do(World.open(self.backend, config))
        self.steps = Steps(self.world)

    @property
    def ready(self) -> tuple[World, Steps]:
        assert self.world is not None and self.steps is not None
        return self.world, self.steps

    # -- the operations ------------------------------------------------------------------------------------

    @rule(
        p=PROCESS,
        core_id=CORE,
        count=st.integers(1, 3),
        sizes=SIZES,
        how=st.sampled_from(
            ["record", "record_and_roll", "record_and_roll", "record_and_roll_later", "record_and_index"]
        ),
        fault=FAULT,
    )
    @traced
    def record(self, p: int, core_id: str, count: int, sizes: list[int], how: str, fault: Any) -> None:
        world, steps = self.ready
        messages, at = world.messages(core_id, count, sizes), world.now
        if how == "record":
            operation: Any = lambda process: process.cores.record(core_id, messages, at=at)  # noqa: E731
        elif how == "record_and_roll":
            operation = lambda process: process.service.record_and_roll(core_id, messages, at=at)  # noqa: E731
        elif how == "record_and_index":  # the MCP server's: its own roll indexed in process
            operation = lambda process: record_and_index(process, core_id, messages, at)  # noqa: E731
        else:
            operation = lambda process: process.service.record_and_roll_later(core_id, messages, at=at)  # noqa: E731
        self.do(steps.run(p, operation, fault))

    @rule(p=PROCESS, core_id=CORE, refresh=st.booleans(), fault=FAULT)
    @traced
    def roll(self, p: int, core_id: str, refresh: bool, fault: Any) -> None:
        world, steps = self.ready
        now = world.now
        self.do(
            steps.run(
                p, lambda process: process.service.roll(core_id, refresh_session=refresh, now=now), fault
            )
        )

    @rule(p=PROCESS, fault=FAULT)
    @traced
    def idle_roll(self, p: int, fault: Any) -> None:
        world, steps = self.ready
        self.do(world.scan())
        before, now = set(world.stored_contents), world.now

        async def only_new(outcome: Any) -> None:
            for result in outcome if isinstance(outcome, list) else []:
                if not {m.content for m in result.increment_messages} - before:
                    world.surprises.append(
                        f"an idle roll of {result.core_id} stored only what was stored before"
                    )

        self.do(steps.run(p, lambda process: process.service.roll_idle(now=now), fault, on_done=only_new))

    @rule(p=PROCESS, core_id=CORE, fault=FAULT)
    @traced
    def clear(self, p: int, core_id: str, fault: Any) -> None:
        self.do(self.ready[1].clear(p, core_id, fault))

    @rule(p=PROCESS, core_id=CORE, fault=FAULT)
    @traced
    def forget(self, p: int, core_id: str, fault: Any) -> None:
        self.do(self.ready[1].forget(p, core_id, fault))

    @rule(p=PROCESS, fault=FAULT)
    @traced
    def resummarize(self, p: int, fault: Any) -> None:
        steps = self.ready[1]

        async def again(process: Any) -> Any:
            process.summarizer.resummarizing = True
            try:
                return await process.service.resummarize()
            finally:
                process.summarizer.resummarizing = False

        self.do(steps.run(p, again, fault))

    @rule(p=PROCESS, group=st.sampled_from(["g1", "g2"]), fault=FAULT, fail=st.booleans())
    @traced
    def deliver(self, p: int, group: str, fault: Any, fail: bool) -> None:
        self.do(self.ready[1].deliver(p, group, fault, fail and fault is None))

    @rule(p=PROCESS, core_id=st.none() | CORE, fault=FAULT)
    @traced
    def reindex(self, p: int, core_id: str | None, fault: Any) -> None:
        self.do(self.ready[1].reindex(p, core_id, fault))

    @rule(p=PROCESS, core_id=CORE, fault=FAULT)
    @traced
    def import_state(self, p: int, core_id: str, fault: Any) -> None:
        self.do(self.ready[1].import_state(p, core_id, fault))

    # -- faults and time -----------------------------------------------------------------------------------

    @rule(p=PROCESS, kind=st.sampled_from(["fail", "hang"]), count=st.integers(1, 2))
    @traced
    def summarizer_trouble(self, p: int, kind: str, count: int) -> None:
        self.ready[0].processes[p].summarizer.trouble += [kind] * count

    @rule()
    @traced
    def time_passes(self) -> None:
        world, _ = self.ready
        world.now += timedelta(hours=1, minutes=1)
        for process in world.processes:
            process.clock.now += TTL.total_seconds()

    @precondition(lambda self: self.world is not None and any(p.pending for p in self.world.processes))
    @rule(p=PROCESS, dies=st.booleans())
    @traced
    def thaw(self, p: int, dies: bool) -> None:
        world, steps = self.ready
        process = world.processes[p]
        if process.pending is None:
            return
        if dies:  # the frozen process is killed instead: nothing of it runs again
            process.db.dead = True
        self.do(steps.thaw(p))

    # -- the invariants ------------------------------------------------------------------------------------

    @invariant()
    def the_promise_holds(self) -> None:
        if self.world is None:
            return
        problems = self.do(asyncio.wait_for(self.world.problems(), 60))
        assert not problems, "\n".join(problems[:30])

    def teardown(self) -> None:
        if TRACE:
            print("teardown", flush=True)
        try:
            if self.world is not None:
                problems = self.do(asyncio.wait_for(settle(self.world, self.ready[1]), 120))
                assert not problems, "once faults stop:\n" + "\n".join(problems[:30])
        finally:
            if self.world is not None:
                TOTALS.update(self.world.seen)
                TOTALS["examples"] += 1
                self.do(self.world.close())
            self.loop.close()


async def settle(world: World, steps: Steps) -> list[str]:
    """Faults stop: stalled processes go on, unfinished erasures finish, every core's window is stored by
    one ``record_and_roll`` and a roll (no core is wedged), every group delivers every slice."""
    for number, process in enumerate(world.processes):
        if process.pending is not None:
            await steps.thaw(number)
    for core_id in CORE_IDS:
        if await world.erasing(core_id):
            await steps.forget(0, core_id, None)
    problems = list(await world.problems())
    for core_id in CORE_IDS:
        generation = world.generations[core_id]
        if await world.erasing(core_id):
            problems.append(f"core {core_id}: its erasure did not finish once faults stopped")
            continue
        turn = world.messages(core_id, 2, [0])
        if world.processes[0].db.dead:  # died in a background roll after its last step
            world.processes[0] = world.spawn(0, world.processes[0].generation + 1)
        process = world.processes[0]
        # record_and_roll, not a plain record: a window near its size limit refuses a plain record
        # (documented) where record_and_roll makes room for the turn; a core still refusing it is wedged
        await process.service.record_and_roll(core_id, turn, at=world.now)
        for _ in range(8):  # the leases of dead processes lapse on this process's clock
            if await process.service.roll(core_id, now=world.now) is not None:
                break
        units = (await world.scan())[core_id]
        problems += storage_problems(
            generation.history,
            units,
            world.wire.writes,
            shortened=generation.shortened or core_id in world.refused,
        )
    for group in ("g1", "g2"):
        await steps.deliver(0, group, None, False)
    return problems + world.surprises


def run_model(backend: str, examples: int, steps: int) -> None:
    """Explore ``examples`` runs of up to ``steps`` steps; with ``PARTNER_REPO_MODEL_MINUTES``, batches of
    that many (each with fresh random choices, its seed printed) until the minutes are over. Prints what was
    explored. ``PARTNER_REPO_MODEL_SEED`` replays a batch whose seed a long run printed."""
    ProtocolMachine.backend = backend
    minutes = float(os.environ.get("PARTNER_REPO_MODEL_MINUTES", "0"))
    chosen = os.environ.get("PARTNER_REPO_MODEL_SEED")
    deadline = time.monotonic() + 60 * minutes
    started, batches = time.monotonic(), 0
    TOTALS.clear()
    # built once: Hypothesis digests the machine's source (ast.parse) each time one is built, and on
    # CPython 3.11 a long run met a spurious "AST constructor recursion depth mismatch" there (gh-106905):
    # a finalizer that formats a traceback during that parse (asyncio logging a task an earlier test left)
    # breaks it, so such garbage is collected first
    gc.collect()
    test = get_state_machine_test(
        ProtocolMachine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
            print_blob=True,
            derandomize=not (minutes or chosen),  # CI explores the same runs every time
            phases=PHASES if budget("PARTNER_REPO_MODEL_SHRINK", 1) else PHASES[:-2],
        ),
    )
    while True:
        if minutes or chosen:
            batch_seed = int(chosen) if chosen and not batches else random.getrandbits(64)
            print(f"protocol model on {backend}: batch {batches + 1}, PARTNER_REPO_MODEL_SEED={batch_seed}")
            test = seed(batch_seed)(test)
        test()
        batches += 1
        if time.monotonic() >= deadline:
            break
    took = time.monotonic() - started
    print(
        f"protocol model on {backend}: {batches} batch(es), {TOTALS['examples']} runs, "
        f"{TOTALS['steps']} steps in {took:.0f} s; faults and outcomes: {dict(sorted(TOTALS.items()))}"
    )


def test_the_protocol_holds_under_every_explored_interleaving_in_memory() -> None:
    """See the module docstring; the short budget of ``.ci/run``."""
    run_model("memory", budget("PARTNER_REPO_MODEL_EXAMPLES", 40), budget("PARTNER_REPO_MODEL_STEPS", 30))


@pytest.mark.integration
def test_the_protocol_holds_under_every_explored_interleaving_on_a_server() -> None:
    """The same on the server ``MONGODB_URI`` names (SecantusDB in ``.ci/run``), with a smaller budget."""
    from tests.conftest import requires_mongodb

    requires_mongodb()
    run_model(
        "mongodb", budget("PARTNER_REPO_MODEL_SERVER_EXAMPLES", 6), budget("PARTNER_REPO_MODEL_STEPS", 15)
    )


def model_config() -> RollingConfig:
    return RollingConfig(
        trigger_limit=2,
        trigger_bytes=NEAR,
        retain_divisor=0,
        lease_duration=TTL,
        idle_after=timedelta(hours=1),
        summarize_attempts=ATTEMPTS,
        summarize_backoff=timedelta(0),
    )


async def test_a_turn_recorded_after_a_stalled_forget_deleted_the_core_is_kept_and_stored_once() -> None:
    """The generation a forget erases ends when its delete of the core lands, not when the forget returns:
    a turn recorded after that delete goes into a core the record creates anew, and the library keeps it
    (the long runs took it as forgotten while the forget was stalled: "a unit holds forgotten messages")."""
    world = await World.open("memory", model_config())
    steps = Steps(world)
    try:

        async def turn(core_id: str) -> None:
            messages = world.messages(core_id, 2, [0])
            await steps.run(0, lambda p: p.service.record_and_roll(core_id, messages, at=world.now), None)

        await turn("c0")
        deleted: list[bool] = []

        def after_the_core_is_deleted(sent: Any) -> bool:
            if sent.collection == "memory_cores" and sent.method == "find_one_and_delete":
                deleted.append(True)
                return False
            return bool(deleted)

        world.processes[1].db.stall_before(after_the_core_is_deleted)
        await steps.forget(1, "c0", None)
        assert world.processes[1].pending is not None and deleted
        await turn("c0")
        await steps.thaw(1)

        assert await world.problems() == []
        assert not await world.erasing("c0")
        stored = {m.content for unit in (await world.scan())["c0"] for m in unit.conversation_messages}
        assert stored == set(world.generations["c0"].history.recorded) != set()
    finally:
        await world.close()


async def test_a_clear_stalled_after_emptying_the_window_is_not_taken_for_later_turns() -> None:
    """A clear takes the messages its emptying write found, not the last ones recorded when it returns: a
    clear stalled before giving its hold back (the window already emptied), thawed after more turns, took
    those turns for cleared in the long run's bookkeeping ("cleared messages back in the window")."""
    world = await World.open("memory", model_config())
    steps = Steps(world)
    try:
        first = world.messages("c0", 2, [0])
        await steps.run(1, lambda p: p.cores.record("c0", first, at=world.now), None)
        await steps.clear(0, "c0", ("stall", 4))  # its hold, the mark, the emptying write; not its release
        assert world.processes[0].pending is not None
        later = world.messages("c0", 2, [0])
        await steps.run(1, lambda p: p.cores.record("c0", later, at=world.now), None)
        await steps.thaw(0)

        assert world.processes[0].pending is None
        assert await world.problems() == []
        assert world.cleared_done == {m.content for m in first}
    finally:
        await world.close()

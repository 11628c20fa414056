"""The stores the peers section compares, each driven through its own documented API.

Every peer keeps one conversation session and offers the same four things: ``prepare`` (turns of
:class:`~partner_repo.Message` in the peer's own message type, never measured: an application already holds
its messages in that type), ``turn`` (one turn through the peer's per-turn path), ``grow`` (many turns at once
through the same API, to reach a size without measuring) and the two reads. langchain-mongodb and LangGraph
are optional (``pip install -e '.[bench]'``): their modules are imported only when their peer is built, and a
missing one raises :class:`ImportError` there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from benchmarks.backends import DRIVER_NAME
from partner_repo import MemoryCoreRepository, MemoryUnitRepository, Message, RollingResult
from partner_repo.mongo import driver
from partner_repo.rolling import ExtractiveSummarizer, RollingConfig, RollingService

SESSION = "peer-session"
LAST = 20
"""How many messages the recent-history read asks for."""
Turn = Sequence[Message]


@dataclass(frozen=True)
class Stores:
    """Where the peers keep their session: the Motor database of the run and, for the peers built on
    synchronous PyMongo, a ``MongoClient`` with the same command listener and a database name prefix."""

    motor_database: Any
    sync_client: Any
    sync_prefix: str


class Peer:
    """One store driven through its own API; ``turn`` answers True when the turn ended with a roll."""

    key = ""
    label = ""
    packages: tuple[str, ...] = ()

    def __init__(self, stores: Stores) -> None:
        """Open the peer's session on ``stores`` (:class:`ImportError` when its package is missing)."""

    def prepare(self, turns: Sequence[Turn]) -> Any:
        return [message for turn in turns for message in turn]

    async def grow(self, prepared: Any) -> None:
        await self.turn(prepared)

    async def turn(self, prepared: Any) -> bool:
        result = await self._service.record_and_roll(SESSION, prepared)
        if result is not None:
            self._unit_id = result.memory_unit.id
        return result is not None

    async def whole(self) -> int:
        """Read the whole history; returns how many messages it holds."""
        raise NotImplementedError

    async def last(self) -> int:
        """Read the last :data:`LAST` messages; returns how many came back."""
        raise NotImplementedError


class PartnerRepoPeer(Peer):
    """The per-turn path the README recommends for a service, and the session unit's reads."""

    key = "partner-repo"
    label = "partner-repo RollingService"
    packages = ("partner-repo",)

    def __init__(self, stores: Stores) -> None:
        database = stores.motor_database
        self._cores = MemoryCoreRepository(database)
        self._units = MemoryUnitRepository(database)
        self._service = RollingService(database, ExtractiveSummarizer(), RollingConfig())
        self._unit_id: str | None = None

    async def grow(self, prepared: Any) -> None:
        raise NotImplementedError("partner-repo grows turn by turn: its rolls decide the cycles")

    async def turn(self, prepared: Any) -> bool:
        result = await self._record_and_roll(prepared)
        if result is not None:
            self._unit_id = result.memory_unit.id
        return result is not None

    async def _record_and_roll(self, messages: list[Message]) -> RollingResult | None:
        # TODO(issue 12): call record_and_roll alone once it is on this branch; until then, the two calls it
        # replaces.
        record_and_roll = getattr(self._service, "record_and_roll", None)
        if record_and_roll is not None:
            result: RollingResult | None = await record_and_roll(SESSION, messages)
            return result
        await self._cores.record(SESSION, messages)
        return await self._service.maybe_roll(SESSION)

    async def whole(self) -> int:
        unit = await self._units.get(self._rolled_unit())
        return 0 if unit is None else len(unit.conversation_messages)

    async def last(self) -> int:
        return len(await self._units.tail_messages(self._rolled_unit(), LAST))

    def _rolled_unit(self) -> str:
        if self._unit_id is None:
            raise RuntimeError(
                "partner-repo is read after a roll only, when its unit holds the whole history"
            )
        return self._unit_id


class RawDriverPeer(Peer):
    """The floor: the session as one document, a turn as one ``$push``/``$each``, with the stack's driver."""

    key = "raw-driver"
    label = f"raw {DRIVER_NAME} $push"
    packages = ("motor",) if driver.STACK == "motor" else ("pymongo",)

    def __init__(self, stores: Stores) -> None:
        self._sessions = stores.motor_database["peer_raw_sessions"]

    def prepare(self, turns: Sequence[Turn]) -> Any:
        return [{"role": m.role, "content": m.content} for turn in turns for m in turn]

    async def turn(self, prepared: Any) -> bool:
        await self._sessions.update_one(
            {"_id": SESSION}, {"$push": {"messages": {"$each": prepared}}}, upsert=True
        )
        return False

    async def whole(self) -> int:
        document = await self._sessions.find_one({"_id": SESSION})
        return len((document or {}).get("messages") or [])

    async def last(self) -> int:
        document = await self._sessions.find_one({"_id": SESSION}, {"messages": {"$slice": -LAST}})
        return len((document or {}).get("messages") or [])


def _langchain_messages(turns: Sequence[Turn]) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage

    kinds = {"user": HumanMessage, "assistant": AIMessage}
    return [kinds[m.role](content=m.content) for turn in turns for m in turn]


class LangChainPeer(Peer):
    """langchain-mongodb's ``MongoDBChatMessageHistory`` (one document per message)."""

    key = "langchain-mongodb"
    label = "langchain-mongodb MongoDBChatMessageHistory"
    packages = ("langchain-mongodb", "langchain-core")

    def __init__(self, stores: Stores) -> None:
        from langchain_mongodb import MongoDBChatMessageHistory

        database = f"{stores.sync_prefix}_langchain"
        history = partial(MongoDBChatMessageHistory, None, SESSION, database, client=stores.sync_client)
        self._history = history()
        self._recent = history(history_size=LAST, create_index=False)

    def prepare(self, turns: Sequence[Turn]) -> Any:
        return _langchain_messages(turns)

    async def turn(self, prepared: Any) -> bool:
        self._history.add_messages(prepared)
        return False

    async def whole(self) -> int:
        return len(self._history.messages)

    async def last(self) -> int:
        return len(self._recent.messages)


class LangGraphPeer(Peer):
    """A LangGraph ``MessagesState`` graph checkpointed by ``MongoDBSaver``: one ``invoke`` a turn, with the
    user's message as input and a node that answers with the turn's assistant message (the model's place)."""

    key = "langgraph"
    label = "LangGraph MongoDBSaver"
    packages = ("langgraph", "langgraph-checkpoint-mongodb", "langgraph-checkpoint")

    def __init__(self, stores: Stores) -> None:
        from langgraph.checkpoint.mongodb import MongoDBSaver
        from langgraph.graph import END, START, MessagesState, StateGraph

        saver = MongoDBSaver(stores.sync_client, db_name=f"{stores.sync_prefix}_langgraph")
        self._replies: list[Any] = []

        def model(state: MessagesState) -> dict[str, list[Any]]:
            return {"messages": [self._replies.pop()]}

        builder = StateGraph(MessagesState)
        builder.add_node("model", model)
        builder.add_edge(START, "model")
        builder.add_edge("model", END)
        self._graph = builder.compile(checkpointer=saver)
        self._config: Any = {"configurable": {"thread_id": SESSION}}

    def prepare(self, turns: Sequence[Turn]) -> Any:
        if turns[0][0].role != "user" or turns[-1][-1].role != "assistant":
            raise ValueError("a LangGraph turn starts with the user and ends with the assistant's answer")
        return _langchain_messages(turns)

    async def turn(self, prepared: Any) -> bool:
        # Every message but the last is input; the node answers with the last (many turns grow in one invoke).
        self._replies.append(prepared[-1])
        self._graph.invoke({"messages": prepared[:-1]}, self._config)
        return False

    async def whole(self) -> int:
        return len(self._state())

    async def last(self) -> int:
        # A checkpoint is read whole: the recent messages are a slice of the state.
        return len(self._state()[-LAST:])

    def _state(self) -> list[Any]:
        messages: list[Any] = self._graph.get_state(self._config).values["messages"]
        return messages


PEERS: tuple[type[Peer], ...] = (PartnerRepoPeer, LangChainPeer, LangGraphPeer, RawDriverPeer)
"""In table order; partner-repo first: the others are compared with it."""

"""The one driver adapter: every call whose shape differs between Motor and PyMongo's async API goes here.

partner-repo runs on either stack, chosen by the Beanie the application has installed (the two Beanies
cannot be installed together): **Beanie 2 + PyMongo async** (``pymongo.AsyncMongoClient``, the default of a
plain ``pip install``) or **Beanie 1 + Motor** (``partner-repo[motor]``; Motor reached end of life on
2026-05-14). Most of the two APIs are the same coroutine methods; the differences the library meets are
few, and each has one function here:

======================  ==================================  ======================================
call                    Motor                               PyMongo async
======================  ==================================  ======================================
``aggregate``           returns a cursor                    a coroutine that returns one
``watch``               returns a stream                    a coroutine that returns one
``start_session``       a coroutine                         returns the session
``start_transaction``   returns a context manager           a coroutine that returns one
``client.close``        returns None                        a coroutine
Beanie's collection     ``get_motor_collection()``          ``get_pymongo_collection()``
======================  ==================================  ======================================

Each function accepts either kind of object (awaiting only what is awaitable), so a database of the other
kind, an application's own client, or a test wrapper works too. The drivers are imported here only (a test
checks that no other module names them or calls these methods directly).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal, ParamSpec, TypeVar

from pymongo import ReturnDocument
from pymongo.errors import ConnectionFailure, PyMongoError

from partner_repo.errors import ConflictError, ConnectionFailed, OperationTimedOut, PartnerRepoError

Stack = Literal["pymongo", "motor"]


def installed_stack() -> Stack:
    """The stack the installed Beanie runs on: Beanie 1 on Motor, Beanie 2 on PyMongo's async API."""
    try:
        major = int(importlib.metadata.version("beanie").split(".", 1)[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        major = 2
    return "motor" if major < 2 else "pymongo"


STACK: Stack = installed_stack()
"""The stack of this installation (fixed by what is installed, so read once)."""


def stack_description() -> str:
    """One line naming the stack and its versions, for ``partner-repo --version`` and bug reports."""
    versions = ", ".join(
        f"{name} {_version(name)}" for name in ("beanie", "pymongo", "motor") if _version(name)
    )
    return f"{STACK} stack ({versions})"


def new_client(uri: str, **options: Any) -> Any:
    """The installed stack's client for ``uri`` (``AsyncMongoClient`` or ``AsyncIOMotorClient``)."""
    if STACK == "motor":
        motor: Any = importlib.import_module("motor.motor_asyncio")
        return motor.AsyncIOMotorClient(uri, **options)
    pymongo: Any = importlib.import_module("pymongo")
    return pymongo.AsyncMongoClient(uri, **options)


def in_memory_client(**options: Any) -> Any:
    """A client of the embedded in-memory backend (mongomock underneath) in the installed stack's shape:
    mongomock-motor's on the Motor stack when it is installed, :mod:`partner_repo.mongo._embedded`
    otherwise."""
    if STACK == "motor" and importlib.util.find_spec("mongomock_motor") is not None:
        mongomock_motor: Any = importlib.import_module("mongomock_motor")
        return mongomock_motor.AsyncMongoMockClient(**options)
    from partner_repo.mongo._embedded import EmbeddedClient

    return EmbeddedClient(**options)


def is_client(value: Any) -> bool:
    """Whether ``value`` is a client (of either driver, or the in-memory backend) rather than a database.

    Asked of the class: both drivers' clients answer any attribute with a database of that name."""
    kind = type(value)
    return (
        callable(getattr(kind, "get_database", None)) and getattr(kind, "list_collection_names", None) is None
    )


def unusable_with_installed_beanie(value: Any) -> str | None:
    """Why the installed Beanie cannot bind documents to ``value`` (a client or database), or None.

    Beanie 1 binds to either driver's database; Beanie 2 only to PyMongo's async one (its ``init_beanie``
    calls methods Motor does not have)."""
    if STACK == "pymongo" and type(value).__module__.startswith("motor"):
        return (
            "Beanie 2 runs on PyMongo's async API only: pass a pymongo.AsyncMongoClient (or its database), "
            "not a Motor one, or install Beanie 1 (partner-repo[motor])"
        )
    return None


def is_database(value: Any) -> bool:
    """Whether ``value`` is a database (of either driver, the in-memory backend, or a test wrapper)."""
    return callable(getattr(type(value), "list_collection_names", None)) or (
        callable(getattr(type(value), "__getitem__", None)) and hasattr(value, "client")
    )


async def _resolved(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def aggregate(collection: Any, pipeline: Sequence[Mapping[str, Any]], **options: Any) -> Any:
    """The cursor of an aggregation (iterate it with ``async for`` or read it with ``to_list``).

    mongomock-motor's collection runs mongomock's ``aggregate`` as it is; it gets the embedded backend's
    leading-``$match`` read, as the PyMongo stack's does (:func:`partner_repo.mongo._embedded.aggregate`),
    so the two stacks' in-memory backends cost the same."""
    if any(base.__module__.startswith("mongomock_motor") for base in type(collection).__mro__):
        from partner_repo.mongo._embedded import EmbeddedCursor
        from partner_repo.mongo._embedded import aggregate as embedded_aggregate

        mongomock_collection = collection.database.delegate[collection.name]
        return EmbeddedCursor(embedded_aggregate(mongomock_collection, list(pipeline)))
    return await _resolved(collection.aggregate(list(pipeline), **options))


async def aggregate_list(
    collection: Any, pipeline: Sequence[Mapping[str, Any]], length: int | None = None, **options: Any
) -> list[Any]:
    """The documents of an aggregation (at most ``length``)."""
    cursor = await aggregate(collection, pipeline, **options)
    return list(await cursor.to_list(length=length))


async def bulk_write(collection: Any, requests: Sequence[Any], *, ordered: bool = True) -> Any:
    """PyMongo's ``bulk_write`` of ``requests`` (``UpdateOne``, ``ReplaceOne``, ``DeleteMany``...): one round
    trip, its ``BulkWriteResult``, or its ``BulkWriteError`` (an ordered batch stops at its first error).

    mongomock-motor's ``bulk_write`` is mongomock's, which cannot take PyMongo 4.9+'s requests as they are:
    there they go in the form the embedded backend hands to mongomock on the PyMongo stack too
    (:func:`partner_repo.mongo._embedded.mongomock_requests`)."""
    if _is_mongomock_motor(collection):
        from partner_repo.mongo._embedded import mongomock_requests

        requests = mongomock_requests(requests)
    return await _resolved(collection.bulk_write(list(requests), ordered=ordered))


async def upserted(collection: Any, key: Any, update: Mapping[str, Any]) -> dict[str, Any]:
    """The document with ``_id`` ``key`` after an upsert of ``update`` (findAndModify, ``upsert: true``, the
    new document returned): for writes that keep one document per key, such as a group's checkpoint or a
    dead letter.

    MongoDB answers it with the document, whoever wins a race to create it (an equality on ``_id`` alone: the
    server retries a losing insert as an update). A server that answers with no document (SecantusDB does for
    some racing upserts, after updating the document: tests/emulator_gaps.py) gets the document read back;
    one that holds no document then is refused with :class:`ConflictError`, never a ``TypeError``."""
    document = await collection.find_one_and_update(
        {"_id": key}, dict(update), upsert=True, return_document=ReturnDocument.AFTER
    )
    if document is None:
        document = await collection.find_one({"_id": key})
    if document is None:
        raise ConflictError(
            f"{getattr(collection, 'name', 'a collection')}: the upsert of {key!r} stored nothing"
        )
    return dict(document)


def _is_mongomock_motor(collection: Any) -> bool:
    """Whether ``collection`` is mongomock-motor's (its classes take Motor's names, so only their bases tell),
    or a wrapper forwarding to one through its ``database`` (as the tests' fault injectors do)."""
    for candidate in (collection, getattr(collection, "database", None)):
        if any(base.__module__.startswith("mongomock_motor") for base in type(candidate).__mro__):
            return True
    return False


async def watch(collection: Any, pipeline: Sequence[Mapping[str, Any]] | None = None, **options: Any) -> Any:
    """A change stream on ``collection``, to use with ``async with`` (PyMongo's async driver sends the
    aggregate that opens it here, Motor when it is entered: a refusal can come from either)."""
    return await _resolved(collection.watch(None if pipeline is None else list(pipeline), **options))


async def start_session(client: Any, **options: Any) -> Any:
    """A session of ``client`` (end it with :func:`end_session`, or use it as ``async with``).

    A Motor client's session is started on the PyMongo client it wraps: Motor would start (and end) it on
    its thread pool, while PyMongo's own session does no I/O to start or end. The Motor session is taken
    only where a transaction needs it (:func:`transaction_session`)."""
    if _is_motor_client(client):
        return client.delegate.start_session(**options)
    return await _resolved(client.start_session(**options))


async def transaction_session(client: Any) -> Any:
    """A session of ``client`` to run a transaction in (``async with`` it, then :func:`transaction`)."""
    return await _resolved(client.start_session())


def _is_motor_client(client: Any) -> bool:
    if STACK != "motor":
        return False
    motor: Any = importlib.import_module("motor.motor_asyncio")
    return isinstance(client, motor.AsyncIOMotorClient)


async def end_session(session: Any) -> None:
    """End ``session`` (Motor ends it with a coroutine, PyMongo's async session too)."""
    await _resolved(session.end_session())


@asynccontextmanager
async def transaction(session: Any, **options: Any) -> AsyncIterator[Any]:
    """Run the block in a transaction of ``session``: committed when it ends, aborted when it raises."""
    context = await _resolved(session.start_transaction(**options))
    async with context:
        yield session


async def close_client(client: Any) -> None:
    """Close ``client``'s pools and monitors (Motor closes synchronously, PyMongo's async client awaits)."""
    await _resolved(client.close())


def client_of(database: Any) -> Any:
    """The client behind ``database`` (None for an object without one, such as a test double)."""
    return getattr(database, "client", None)


def document_collection(document: type[Any]) -> Any:
    """The collection Beanie bound ``document`` to (after ``init_beanie``)."""
    getter = getattr(document, "get_pymongo_collection", None) or document.get_motor_collection
    return getter()


P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C", bound=type)


def timeouts_surface_as_project_errors(cls: C) -> C:
    """Make each public coroutine method of ``cls`` raise the library's errors where the driver fails to
    reach the server (:func:`project_error`), the driver's error chained. For the front doors (repositories,
    services) an application catches errors of: the one translation, on either stack."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and inspect.iscoroutinefunction(member):
            setattr(cls, name, surfacing_driver_errors(member, f"{cls.__name__}.{name}"))
    return cls


def project_error(exc: PyMongoError, what: str) -> PartnerRepoError | None:
    """The library's error for what the driver raised while ``what`` ran, or None (the server answered; the
    caller's own handling applies): a timeout of any kind (``PyMongoError.timeout``: the operation timeout,
    server selection, a network timeout) is :class:`OperationTimedOut`; any other failure of the connection
    (``ConnectionFailure``: a network error, a connection reset, an operation the driver cancelled because
    its server went away, ``_OperationCancelled`` among them, private classes included) is
    :class:`ConnectionFailed`. Either way the outcome of a write is unknown; the library's writes are fenced,
    safe to send again."""
    if exc.timeout:
        return OperationTimedOut(f"{what}: MongoDB did not answer in time ({first_line(exc)[:200]})")
    if isinstance(exc, ConnectionFailure):
        return ConnectionFailed(f"{what}: the connection to MongoDB failed ({first_line(exc)[:200]})")
    return None


def surfacing_driver_errors(method: Callable[P, Awaitable[R]], what: str) -> Callable[P, Awaitable[R]]:
    """``method`` with :func:`project_error`'s translation."""

    @functools.wraps(method)
    async def surfacing(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(*args, **kwargs)
        except PyMongoError as exc:
            translated = project_error(exc, what)
            if translated is None:
                raise
            raise translated from exc

    return surfacing


def first_line(exc: BaseException) -> str:
    """The driver's reason in one short line: its first line, without the topology dump pymongo appends."""
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    for tail in (", Timeout:", " (configured timeouts:", ", Topology Description:"):
        line = line.split(tail, 1)[0]
    return line


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


__all__ = [
    "STACK",
    "Stack",
    "aggregate",
    "aggregate_list",
    "bulk_write",
    "client_of",
    "close_client",
    "document_collection",
    "end_session",
    "first_line",
    "in_memory_client",
    "installed_stack",
    "is_client",
    "is_database",
    "new_client",
    "project_error",
    "stack_description",
    "start_session",
    "surfacing_driver_errors",
    "timeouts_surface_as_project_errors",
    "transaction",
    "transaction_session",
    "unusable_with_installed_beanie",
    "upserted",
    "watch",
]

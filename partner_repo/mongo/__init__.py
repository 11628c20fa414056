"""Everything that talks to MongoDB: the driver adapter, the embedded backend, connections, indexes, topology.

This package is the driver boundary. Nothing else in partner-repo imports PyMongo, Motor or mongomock (an
import-linter contract checks it): the rest of the library asks this front module, and only it.

- ``driver`` (``_driver``): the one adapter for the calls whose shape differs between PyMongo's async API and
  Motor (``aggregate``, ``watch``, sessions, transactions, closing a client, Beanie's collection getter), and
  the stack's client and in-memory client; ``_embedded`` is the in-memory backend in PyMongo's async shape.
- ``_connection``: the one connection policy (client defaults, URI precedence, database names).
- ``_database``: opening a database, binding the Beanie documents to it, creating the indexes, closing it.
- ``_indexes``: every index the library relies on (``ALL_INDEXES``), and the shard key each collection may
  have (``SHARD_KEYS``).
- ``_topology``: what kind of deployment a database is on, and the indexes a sharded collection cannot have.
- ``_storage``: how units are laid out beyond the model: derived fields, tombstones, BSON sizes.
- ``_masking``: credentials masked in connection strings and in any text that may quote one.

It sits above the models (it binds them and lays them out) and below every repository.
"""

# The driver's own vocabulary the repositories use: sort orders, return-document choices, read concerns, the
# requests of a bulk write, the error classes they catch and BSON's binary values (recall's vectors), named
# here so that the driver stays behind this front module.
from bson.binary import Binary, BinaryVectorDtype
from pymongo import ASCENDING, DESCENDING, DeleteMany, ReadPreference, ReplaceOne, ReturnDocument, UpdateOne
from pymongo.errors import (
    BulkWriteError,
    ConfigurationError,
    ConnectionFailure,
    DocumentTooLarge,
    DuplicateKeyError,
    InvalidOperation,
    OperationFailure,
    PyMongoError,
)
from pymongo.read_concern import ReadConcern

from partner_repo.mongo import _driver as driver
from partner_repo.mongo._connection import (
    DEFAULT_DATABASE,
    DEFAULTS,
    URI_SCHEMES,
    database_name_problem,
    uri_database,
)
from partner_repo.mongo._database import (
    DOCUMENT_MODELS,
    Connecting,
    Database,
    MongoDatabase,
    close_database,
    connect,
    ensure_indexes,
    in_memory_database,
    init_repository,
)
from partner_repo.mongo._indexes import (
    ALL_INDEXES,
    CHECKPOINTS,
    CORES,
    DEAD_LETTERS,
    ERASURE_REQUESTS,
    ERASURES,
    RECALL_INDEX,
    RECALL_INDEXES,
    SHARD_KEYS,
    SLICE_ID_CLAIMS,
    TOMBSTONE_RETENTION,
    UNIT_FINGERPRINT_INDEX,
    UNIT_INDEXES,
    UNITS,
    UNSUMMARIZED_INDEX,
)
from partner_repo.mongo._masking import (
    SECRETS,
    SecretsFilter,
    library_logger,
    mask_uri,
    remember_secrets,
    scrub,
)
from partner_repo.mongo._storage import (
    DERIVED_FIELDS,
    DERIVED_PROJECTION,
    ERASED,
    ERASED_AT,
    MAX_DOCUMENT_BYTES,
    MAX_MESSAGE_BYTES,
    MAX_SUMMARY_BYTES,
    NOT_ERASED,
    ROLL_RESERVE_BYTES,
    append_size,
    array_elements_size,
    bson_size,
    field_size_change,
    has_derived_fields,
    insert_new,
    is_tombstone,
    live,
    mark_size_change,
    marked,
    messages_bytes,
    slice_document,
    slice_from_document,
    stored_datetime,
    stored_messages,
    unit_document,
    unit_from_document,
    with_mark,
)
from partner_repo.mongo._topology import Topology, index_refusal, topology_of

__all__ = [
    "ALL_INDEXES",
    "ASCENDING",
    "Binary",
    "BinaryVectorDtype",
    "BulkWriteError",
    "CHECKPOINTS",
    "CORES",
    "ConfigurationError",
    "Connecting",
    "ConnectionFailure",
    "DEAD_LETTERS",
    "DEFAULTS",
    "DEFAULT_DATABASE",
    "DERIVED_FIELDS",
    "DERIVED_PROJECTION",
    "DESCENDING",
    "DOCUMENT_MODELS",
    "Database",
    "DeleteMany",
    "DocumentTooLarge",
    "DuplicateKeyError",
    "ERASED",
    "ERASED_AT",
    "ERASURES",
    "ERASURE_REQUESTS",
    "InvalidOperation",
    "MAX_DOCUMENT_BYTES",
    "MAX_MESSAGE_BYTES",
    "MAX_SUMMARY_BYTES",
    "MongoDatabase",
    "NOT_ERASED",
    "OperationFailure",
    "PyMongoError",
    "RECALL_INDEX",
    "RECALL_INDEXES",
    "ROLL_RESERVE_BYTES",
    "ReadConcern",
    "ReadPreference",
    "ReplaceOne",
    "ReturnDocument",
    "SECRETS",
    "SHARD_KEYS",
    "SLICE_ID_CLAIMS",
    "SecretsFilter",
    "TOMBSTONE_RETENTION",
    "Topology",
    "UNITS",
    "UNIT_FINGERPRINT_INDEX",
    "UNIT_INDEXES",
    "UNSUMMARIZED_INDEX",
    "URI_SCHEMES",
    "UpdateOne",
    "append_size",
    "array_elements_size",
    "bson_size",
    "close_database",
    "connect",
    "database_name_problem",
    "driver",
    "ensure_indexes",
    "field_size_change",
    "has_derived_fields",
    "in_memory_database",
    "index_refusal",
    "init_repository",
    "insert_new",
    "is_tombstone",
    "library_logger",
    "live",
    "mark_size_change",
    "marked",
    "mask_uri",
    "messages_bytes",
    "remember_secrets",
    "scrub",
    "slice_document",
    "slice_from_document",
    "stored_datetime",
    "stored_messages",
    "topology_of",
    "unit_document",
    "unit_from_document",
    "uri_database",
    "with_mark",
]

"""The embedded backend's store: reads served from the indexes the application declared.

mongomock keeps each collection's documents in one ordered dict and answers every filter by testing every
document, so a read costs the size of the collection whatever it asks for, and an in-memory database grows
slower with each document a test or a benchmark adds. A server reads through its indexes instead; this
module gives the embedded backend the same shape of cost, for the indexes ``create_index`` declared:

- each declared index whose first field is a top-level field keeps, in memory, the documents of each value
  of that field and, when it has a second top-level field, of each pair of values (an array is indexed
  element by element, as a multikey index is); an equality filter on ``_id`` reads the document directly;
- a filter with an equality (or ``$in``) on an index's first field, and optionally an equality, ``$in`` or
  range on its second, is answered by testing only the documents those keys name (the smallest such set),
  in the collection's natural order; any other filter tests every document, as before;
- every candidate is still tested with mongomock's own matcher, so an index only ever narrows the documents
  tested: a value it cannot key (a nested array, a regex, null) makes the document a candidate of every
  lookup on that index, or the filter a full scan.

The keys stay exact under every write: inserts, replacements and deletes go through the store
(:class:`IndexedCollectionStore`), and an update, which mongomock applies to the stored document in place,
re-indexes the documents it was handed (:class:`IndexedCollection`). A replacement, or an update of
top-level fields, of the document a string or integer ``_id`` names (what an index write's fence and
counters are) is made in one pass and stored through the store (:mod:`partner_repo.mongo._writes_by_id`).
Every collection of an :class:`IndexedClient` is an :class:`IndexedCollection` (``get_database``,
``get_collection`` and ``with_options`` keep the class); a document handed out by the store's generic
``documents`` iterator is re-indexed before the next lookup, in case something outside these classes
changed it in place.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import mongomock
from mongomock import helpers
from mongomock.collection import validate_ok_for_replace, validate_ok_for_update
from mongomock.filtering import filter_applies
from mongomock.results import UpdateResult  # type: ignore[attr-defined]
from mongomock.store import CollectionStore, DatabaseStore, ServerStore

from partner_repo.mongo._bulk_requests import apply_requests
from partner_repo.mongo._copying import projected, projection_tree
from partner_repo.mongo._keying import MISSING, Index, point_keys
from partner_repo.mongo._writes_by_id import replace_by_id, update_by_id

if TYPE_CHECKING:  # mongomock's stubs make these generic; at run time they are plain classes
    _Collection = mongomock.Collection[Any]
    _Database = mongomock.Database[Any]
    _Client = mongomock.MongoClient[Any]
else:
    _Collection, _Database, _Client = mongomock.Collection, mongomock.Database, mongomock.MongoClient


class IndexedCollectionStore(CollectionStore):
    """A mongomock collection store that keeps the keys of its declared indexes (see the module)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)  # type: ignore[no-untyped-call]
        self._indexes: dict[str, Index] = {}
        self._entries: dict[Any, dict[str, list[tuple[Any, Any]]]] = {}
        self._order: dict[Any, int] = {}
        self._next = 0
        self._dirty: set[Any] = set()
        self.touched: list[Any] | None = None
        """While an update runs: the keys of the documents it was handed (re-indexed after it)."""

    # -- the store's writes --------------------------------------------------------------------------------

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)  # type: ignore[no-untyped-call]
        if key not in self._order:
            self._order[key] = self._next
            self._next += 1
        self._index(key, value)

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)  # type: ignore[no-untyped-call]
        self._unindex(key)
        self._order.pop(key, None)
        self._dirty.discard(key)

    def drop(self) -> None:
        super().drop()  # type: ignore[no-untyped-call]
        self._indexes = {}
        self._entries = {}
        self._order = {}
        self._dirty = set()

    def create_index(self, index_name: str, index_dict: dict[str, Any]) -> None:
        super().create_index(index_name, index_dict)  # type: ignore[no-untyped-call]
        fields = [(str(field), direction) for field, direction in index_dict.get("key", [])]
        plain = [field for field, direction in fields[:2] if "." not in field and direction in (1, -1)]
        if not plain or plain[0] != fields[0][0] or plain[0] == "_id":
            return  # a dotted, hashed or text first field, or _id (read directly): not kept
        index = Index(plain[0], plain[1] if len(plain) > 1 else None)
        self._indexes[index_name] = index
        with self._rwlock.reader():
            stored = list(self._documents.items())
        for key, document in stored:
            entries = index.entries(document)
            self._entries.setdefault(key, {})[index_name] = entries
            index.add(key, entries)

    def drop_index(self, index_name: str) -> None:
        super().drop_index(index_name)  # type: ignore[no-untyped-call]
        self._indexes.pop(index_name, None)
        for entries in self._entries.values():
            entries.pop(index_name, None)

    @property
    def documents(self) -> Iterator[Any]:
        """Every document, each marked for re-indexing (the caller may change it in place)."""
        for document in super().documents:
            self._dirty.add(_store_key(document))
            yield document

    # -- lookups -------------------------------------------------------------------------------------------

    def candidates(self, query: Any) -> list[Any] | None:
        """The documents that may match ``query``, in natural order, or None when no index narrows them."""
        found = self.lookup(query)
        return None if found is None else found[0]

    def lookup(self, query: Any) -> tuple[list[Any], bool] | None:
        """:meth:`candidates`, and whether they all match (the keys answer the query exactly: the matcher
        need not test them again), or None."""
        self._flush()
        if not isinstance(query, Mapping):
            return None
        keys, exact = self._by_id(query), _exact_id(query)
        if keys is None:
            keys, exact = self._by_index(query)
        if keys is None:
            return None
        ordered = sorted((key for key in keys if key in self._order), key=self._order.__getitem__)
        with self._rwlock.reader():
            return [self._documents[key] for key in ordered], exact

    def _by_index(self, query: Mapping[str, Any]) -> tuple[set[Any] | None, bool]:
        """The smallest set of candidates an index gives: those that narrow on both their fields are read
        (the smallest wins); only when none does, one index that narrows on its first field. An index is not
        read when a better one exists (reading a first field's keys costs the core's size)."""
        usable = [(index.narrows(query), index) for index in self._indexes.values()]
        best: tuple[set[Any] | None, bool] = (None, False)
        for index in [index for fields, index in usable if fields == 2]:
            found = index.lookup(query)
            if found is not None and (best[0] is None or len(found) < len(best[0])):
                best = (found, index.exact(query))
        if best[0] is None:
            first = next((index for fields, index in usable if fields == 1), None)
            if first is not None:
                best = (first.lookup(query), first.exact(query))
        return best

    def every_document(self) -> list[Any]:
        """Every document in natural order, without marking them (the caller only reads them)."""
        self._flush()
        with self._rwlock.reader():
            return list(self._documents.values())

    def mark_dirty(self, key: Any) -> None:
        """Key this document again before the next lookup (it is being changed in place)."""
        self._dirty.add(key)

    def reindex(self, keys: Iterable[Any]) -> None:
        """Key these documents again (an update changed them in place)."""
        self._dirty.update(keys)
        self._flush()

    def _by_id(self, query: Mapping[str, Any]) -> set[Any] | None:
        keys = point_keys(query.get("_id", MISSING))
        if keys is None:
            return None
        return {_stored_id(value) for value in _id_values(query["_id"])}

    def _flush(self) -> None:
        if not self._dirty:
            return
        dirty, self._dirty = self._dirty, set()
        with self._rwlock.reader():
            present = {key: self._documents.get(key) for key in dirty}
        for key, document in present.items():
            if document is None:
                self._unindex(key)
            else:
                self._index(key, document)

    def _index(self, key: Any, document: Mapping[str, Any]) -> None:
        self._unindex(key)
        entries: dict[str, list[tuple[Any, Any]]] = {}
        for name, index in self._indexes.items():
            entries[name] = index.entries(document)
            index.add(key, entries[name])
        self._entries[key] = entries

    def _unindex(self, key: Any) -> None:
        for name, entries in self._entries.pop(key, {}).items():
            index = self._indexes.get(name)
            if index is not None:
                index.remove(key, entries)


def _exact_id(query: Mapping[str, Any]) -> bool:
    """Whether an ``_id`` lookup answers ``query`` exactly: ``_id`` alone, strings or integers."""
    keys = point_keys(query.get("_id", MISSING)) if set(query) == {"_id"} else None
    return keys is not None and all(type(key) in (str, int) for key in keys)


def _id_values(condition: Any) -> list[Any]:
    if isinstance(condition, Mapping) and "$in" in condition:
        return list(condition["$in"])
    if isinstance(condition, Mapping) and "$eq" in condition:
        return [condition["$eq"]]
    return [condition]


def _stored_id(value: Any) -> Any:
    """The key mongomock stores a document under for this ``_id``."""
    return helpers.hashdict(value) if isinstance(value, dict) else value


def _store_key(document: Mapping[str, Any]) -> Any:
    return _stored_id(document.get("_id"))


class IndexedDatabaseStore(DatabaseStore):
    """Creates :class:`IndexedCollectionStore` collections."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]

    def __getitem__(self, name: str) -> CollectionStore:
        try:
            return self._collections[name]  # type: ignore[no-any-return]
        except KeyError:
            collection = self._collections[name] = IndexedCollectionStore(name)
            return collection

    def rename(self, name: str, new_name: str) -> None:
        collection = self._collections.pop(name, None) or IndexedCollectionStore(new_name)
        collection.name = new_name
        self._collections[new_name] = collection


class IndexedServerStore(ServerStore):
    """Creates :class:`IndexedDatabaseStore` databases."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]

    def __getitem__(self, name: str) -> DatabaseStore:
        try:
            return self._databases[name]  # type: ignore[no-any-return]
        except KeyError:
            database = self._databases[name] = IndexedDatabaseStore()
            return database


class IndexedCollection(_Collection):
    """A mongomock collection whose filters go through its store's indexes (see the module)."""

    def _iter_documents(self, filter: Any) -> Iterator[Any]:
        store = self._store
        if not isinstance(store, IndexedCollectionStore):
            return super()._iter_documents(filter)  # type: ignore[misc,no-any-return]
        if store.is_empty:
            filter_applies(filter, {})  # validates the filter, as mongomock does
        found = store.lookup(filter)
        documents, exact = (store.every_document(), False) if found is None else found
        return _matching(documents, None if exact else filter, store)

    def _update(self, *args: Any, **kwargs: Any) -> Any:
        store = self._store
        if not isinstance(store, IndexedCollectionStore):
            return super()._update(*args, **kwargs)
        outer, store.touched = store.touched, []
        try:
            return super()._update(*args, **kwargs)
        finally:
            touched, store.touched = store.touched, outer
            store.reindex(touched)
            if outer is not None:
                outer.extend(touched)

    def with_options(self, *args: Any, **kwargs: Any) -> Any:
        return _kept(super().with_options(*args, **kwargs), mongomock.Collection, IndexedCollection)

    def read(self, filter: Any, projection: Any = None, limit: int = 0, copy: bool = True) -> list[Any]:
        """The documents ``filter`` matches, in natural order, copied with ``projection`` applied, at most
        ``limit`` (0: all): what ``find`` answers, without copying the documents past the limit. With
        ``copy`` False, the stored documents themselves, for stages that only read them
        (:func:`partner_repo.mongo._pushdown.reads_only`): the caller copies what they answer
        (:meth:`answer`)."""
        spec = helpers.patch_datetime_awareness_in_document(filter or {})  # type: ignore[no-untyped-call]
        if not copy:
            matching = self._iter_documents(spec)
            return list(itertools.islice(matching, limit) if limit else matching)
        aware = bool(self.codec_options.tz_aware)
        tree = projection_tree(projection)
        found: list[Any] = []
        for document in self._iter_documents(spec):
            copied = projected(document, tree, aware) if tree is not None else None
            if copied is None:  # a projection only mongomock reads (or one through an array)
                copied = self._mongomock_copy(document, projection, aware)
            found.append(copied)
            if limit and len(found) >= limit:
                break
        return found

    def answer(self, documents: list[Any]) -> list[Any]:
        """Copies of what stages computed from stored documents, with their dates made aware as ``find``
        makes them (the stages may have passed parts of the stored documents through)."""
        aware = bool(self.codec_options.tz_aware)
        return [projected(document, {}, aware) for document in documents]

    def _mongomock_copy(self, document: Any, projection: Any, aware: bool) -> Any:
        try:
            copied: Any = self._copy_only_fields(document, projection, dict)
        except (AttributeError, TypeError):  # mongomock's projection of a path through a null
            copied = self._copy_only_fields(document, None, dict)  # the pipeline's stage projects
        return helpers.make_datetime_timezone_aware_in_document(copied) if aware else copied

    def replace_one(  # type: ignore[override]
        self,
        filter: Any,
        replacement: Any,
        upsert: bool = False,
        bypass_document_validation: bool = False,
        session: Any = None,
        hint: Any = None,
    ) -> Any:
        """mongomock's ``replace_one``; a replacement by a string or integer ``_id`` (every index write's
        fence) in one pass over the replacement (:mod:`partner_repo.mongo._writes_by_id`)."""
        if session is None and hint is None and isinstance(self._store, IndexedCollectionStore):
            if not bypass_document_validation:
                validate_ok_for_replace(replacement)
            raw = replace_by_id(self, filter, replacement, upsert)
            if raw is not None:
                return UpdateResult(raw, acknowledged=True)
        return super().replace_one(filter, replacement, upsert, bypass_document_validation, session, hint)

    def update_one(  # type: ignore[override]
        self,
        filter: Any,
        update: Any,
        upsert: bool = False,
        bypass_document_validation: bool = False,
        collation: Any = None,
        array_filters: Any = None,
        hint: Any = None,
        session: Any = None,
        let: Any = None,
    ) -> Any:
        """mongomock's ``update_one``; one that sets or counts top-level fields of the document a string or
        integer ``_id`` names (every counter of an index write) without copying the document twice
        (:mod:`partner_repo.mongo._writes_by_id`)."""
        plain = all(option is None for option in (collation, array_filters, hint, session, let))
        if plain and isinstance(self._store, IndexedCollectionStore):
            if not bypass_document_validation:
                validate_ok_for_update(update)
            raw = update_by_id(self, filter, update, upsert)
            if raw is not None:
                return UpdateResult(raw, acknowledged=True)
        return super().update_one(
            filter, update, upsert, bypass_document_validation, collation, array_filters, hint, session, let
        )

    def bulk_write(  # type: ignore[override]
        self, requests: Any, ordered: bool = True, **options: Any
    ) -> Any:
        """PyMongo's ``bulk_write`` (mongomock's cannot take the requests of PyMongo 4.9+): each request is
        applied in turn through the collection's own method, an ordered batch stops at its first error, and
        errors come back as PyMongo's ``BulkWriteError``."""
        return apply_requests(self, requests, ordered)


def _matching(documents: list[Any], filter: Any, store: IndexedCollectionStore) -> Iterator[Any]:
    """The documents ``filter`` matches (all of them for None: an index answered exactly). While an update
    runs, each is marked touched (re-indexed after it) and dirty: the update changes it in place, and its
    unique-index check, which reads through the indexes, must see it as changed."""
    for document in documents:
        if filter is None or filter_applies(filter, document):  # type: ignore[no-untyped-call]
            if store.touched is not None:
                key = _store_key(document)
                store.touched.append(key)
                store.mark_dirty(key)
            yield document


class IndexedDatabase(_Database):
    """A mongomock database whose collections are :class:`IndexedCollection`."""

    def get_collection(self, *args: Any, **kwargs: Any) -> Any:
        return _kept(super().get_collection(*args, **kwargs), mongomock.Collection, IndexedCollection)

    def with_options(self, *args: Any, **kwargs: Any) -> Any:
        return _kept(super().with_options(*args, **kwargs), mongomock.Database, IndexedDatabase)


class IndexedClient(_Client):
    """A mongomock client over an :class:`IndexedServerStore`; its databases are :class:`IndexedDatabase`."""

    def __init__(self, **options: Any) -> None:
        options.setdefault("_store", IndexedServerStore())
        super().__init__(**options)

    def get_database(self, *args: Any, **kwargs: Any) -> Any:
        return _kept(super().get_database(*args, **kwargs), mongomock.Database, IndexedDatabase)


def _kept(value: Any, plain: type, indexed: type) -> Any:
    """``value`` as the indexed class when mongomock built it as the plain one."""
    if type(value) is plain:
        value.__class__ = indexed
    return value


__all__ = ["IndexedClient", "IndexedCollection", "IndexedCollectionStore"]

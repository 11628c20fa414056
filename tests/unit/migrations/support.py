"""Helpers for the migration tests: the shipped migration files, loaded as Beanie loads them."""

from __future__ import annotations

import types
import uuid
from importlib.machinery import SourceFileLoader
from pathlib import Path
from typing import Any

from beanie import init_beanie

from partner_repo import default_migrations_path, in_memory_database, init_repository

MIGRATIONS = default_migrations_path()
SHIPPED: tuple[Path, ...] = tuple(sorted(MIGRATIONS.glob("[!_]*.py")))
"""Every shipped migration, in the order they run (derived from the directory: a new file needs no edit)."""


def migration_file(suffix: str) -> Path:
    (found,) = sorted(MIGRATIONS.glob(f"*_{suffix}.py"))
    return found


NORMALIZE = migration_file("normalize_units")
INDEXES = migration_file("create_indexes")
SLICE_IDS = migration_file("slice_ids")
SLICE_INDEX = migration_file("slice_ids_index")
ERASURE_INDEXES = migration_file("erasure_indexes")
POSITIONS = migration_file("positions")


def names(paths: tuple[Path, ...]) -> tuple[str, ...]:
    return tuple(path.name for path in paths)


def shipped_from(first: Path) -> tuple[Path, ...]:
    """The shipped migrations from ``first`` on: what a forward run from just before it applies."""
    return SHIPPED[SHIPPED.index(first) :]


def shipped_before(first: Path) -> tuple[Path, ...]:
    """The shipped migrations that run before ``first``."""
    return SHIPPED[: SHIPPED.index(first)]


ERASURE_TOMBSTONES = migration_file("erasure_tombstones")
UNSUMMARIZED = migration_file("unsummarized")
CLAIMS = migration_file("slice_id_claims")
RECALL_INDEXES = migration_file("recall_indexes")
RECALL_INDEX = migration_file("recall_index")
RECALL_VECTORS = migration_file("recall_vectors")


def load(path: Path) -> types.ModuleType:
    """A fresh copy of a migration module (outside ``sys.modules``, exactly as Beanie's runner loads it)."""
    loader = SourceFileLoader(path.stem, str(path))
    module = types.ModuleType(loader.name)
    loader.exec_module(module)
    return module


async def bound(path: Path, database: Any) -> types.ModuleType:
    """A migration module whose collection binding points at ``database``, to call its functions directly."""
    module = load(path)
    await init_beanie(database=database, document_models=[module.UnitCollection])
    return module


async def fresh_database(*, indexes: bool = False) -> Any:
    """A new in-memory database with the documents registered; no indexes unless asked (migrations do)."""
    return await init_repository(in_memory_database(f"m_{uuid.uuid4().hex[:8]}"), create_indexes=indexes)

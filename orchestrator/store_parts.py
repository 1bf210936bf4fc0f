"""What the trial store's parts share: ``TrialStore`` (orchestrator.store) is built from mixins
(runs, events, controls, deletions), each kept in its own module; this base declares the
database they all use, so that each mixin can be read, and type-checked, on its own."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection, Engine

from orchestrator.store_retry import StoreRetry


class StoreParts:
    """The database of a trial store: its engine, URL and retry policy (set by
    ``TrialStore.__init__``) and its transactions."""

    engine: Engine
    url: str
    display_url: str
    retry: StoreRetry

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        with self.engine.begin() as connection:
            yield connection

    if TYPE_CHECKING:
        # Defined by RunEvents (orchestrator.store_events); every part that changes a run
        # appends its events in the same transaction.
        def _append_events(
            self,
            tx: Connection,
            events: Sequence[tuple[str, str, dict[str, Any]]],
            *,
            finished: Iterable[str] = (),
        ) -> None: ...

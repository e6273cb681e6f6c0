"""The role every typed-ledger store plays (:class:`LedgerStore`), folder or git.

Readers (replay, projection, queries) call :meth:`~LedgerStore.read`; writers (persist,
compaction) hand :meth:`~LedgerStore.run_transaction` a *plan* function that reads the
current history and returns the :class:`~ledger.typed.layout.LedgerChange` of each
ledger plus a result. A folder store runs the plan once under its lock and applies the
changes all or nothing; a git store may run it again on a fresher history when another
writer moved a branch first (compare-and-swap), so a plan must only read, never write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol, TypeVar, runtime_checkable

from ledger.typed.config import LedgerConfig
from ledger.typed.layout import LedgerChange, ShardEntry
from ledger.typed.reconstruct import Reconstruction
from ledger.typed.records import Record

__all__ = ["LedgerStore", "Plan"]

T = TypeVar("T")
Plan = Callable[[], tuple[Mapping[str, LedgerChange], T]]


@runtime_checkable
class LedgerStore(Protocol):
    """A place typed ledgers live: ``ShardStore`` (a folder) or ``GitShardStore``."""

    config: LedgerConfig | None

    def names(self) -> list[str]:
        """The ledgers that hold at least one shard file, sorted."""
        ...

    def read(self, name: str, *, max_segment_kb: int | None = None) -> Reconstruction:
        """Reconstruct ledger ``name`` (empty when absent)."""
        ...

    def entries(self, name: str) -> list[ShardEntry]:
        """The shard files of ledger ``name``."""
        ...

    def read_state(self, name: str) -> bytes | None:
        """The bytes of ``ledger/compaction/state.json``, or ``None`` when absent."""
        ...

    def segment_bytes(self, name: str) -> int:
        """The size at which appends roll to a new shard file."""
        ...

    def locked(self) -> AbstractContextManager[None]:
        """Hold the store's writer lock (readers in this thread keep working)."""
        ...

    def run_transaction(self, plan: Plan[T]) -> T:
        """Run ``plan`` on the current history and apply its changes, all or nothing."""
        ...

    def append(
        self,
        name: str,
        payloads: Iterable[Any],
        *,
        timestamp: datetime | str | None = None,
        ids: Sequence[str] | None = None,
        type: str = "ledger_append",
        max_segment_kb: int | None = None,
    ) -> list[Record]:
        """Append one record per payload; return them located."""
        ...

    def append_records(
        self, name: str, records: Sequence[Record], *, max_segment_kb: int | None = None
    ) -> list[Record]:
        """Write fully formed records as new shards."""
        ...
